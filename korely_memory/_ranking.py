"""Relevance of texts to a query: BM25 over the engine's words by default, embeddings when given.

``Ranking`` is the one object the read path and ``search`` ask: it orders facts
by relevance and picks the memories worth showing, with whichever scorer it
was built with. With embeddings and a model name, vectors are kept in the
database, so a new process does not embed every stored text again.
"""

from __future__ import annotations

import array
import hashlib
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import _database
from ._cache import TextCache
from ._errors import InvalidRequest
from ._schema import vectors
from ._types import Fact, Memory
from ._words import Words

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


def fact_text(fact: Fact) -> str:
    """What a fact is found by: its key's words and its content."""
    return findable(fact.key, fact.content)


def findable(key: str, content: str) -> str:
    """The text a fact with this key and content is found by, in the index and in relevance."""
    return f"{key.replace('-', ' ')} {content}"


class Ranking:
    """Orders facts and memories by relevance to a query, with BM25 or an embedding function."""

    def __init__(
        self, words: Words, embed: Embedder | None = None, model: str | None = None
    ) -> None:
        self.words = words
        self._lexical = Lexical(words)
        self._semantic = _Semantic(embed, model) if embed is not None else None

    @property
    def reads_every_fact(self) -> bool:
        """Embeddings have no index to look facts up by: every fact is read and scored."""
        return self._semantic is not None

    def scores(
        self, query: str, docs: Sequence[str], conn: Connection | None = None
    ) -> list[float]:
        """The relevance of each doc to ``query``; higher is more relevant, 0 is none."""
        if self._semantic is not None:
            return self._semantic.scores(query, docs, conn)
        return self._lexical.scores(query, docs)

    def facts(
        self, query: str, found: Sequence[Fact], conn: Connection | None = None
    ) -> list[Fact]:
        """Most relevant first; ties keep the order they came in (recency)."""
        scores = self.scores(query, [fact_text(f) for f in found], conn)
        order = sorted(range(len(found)), key=lambda i: -scores[i])
        return [found[i] for i in order]

    def matching_facts(
        self, query: str, found: Sequence[Fact], conn: Connection | None = None
    ) -> list[Fact]:
        """The facts relevant to ``query`` at all, most relevant first."""
        scores = self.scores(query, [fact_text(f) for f in found], conn)
        order = sorted((i for i in range(len(found)) if scores[i] > 0), key=lambda i: -scores[i])
        return [found[i] for i in order]

    def memories(
        self, query: str | None, kept: Sequence[Memory], conn: Connection | None = None
    ) -> list[Memory]:
        """Memories worth showing: those that match the query, best first; without one, all."""
        if not query or not kept:
            return list(kept)
        scores = self.scores(query, [m.content for m in kept], conn)
        order = sorted((i for i in range(len(kept)) if scores[i] > 0), key=lambda i: -scores[i])
        return [kept[i] for i in order]

    def save_vectors(self, conn: Connection) -> None:
        """Keep the vectors computed since the last call (a write transaction of the engine's)."""
        if self._semantic is not None:
            self._semantic.save(conn)

    @property
    def has_unsaved_vectors(self) -> bool:
        """Whether vectors computed during reads wait to be kept."""
        return self._semantic is not None and bool(self._semantic.unsaved)


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


class _Semantic:
    """Cosine similarity with an embedding function; vectors of stored text are cached, and kept
    in the database under ``model`` when one is named."""

    def __init__(self, embed: Embedder, model: str | None, cache_bytes: int = 64 * 2**20) -> None:
        self._documents, self._query = _sides(embed)
        self._model = model
        self._cache: TextCache[str, Vector] = TextCache(
            cache_bytes, lambda text, vector: 2 * len(text) + 32 * len(vector)
        )
        self._queries: TextCache[str, Vector] = TextCache(
            cache_bytes // 64, lambda text, vector: 2 * len(text) + 32 * len(vector)
        )
        self._lock = threading.Lock()
        self.unsaved: dict[str, Vector] = {}

    def scores(self, query: str, docs: Sequence[str], conn: Connection | None) -> list[float]:
        found = {d: v for d in docs if (v := self._cache.get(d)) is not None}
        missing = [d for d in dict.fromkeys(docs) if d not in found]
        if missing and conn is not None and self._model is not None:
            for doc, vector in self._load(conn, missing).items():
                found[doc] = self._cache.put(doc, vector)
            missing = [d for d in missing if d not in found]
        if missing:
            for doc, vector in zip(missing, self._documents(missing), strict=True):
                found[doc] = self._cache.put(doc, list(vector))
                if self._model is not None:
                    with self._lock:
                        self.unsaved[text_hash(doc)] = found[doc]
        q = self._queries.get(query)
        if q is None:
            q = self._queries.put(query, list(self._query(query)))
        return [_cosine(q, found[d]) for d in docs]

    def _load(self, conn: Connection, docs: list[str]) -> dict[str, Vector]:
        hashes = {text_hash(d): d for d in docs}
        rows = conn.execute(
            sa.select(vectors.c.text_hash, vectors.c.vector).where(
                vectors.c.model == self._model, vectors.c.text_hash.in_(sorted(hashes))
            )
        )
        return {hashes[h]: array.array("d", blob).tolist() for h, blob in rows}

    def save(self, conn: Connection) -> None:
        with self._lock:
            todo, self.unsaved = self.unsaved, {}
        if not todo:
            return
        insert = _database.insert_ignoring_duplicates(conn, vectors)
        conn.execute(
            insert,
            [
                {"model": self._model, "text_hash": h, "vector": array.array("d", v).tobytes()}
                for h, v in sorted(todo.items())
            ],
        )


def forget_vectors(conn: Connection, texts: Sequence[str]) -> None:
    """Delete the kept vectors of these texts, whatever the model (their words are being erased)."""
    hashes = sorted({text_hash(t) for t in texts})
    for start in range(0, len(hashes), 500):
        conn.execute(vectors.delete().where(vectors.c.text_hash.in_(hashes[start : start + 500])))


def text_hash(text: str) -> str:
    """The key a text's vector is kept under: no words, only a digest."""
    return hashlib.sha256(text.encode()).hexdigest()


EMBEDDERS = (
    "must be a LangChain Embeddings, a LlamaIndex embedding, or a function from a list of texts "
    "to a list of vectors"
)


def check_embed(embed: object) -> None:
    """Refuse, naming ``embed``, what is none of the embedders the engine takes."""
    if embed is not None:
        _sides(embed)  # type: ignore[arg-type]


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
        raise InvalidRequest("embed", EMBEDDERS + f", not {type(embed).__name__}")
    if query is None:
        return documents, lambda text: documents([text])[0]
    return documents, query


def _cosine(a: Vector, b: Vector) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
