"""Workload: reads per second under concurrency, the engine against the LangGraph store.

The work is the 40-fact read at budget 800 (``QUERY``), the engine's block
against the store's search + rank + fit + render (``peers.py``). It is done by
one thread, by 8 threads sharing one engine (one store: SqliteStore is one
connection behind a lock, PostgresStore gets a pool of 8 connections), and by 8
processes each with its own. Workers start together after a few unmeasured
reads and read for a fixed time; the figure is the reads of all of them per
second of that time.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from korely_memory import MemoryEngine
from korely_memory._text._tokens import TokenCounter

from . import peers
from . import workloads as w
from .base import PEER, Databases, Sizes, Table
from .data import QUERY, items, load, person

BUDGET = 800
FACTS = 40
WARM = 5


def timed_loop(read: Callable[[], object], seconds: float, start: Any) -> int:
    """Read until ``seconds`` after everyone is ready; returns how many reads were done."""
    for _ in range(WARM):
        read()
    start.wait()
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        read()
        done += 1
    return done


def threaded(read: Callable[[], object], threads: int, seconds: float) -> float:
    """Reads per second of ``threads`` threads calling ``read``."""
    start = threading.Barrier(threads)
    counts = [0] * threads

    def run(i: int) -> None:
        counts[i] = timed_loop(read, seconds, start)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return sum(counts) / seconds


@contextlib.contextmanager
def store(where: tuple[str, str, str], pool: int = 0) -> Iterator[peers.LangGraphPeer]:
    """The LangGraph store holding the facts: (backend, SQLite path, PostgreSQL url and schema)."""
    backend, path, schema = where
    if backend == "sqlite":
        with peers.sqlite_store(path, TokenCounter(), setup=False) as peer:
            peer.size = FACTS
            yield peer
        return
    libpq, _, name = schema.partition(" ")
    with peers.postgres_store(libpq, TokenCounter(), name, pool=pool) as peer:
        peer.size = FACTS
        yield peer


def engine_process(url: str, seconds: float, start: Any) -> int:
    with MemoryEngine(url) as engine:
        who = person()
        return timed_loop(
            lambda: engine.get_context(who, QUERY, token_budget=BUDGET), seconds, start
        )


def store_process(where: tuple[str, str, str], seconds: float, start: Any) -> int:
    with store(where) as peer:
        return timed_loop(lambda: peer.read(QUERY, BUDGET), seconds, start)


def processes(work: Callable[..., int], target: object, n: int, seconds: float) -> float:
    """Reads per second of ``n`` processes each running ``work(target, seconds, start)``."""
    with w.SPAWN.Manager() as manager:
        start = manager.Barrier(n)
        with w.SPAWN.Pool(n) as pool:
            counts = pool.starmap(work, [(target, seconds, start)] * n)
    return sum(counts) / seconds


@contextlib.contextmanager
def loaded_store(dbs: Databases, backend: str) -> Iterator[tuple[str, str, str]]:
    """A LangGraph store holding the 40 facts, named so another process can open it."""
    if backend == "sqlite":
        path = os.path.join(dbs.workdir, f"langgraph-{uuid.uuid4().hex[:8]}.db")
        with peers.sqlite_store(path, TokenCounter()) as peer:
            peer.load(items(FACTS))
        yield backend, path, ""
        return
    with peers.postgres_schema(dbs.libpq()) as schema:
        where = (backend, "", f"{dbs.libpq()} {schema}")
        with peers.postgres_store(dbs.libpq(), TokenCounter(), schema) as peer:
            peer.store.setup()
            peer.load(items(FACTS))
        yield where


def concurrency(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Reads per second: 1 thread, threads on one engine or store, and processes."""
    n, seconds = sizes.concurrency, sizes.concurrency_seconds
    label = f"concurrency, {FACTS} facts, budget {BUDGET}, reads/s"
    with dbs.fresh(backend) as url:
        with MemoryEngine(url) as engine:
            load(engine, {"giulia": items(FACTS)})
            who = person()
            read = lambda: engine.get_context(who, QUERY, token_budget=BUDGET)  # noqa: E731
            mine = [threaded(read, 1, seconds), threaded(read, n, seconds)]
        mine.append(processes(engine_process, url, n, seconds))
    with loaded_store(dbs, backend) as where:
        with store(where, pool=n) as peer:
            theirs = [
                threaded(lambda: peer.read(QUERY, BUDGET), 1, seconds),
                threaded(lambda: peer.read(QUERY, BUDGET), n, seconds),
            ]
        theirs.append(processes(store_process, where, n, seconds))
    ways = ["1 thread", f"{n} threads on one engine / store", f"{n} processes"]
    for way, ours, peer_rate in zip(ways, mine, theirs, strict=True):
        table.put(f"{label}, {way}: engine", backend, ours, "{:,.0f}")
        table.put(f"{label}, {way}: {PEER}", backend, peer_rate, "{:,.0f}")
        table.put(f"{label}, {way}: engine / store", backend, ours / peer_rate, "{:.2f}x")
