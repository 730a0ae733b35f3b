"""Relevance of texts to a query: lexical BM25 by default, embeddings when the application gives them."""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

_WORD = re.compile(r"\w+", re.UNICODE)

Embed = Callable[[list[str]], list[list[float]]]


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bm25(query: str, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 score of each doc against ``query``, IDF taken over ``docs``."""
    terms = set(words(query))
    if not terms or not docs:
        return [0.0] * len(docs)
    counted = [_counted(d) for d in docs]
    avg = sum(length for length, _ in counted) / len(docs) or 1.0
    n = len(docs)
    hits = [
        tf.keys() & terms for _, tf in counted
    ]  # set work in C: most docs share few query words
    df: Counter[str] = Counter()
    for found in hits:
        df.update(found)
    idf = {term: math.log(1 + (n - k + 0.5) / (k + 0.5)) for term, k in df.items()}
    scores = []
    for (length, tf), found in zip(counted, hits):
        if not found:
            scores.append(0.0)
            continue
        norm = k1 * (1 - b + b * length / avg)
        scores.append(sum(idf[t] * tf[t] * (k1 + 1) / (tf[t] + norm) for t in found))
    return scores


def _counted(doc: str) -> tuple[int, Counter[str]]:
    """A document's length in words and its term counts; facts are read again and again."""
    return _counted_cached(doc) if len(doc) <= 2000 else _count(doc)


def _count(doc: str) -> tuple[int, Counter[str]]:
    found = words(doc)
    return len(found), Counter(found)


_counted_cached = functools.lru_cache(maxsize=16_384)(_count)


def forget_cached_text() -> None:
    """Drop the stored texts kept for speed (after an erasure)."""
    _counted_cached.cache_clear()


def as_embed(embed: Any) -> Embed | None:
    """Accepts a LangChain ``Embeddings``, a LlamaIndex embedding, or a plain batch function."""
    if embed is None:
        return None
    if hasattr(embed, "embed_documents"):
        return embed.embed_documents  # type: ignore[no-any-return]
    if hasattr(embed, "get_text_embedding_batch"):
        return embed.get_text_embedding_batch  # type: ignore[no-any-return]
    if callable(embed):
        return embed  # type: ignore[no-any-return]
    raise TypeError(
        "embed must be a LangChain Embeddings, a LlamaIndex embedding, or a batch function"
    )


class Semantic:
    """Cosine similarity with an embedding function; vectors of stored text are cached."""

    def __init__(self, embed: Embed, cache_size: int = 20_000) -> None:
        self._embed = embed
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = cache_size

    def forget(self) -> None:
        self._cache.clear()

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        missing = [d for d in dict.fromkeys(docs) if d not in self._cache]
        vectors = self._embed([query, *missing])
        for doc, vec in zip(missing, vectors[1:]):
            self._cache[doc] = list(vec)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        q = vectors[0]
        return [_cosine(q, self._cache[d]) for d in docs]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
