"""Okapi BM25 over the engine's words: the arithmetic, and a scorer of texts given together.

``Lexical`` scores texts handed to it (IDF over those texts), for the block and ``search``;
``bm25_idf`` and ``bm25_term`` are the weights the memories' word index scores with.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from ._cache import TextCache
from ._words import Words

MAX_CACHED_TEXT = 2000  # characters: texts up to a fact's length have their words cached


def bm25_idf(n: int, df: int) -> float:
    """How telling a word found in ``df`` of ``n`` documents is."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def bm25_term(tf: int, length: int, avg: float, k1: float = 1.2, b: float = 0.75) -> float:
    """A word's weight in one document (to multiply by its idf)."""
    norm = k1 * (1 - b + b * length / (avg or 1.0))
    return tf * (k1 + 1) / (tf + norm)


class Lexical:
    """Okapi BM25 over the engine's words, IDF taken over the documents scored together."""

    def __init__(self, words: Words) -> None:
        self._words = words
        self._cache: TextCache[str, tuple[int, Counter[str]]] = TextCache(
            4 * 2**20, lambda text, counted: 3 * len(text) + 100 * len(counted[1])
        )

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        terms = set(self._words(query))
        if not terms or not docs:
            return [0.0] * len(docs)
        counted = [self._counted(d) for d in docs]
        avg = sum(length for length, _ in counted) / len(docs) or 1.0
        hits = [tf.keys() & terms for _, tf in counted]  # set work in C: docs share few words
        df: Counter[str] = Counter()
        for found in hits:
            df.update(found)
        idf = {term: bm25_idf(len(docs), k) for term, k in df.items()}
        return [
            sum(idf[t] * bm25_term(tf[t], length, avg) for t in found)
            for (length, tf), found in zip(counted, hits, strict=True)
        ]

    def _counted(self, doc: str) -> tuple[int, Counter[str]]:
        """A document's length in words and its word counts; facts are read again and again."""
        if len(doc) > MAX_CACHED_TEXT:
            return _count(self._words(doc))
        found = self._cache.get(doc)
        return found if found is not None else self._cache.put(doc, _count(self._words(doc)))


def _count(words: list[str]) -> tuple[int, Counter[str]]:
    return len(words), Counter(words)


class Indexed:
    """Texts given together, their words counted and indexed once: ``scores`` of a query equals
    ``Lexical.scores`` of the same texts, computed for the texts that hold a query word only."""

    def __init__(self, lexical: Lexical, docs: Sequence[str]) -> None:
        self._words = lexical._words
        self._counted = [lexical._counted(d) for d in docs]
        self._avg = sum(length for length, _ in self._counted) / len(docs) if docs else 0.0
        self._holding: dict[str, list[int]] = {}
        for i, (_, tf) in enumerate(self._counted):
            for term in tf:
                self._holding.setdefault(term, []).append(i)

    def scores(self, query: str) -> list[float]:
        n = len(self._counted)
        terms = set(self._words(query))
        scores = [0.0] * n
        if not terms or not n:
            return scores
        avg = self._avg or 1.0
        idf = {t: bm25_idf(n, len(self._holding[t])) for t in terms if t in self._holding}
        held = sorted({i for t in idf for i in self._holding[t]})
        for i in held:
            length, tf = self._counted[i]
            scores[i] = sum(idf[t] * bm25_term(tf[t], length, avg) for t in tf.keys() & terms)
        return scores
