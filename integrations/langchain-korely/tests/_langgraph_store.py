"""What the LangGraph store suites share: their fake embeddings, a clock the tests move by hand,
and KorelyStores opened and closed for one test.

``CharacterEmbeddings`` is copied unchanged from LangGraph's tests
(https://github.com/langchain-ai/langgraph, libs/checkpoint/tests/embed_test_utils.py, at
commit f09cfe8ffc1eeffd68f4b628ed69c30f7cad229f; the same class is in
libs/checkpoint-postgres/tests/embed_test_utils.py and libs/checkpoint-sqlite/tests/test_store.py).
LangGraph's tests are MIT-licensed (Copyright (c) 2024 LangChain, Inc.).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
import random
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, Item, SearchItem, TTLConfig

from korely_memory import MemoryEngine
from langchain_korely import KorelyStore

TTL_SECONDS = 6
"""LangGraph's PostgreSQL suites' TTL: 6 seconds, given in minutes."""
TTL_MINUTES = TTL_SECONDS / 60
SWEEP_SECONDS = 0.1
"""The background sweeper's interval in real time (LangGraph's: half the TTL, 3 seconds)."""


class CharacterEmbeddings(Embeddings):
    """Simple character-frequency based embeddings using random projections."""

    def __init__(self, dims: int = 50, seed: int = 42):
        """Initialize with embedding dimensions and random seed."""
        self._rng = random.Random(seed)
        self.dims = dims
        # Create projection vector for each character lazily
        self._char_projections: defaultdict[str, list[float]] = defaultdict(
            lambda: [self._rng.gauss(0, 1 / math.sqrt(self.dims)) for _ in range(self.dims)]
        )

    def _embed_one(self, text: str) -> list[float]:
        """Embed a single text."""
        counts = Counter(text)
        total = sum(counts.values())

        if total == 0:
            return [0.0] * self.dims

        embedding = [0.0] * self.dims
        for char, count in counts.items():
            weight = count / total
            char_proj = self._char_projections[char]
            for i, proj in enumerate(char_proj):
                embedding[i] += weight * proj

        norm = math.sqrt(sum(x * x for x in embedding))
        if norm > 0:
            embedding = [x / norm for x in embedding]

        return embedding

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed a list of documents."""
        return [self._embed_one(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query string."""
        return self._embed_one(text)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CharacterEmbeddings) and self.dims == other.dims


class FakeClock:
    """The engine's clock: it stands still until a test moves it on with ``advance``."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def index_config(embeddings: CharacterEmbeddings, fields: list[str] | None = None) -> IndexConfig:
    """LangGraph's vector index over ``embeddings``, on ``fields`` when given (else the whole
    value)."""
    config: IndexConfig = {"dims": embeddings.dims, "embed": embeddings}
    if fields is not None:
        config["fields"] = fields
    return config


def sweeping_ttl() -> TTLConfig:
    """The TTL of LangGraph's PostgreSQL ``store`` fixture: items live ``TTL_SECONDS``, reads
    refresh them, and the sweeper runs every ``SWEEP_SECONDS`` (real time)."""
    return {
        "default_ttl": TTL_MINUTES,
        "refresh_on_read": True,
        "sweep_interval_minutes": SWEEP_SECONDS / 60,  # type: ignore[typeddict-item]
    }


@contextlib.contextmanager
def korely_store(
    db_url: str,
    *,
    clock: FakeClock | None = None,
    index: IndexConfig | None = None,
    ttl: TTLConfig | None = None,
    sweeping: bool = False,
) -> Iterator[KorelyStore]:
    """A KorelyStore on an engine of its own at ``db_url``, closed afterwards; with
    ``sweeping``, its TTL sweeper runs in the background meanwhile."""
    with MemoryEngine(db_url, clock=clock) as engine:
        store = KorelyStore(engine, index=index, ttl=ttl)
        if sweeping:
            store.start_ttl_sweeper()
        try:
            yield store
        finally:
            if sweeping:
                store.stop_ttl_sweeper()


def score(item: SearchItem) -> float:
    """The item's score, which a search with a query and an index must give."""
    assert item.score is not None, f"{item.key} has no score"
    return item.score


def keys(items: Iterable[Item]) -> list[str]:
    return [item.key for item in items]


def namespaces(items: Iterable[Item]) -> set[tuple[str, ...]]:
    return {item.namespace for item in items}


def cosine_similarity(x: list[float], y: list[float]) -> float:
    """LangGraph's ``_cosine_similarity``, for one pair of vectors."""
    dot_product = sum(a * b for a, b in zip(x, y, strict=False))
    norm1 = sum(a * a for a in x) ** 0.5
    norm2 = sum(a * a for a in y) ** 0.5
    return dot_product / (norm1 * norm2) if norm1 > 0 and norm2 > 0 else 0.0


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Whether ``condition()`` holds within ``timeout`` seconds (what a background sweeper
    does shows up after its next run)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def aeventually(condition: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> bool:
    """``eventually`` for an async ``condition``."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True
