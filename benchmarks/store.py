"""``KorelyStore`` beside LangGraph's own stores: put, get and search at 40 / 1,000 / 10,000 items.

The same items in one namespace of each store: LangGraph's ``SqliteStore`` (SQLite) or
``PostgresStore`` (PostgreSQL), and ``KorelyStore`` on an engine of the same database. A
``put`` replaces an item with new words (a new version of its fact for korely); a ``get``
reads one item; a ``search`` lists ten items with a filter on a value field. korely's
``search`` with a query (ranked by the engine's BM25; LangGraph's stores without an index
ignore the query) has a row of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from langgraph.store.base import BaseStore, PutOp

from korely_memory import MemoryEngine
from langchain_korely import KorelyStore

from . import workloads as w
from .base import Databases, Sizes, Table, session_options
from .data import QUERY, SCHEMA_TABLES, items, vacuum_analyze

NAMESPACE = ("memories", "giulia")
KORELY = "KorelyStore"


def store(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Workload: KorelyStore against LangGraph's store on the same database."""
    peer_name = "LangGraph SqliteStore" if backend == "sqlite" else "LangGraph PostgresStore"
    for n in sizes.store_items:
        values = [
            {"content": f.content, "topic": f.key, "rank": i % 10} for i, f in enumerate(items(n))
        ]
        runs = sizes.runs if n <= 1_000 else sizes.peer_runs
        with _korely(dbs, backend) as korely, _peer(dbs, backend) as (peer, analyse_peer):
            settle = {KORELY: lambda: _analyse(korely), peer_name: analyse_peer}
            for name, s in ((KORELY, korely), (peer_name, peer)):
                for op, ms in _timed(s, values, runs, settle[name]).items():
                    table.put(f"{name}: {op}, {n:,} items", backend, ms)
            for op in ("put", "get", "search"):
                mine = table.get(f"{KORELY}: {op}, {n:,} items", backend) or 0.0
                theirs = table.get(f"{peer_name}: {op}, {n:,} items", backend) or 1.0
                table.put(
                    f"{KORELY} / LangGraph's store: {op}, {n:,} items (lower is faster)",
                    backend,
                    mine / theirs,
                    "{:.2f}x",
                )
            ranked = w.median_ms(lambda: korely.search(NAMESPACE, query=QUERY, limit=5), runs)
            table.put(f"{KORELY}: search with a query (BM25), {n:,} items", backend, ranked)


def _timed(
    s: BaseStore, values: list[dict[str, Any]], runs: int, settle: Callable[[], None]
) -> dict[str, float]:
    keys = [str(uuid.UUID(int=i)) for i in range(len(values))]
    puts = [PutOp(NAMESPACE, k, v) for k, v in zip(keys, values, strict=True)]
    for start in range(0, len(puts), 1000):
        s.batch(puts[start : start + 1000])
    settle()  # PostgreSQL's statistics, as autovacuum would gather them, for both stores
    rewrites = itertools.count()
    probe = itertools.cycle(keys)

    def put() -> None:
        n = next(rewrites)
        s.put(NAMESPACE, keys[n % len(keys)], {"content": f"rewritten {n}", "rank": n % 10})

    return {
        "put": w.median_ms(put, runs),
        "get": w.median_ms(lambda: s.get(NAMESPACE, next(probe)), runs),
        "search": w.median_ms(lambda: s.search(NAMESPACE, filter={"rank": 3}, limit=10), runs),
    }


@contextlib.contextmanager
def _korely(dbs: Databases, backend: str) -> Iterator[KorelyStore]:
    with dbs.fresh(backend) as url, MemoryEngine(url) as engine:
        yield KorelyStore(engine, account="acme", agent="assistant")


def _analyse(s: KorelyStore) -> None:
    vacuum_analyze(s.engine)


@contextlib.contextmanager
def _peer(dbs: Databases, backend: str) -> Iterator[tuple[BaseStore, Callable[[], None]]]:
    """LangGraph's store on ``backend``, and what gathers its statistics."""
    if backend == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        path = os.path.join(dbs.workdir, f"langgraph-{uuid.uuid4().hex[:8]}.db")
        with SqliteStore.from_conn_string(path) as s:
            s.setup()
            yield s, lambda: None
        return
    import psycopg
    from langgraph.store.postgres import PostgresStore

    from .peers import postgres_schema

    with postgres_schema(dbs.libpq()) as schema:
        url = dbs.libpq() + "?options=" + urllib.parse.quote(session_options(schema))

        def analyse() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                found = conn.execute(SCHEMA_TABLES).fetchone()
                assert found is not None
                conn.execute(f"VACUUM ANALYZE {found[0]}")

        with PostgresStore.from_conn_string(url) as s:
            s.setup()
            yield s, analyse
