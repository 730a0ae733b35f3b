"""Relevance of texts to a query: lexical BM25 by default, embeddings when the application has them.

``Ranking`` is the one object the read path asks: it orders facts by relevance
and picks the memories worth showing, with whichever scorer it was built with.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ._cache import TextCache, cached
from ._types import Fact, Memory

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_CACHED_TEXT = 2000  # characters: texts up to a fact's length have their words cached

Vector = Sequence[float]
EmbedFunction = Callable[[list[str]], Sequence[Vector]]


@runtime_checkable
class LangChainEmbeddings(Protocol):
    """What the engine uses of a LangChain ``Embeddings``."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


@runtime_checkable
class LlamaIndexEmbedding(Protocol):
    """What the engine uses of a LlamaIndex ``BaseEmbedding``."""

    def get_text_embedding_batch(self, texts: list[str], **kwargs: Any) -> list[list[float]]: ...

    def get_query_embedding(self, query: str) -> list[float]: ...


Embedder = LangChainEmbeddings | LlamaIndexEmbedding | EmbedFunction
"""What ``MemoryEngine(embed=...)`` takes: either framework's embeddings, or a batch function."""


def words(text: str) -> list[str]:
    """The words of ``text`` as the index and the scores see them: lower-cased runs of letters."""
    return _WORD.findall(text.lower())


def fact_text(fact: Fact) -> str:
    """What a fact is found by: its key's words and its content."""
    return f"{fact.key.replace('-', ' ')} {fact.content}"


class Ranking:
    """Orders facts and memories by relevance to a query, with BM25 or an embedding function."""

    def __init__(self, embed: Embedder | None = None) -> None:
        self._semantic = _Semantic(embed) if embed is not None else None

    @property
    def reads_every_fact(self) -> bool:
        """Embeddings have no index to look facts up by: every fact is read and scored."""
        return self._semantic is not None

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        """The relevance of each doc to ``query``; higher is more relevant, 0 is none."""
        if self._semantic is not None:
            return self._semantic.scores(query, docs)
        return bm25(query, docs)

    def facts(self, query: str, found: Sequence[Fact]) -> list[Fact]:
        """Most relevant first; ties keep the order they came in (recency)."""
        scores = self.scores(query, [fact_text(f) for f in found])
        order = sorted(range(len(found)), key=lambda i: -scores[i])
        return [found[i] for i in order]

    def memories(self, query: str | None, kept: Sequence[Memory]) -> list[Memory]:
        """Memories worth showing: those that match the query, best first; without one, all."""
        if not query or not kept:
            return list(kept)
        scores = self.scores(query, [m.content for m in kept])
        order = sorted((i for i in range(len(kept)) if scores[i] > 0), key=lambda i: -scores[i])
        return [kept[i] for i in order]


def bm25(query: str, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 score of each doc against ``query``, IDF taken over ``docs``."""
    terms = set(words(query))
    if not terms or not docs:
        return [0.0] * len(docs)
    counted = [_counted(d) for d in docs]
    avg = sum(length for length, _ in counted) / len(docs) or 1.0
    n = len(docs)
    hits = [tf.keys() & terms for _, tf in counted]  # set work in C: most docs share few words
    df: Counter[str] = Counter()
    for found in hits:
        df.update(found)
    idf = {term: math.log(1 + (n - k + 0.5) / (k + 0.5)) for term, k in df.items()}
    scores = []
    for (length, tf), found in zip(counted, hits, strict=True):
        if not found:
            scores.append(0.0)
            continue
        norm = k1 * (1 - b + b * length / avg)
        scores.append(sum(idf[t] * tf[t] * (k1 + 1) / (tf[t] + norm) for t in found))
    return scores


def _count(doc: str) -> tuple[int, Counter[str]]:
    found = words(doc)
    return len(found), Counter(found)


_count_cached = cached(4 * 2**20)(_count)


def _counted(doc: str) -> tuple[int, Counter[str]]:
    """A document's length in words and its term counts; facts are read again and again."""
    return _count_cached(doc) if len(doc) <= MAX_CACHED_TEXT else _count(doc)


class _Semantic:
    """Cosine similarity with an embedding function; vectors of stored text are cached."""

    def __init__(self, embed: Embedder, cache_bytes: int = 64 * 2**20) -> None:
        self._documents, self._query = _sides(embed)
        self._cache: TextCache[str, Vector] = TextCache(
            cache_bytes, lambda text, vector: 2 * len(text) + 32 * len(vector)
        )

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        vectors = {d: v for d in docs if (v := self._cache.get(d)) is not None}
        missing = [d for d in dict.fromkeys(docs) if d not in vectors]
        if missing:
            for doc, vector in zip(missing, self._documents(missing), strict=True):
                vectors[doc] = self._cache.put(doc, list(vector))
        q = self._query(query)
        return [_cosine(q, vectors[d]) for d in docs]


def _sides(embed: Embedder) -> tuple[EmbedFunction, Callable[[str], Vector]]:
    """The document side and the query side of ``embed`` (the same function when it has one)."""
    documents: EmbedFunction
    if hasattr(embed, "embed_documents"):
        documents = embed.embed_documents
        query = getattr(embed, "embed_query", None)
    elif hasattr(embed, "get_text_embedding_batch"):
        documents = embed.get_text_embedding_batch
        query = getattr(embed, "get_query_embedding", None)
    elif callable(embed):
        documents, query = embed, None
    else:
        raise TypeError(
            "embed must be a LangChain Embeddings, a LlamaIndex embedding, or a function from a "
            "list of texts to a list of vectors"
        )
    if query is None:
        return documents, lambda text: documents([text])[0]
    return documents, query


def _cosine(a: Vector, b: Vector) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
