"""Relevance of texts to a query: BM25 over the engine's words by default, embeddings when given.

``Ranking`` is the one object the read path and ``search`` ask: it orders facts
by relevance and picks the memories worth showing, with whichever scorer it
was built with: BM25 (``_bm25``) or the cosine of embeddings (``_embedders``). With
embeddings and a model name, vectors are kept in the database (``_vectors``), so a new
process does not embed every stored text again.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

from sqlalchemy.engine import Connection

from .._store import _vectors
from .._text._bm25 import Indexed, Lexical
from .._text._cache import TextCache
from .._text._words import Words, fact_text
from .._values._embedders import Embedder, Vector, sides
from .._values._types import Fact, Memory


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
        self,
        query: str,
        docs: Sequence[str],
        conn: Connection | None = None,
        account: str | None = None,
    ) -> list[float]:
        """The relevance of each doc to ``query``; higher is more relevant, 0 is none. Vectors
        are read from and kept in ``account``'s, on ``conn``."""
        if self._semantic is not None:
            return self._semantic.scores(query, docs, conn, account)
        return self._lexical.scores(query, docs)

    def facts(
        self, query: str, found: Sequence[Fact], conn: Connection | None = None
    ) -> list[Fact]:
        """Most relevant first; ties keep the order they came in (recency)."""
        scores = self.scores(query, [fact_text(f) for f in found], conn, _account_of(found))
        order = sorted(range(len(found)), key=lambda i: -scores[i])
        return [found[i] for i in order]

    def indexed(self, found: Sequence[Fact]) -> IndexedFacts | None:
        """``found`` with their words indexed once, to order by many queries (BM25 only)."""
        if self._semantic is not None:
            return None
        return IndexedFacts(found, Indexed(self._lexical, [fact_text(f) for f in found]))

    def matching_facts(
        self, query: str, found: Sequence[Fact], conn: Connection | None = None
    ) -> list[Fact]:
        """The facts relevant to ``query`` at all, most relevant first."""
        scores = self.scores(query, [fact_text(f) for f in found], conn, _account_of(found))
        order = sorted((i for i in range(len(found)) if scores[i] > 0), key=lambda i: -scores[i])
        return [found[i] for i in order]

    def memories(
        self, query: str | None, kept: Sequence[Memory], conn: Connection | None = None
    ) -> list[Memory]:
        """Memories worth showing: those that match the query, best first; without one, all."""
        if not query or not kept:
            return list(kept)
        scores = self.scores(query, [m.content for m in kept], conn, kept[0].account)
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


class IndexedFacts:
    """Facts whose words are indexed once: ``facts`` orders them as ``Ranking.facts`` does."""

    def __init__(self, found: Sequence[Fact], index: Indexed) -> None:
        self.found = found
        self._index = index

    def facts(self, query: str) -> list[Fact]:
        """Most relevant first; ties keep the order they came in (recency)."""
        scores = self._index.scores(query)
        order = sorted(range(len(self.found)), key=lambda i: -scores[i])
        return [self.found[i] for i in order]


class _Semantic:
    """Cosine similarity with an embedding function; vectors of stored text are cached, and kept
    in the database under ``model`` when one is named."""

    def __init__(self, embed: Embedder, model: str | None, cache_bytes: int = 64 * 2**20) -> None:
        self._documents, self._query = sides(embed)
        self._model = model
        self._cache: TextCache[str, Vector] = TextCache(
            cache_bytes, lambda text, vector: 2 * len(text) + 32 * len(vector)
        )
        self._queries: TextCache[str, Vector] = TextCache(
            cache_bytes // 64, lambda text, vector: 2 * len(text) + 32 * len(vector)
        )
        self._lock = threading.Lock()
        self.unsaved: dict[tuple[str, str], Vector] = {}  # by account and text digest

    def scores(
        self, query: str, docs: Sequence[str], conn: Connection | None, account: str | None
    ) -> list[float]:
        # Kept per account, as in the database: one account's vectors say nothing of another's
        # texts, and each account's are saved under it.
        mine = "" if account is None else account + _ACCOUNT_END
        found = {d: v for d in docs if (v := self._cache.get(mine + d)) is not None}
        missing = [d for d in dict.fromkeys(docs) if d not in found]
        kept = self._model is not None and account is not None
        if missing and conn is not None and kept:
            assert self._model is not None and account is not None
            for doc, vector in _vectors.load(conn, account, self._model, missing).items():
                found[doc] = self._cache.put(mine + doc, vector)
            missing = [d for d in missing if d not in found]
        if missing:
            for doc, vector in zip(missing, self._documents(missing), strict=True):
                found[doc] = self._cache.put(mine + doc, list(vector))
                if kept:
                    assert account is not None
                    with self._lock:
                        self.unsaved[account, _vectors.text_hash(doc)] = found[doc]
        q = self._queries.get(query)
        if q is None:
            q = self._queries.put(query, list(self._query(query)))
        return [_cosine(q, found[d]) for d in docs]

    def save(self, conn: Connection) -> None:
        with self._lock:
            todo, self.unsaved = self.unsaved, {}
        if todo:
            _vectors.save(conn, self._model, todo)


_ACCOUNT_END = "\x1f"  # after the account in a cached vector's key: never in a name


def _account_of(found: Sequence[Fact]) -> str | None:
    """The account whose vectors rank ``found`` (all of one account)."""
    return found[0].account if found else None


def _cosine(a: Vector, b: Vector) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
