"""Measure the engine and its peers on the same work, on SQLite and PostgreSQL, and print one table.

    python -m benchmarks            # the full run (about 25 minutes on 2 vCPU)
    python -m benchmarks --smoke    # tiny sizes: only checks that every workload still runs
    python -m benchmarks --only locomo --data PATH/locomo10.json   # LoCoMo (see locomo.py)

PostgreSQL is the server at ``--postgres`` (default ``$KORELY_TEST_POSTGRES_URL``,
else the local one the tests use); each workload gets a schema of its own,
dropped afterwards. Where no server answers, its column says why.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib
import itertools
import multiprocessing
import os
import platform
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator

from korely_memory import Identity, MemoryEngine
from korely_memory._text._tokens import TokenCounter

from . import concurrency, locomo, long_memories, peers, relevance
from . import workloads as w
from .base import PEER, SMOKE, Databases, Sizes, Table, in_turns
from .data import QUERY, items, load, others, person

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")


def reads(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Workload 1: get_context by number of facts and budget, without and with a reader; and the
    peers."""
    for n in sizes.facts:
        with dbs.fresh(backend) as url, MemoryEngine(url) as engine:
            load(engine, {"giulia": items(n)})
            who = person()
            for budget in sizes.budgets:
                plain = w.median_ms(
                    functools.partial(engine.get_context, who, QUERY, token_budget=budget),
                    sizes.runs,
                )
                table.put(f"get_context, {n:,} facts, budget {budget}", backend, plain)
                # The same read is kept and handed back while nothing changes: what a new query,
                # and what a read after a write, cost.
                asked = itertools.count()
                table.put(
                    f"get_context, {n:,} facts, budget {budget}, a new query each read",
                    backend,
                    w.median_ms(_new_query(engine, who, budget, asked), sizes.runs),
                )
                table.put(
                    f"get_context, {n:,} facts, budget {budget}, after a write each time",
                    backend,
                    w.median_ms_after(
                        functools.partial(engine.get_context, who, QUERY, token_budget=budget),
                        _new_home(engine, who, asked),
                        sizes.runs,
                    ),
                )
                read = functools.partial(
                    engine.get_context, who, QUERY, token_budget=budget, reader=w.READER
                )
                marked = w.median_ms(read, sizes.runs)
                table.put(
                    f"get_context, {n:,} facts, budget {budget}, reader (steady)", backend, marked
                )
                table.put(
                    f"reader extra, {n:,} facts, budget {budget}",
                    backend,
                    marked - plain,
                    "{:+.2f}",
                )
                if budget == sizes.budgets[0]:
                    table.put(
                        f"steady read writes nothing, {n:,} facts",
                        backend,
                        "yes" if w.writes_nothing(engine, read) else "NO",
                    )
            engine_ms = (
                table.get(f"get_context, {n:,} facts, budget {sizes.budgets[0]}", backend) or 0.0
            )
        peer_reads(table, dbs, backend, n, sizes, engine_ms)


def _new_query(
    engine: MemoryEngine, who: Identity, budget: int, asked: Iterator[int]
) -> Callable[[], object]:
    """A read with a query no read asked before."""
    return lambda: engine.get_context(who, f"{QUERY} {next(asked)}", token_budget=budget)


def _new_home(engine: MemoryEngine, who: Identity, asked: Iterator[int]) -> Callable[[], object]:
    """A write to what the person's blocks show (a new version of a fact)."""
    return lambda: engine.correct(who, "home-city", f"Giulia lives in Milan ({next(asked)})")


def peer_reads(
    table: Table, dbs: Databases, backend: str, n: int, sizes: Sizes, engine_ms: float
) -> None:
    budget = sizes.budgets[0]
    counter = TokenCounter()
    facts = items(n)
    runs = sizes.peer_runs if n > 1_000 else sizes.runs
    stores: list[tuple[str, Callable[[], contextlib.AbstractContextManager[peers.LangGraphPeer]]]]
    if backend == "sqlite":
        path = os.path.join(dbs.workdir, f"langgraph-{uuid.uuid4().hex[:8]}.db")
        stores = [
            (PEER, lambda: peers.sqlite_store(path, counter)),
            ("LangGraph InMemoryStore", lambda: peers.in_memory(counter)),
        ]
    else:
        stores = [(PEER, lambda: peers.postgres_store(dbs.libpq(), counter))]
    for name, open_store in stores:
        with open_store() as peer:
            peer.load(facts)
            ms = w.median_ms(lambda: peer.read(QUERY, budget), runs, warm=3)
        table.put(f"{name}: search + rank + fit + render, {n:,} facts", backend, ms)
        table.put(
            f"{name} / engine, {n:,} facts (engine is N x faster)",
            backend,
            ms / engine_ms,
            "{:.1f}x",
        )
    if backend == "sqlite":
        llama = peers.LlamaIndexPeer(facts, budget, peers.offline_encode())
        ms = w.median_ms(lambda: llama.read(QUERY, budget), runs, warm=3)
        table.put(f"LlamaIndex Memory + StaticMemoryBlock get, {n:,} facts", "sqlite", ms)
        table.put(
            f"LlamaIndex Memory / engine, {n:,} facts (engine is N x faster)",
            "sqlite",
            ms / engine_ms,
            "{:.1f}x",
        )


def flat(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Workload 2: the cost of a read does not grow with other people's data, nor with one's own
    past the budget.

    The two databases compared are read in turns, batch after batch, so that
    whatever else the machine does weighs on both alike.
    """
    budget = sizes.budgets[0]

    def read(engine: MemoryEngine, who: Identity) -> Callable[[], object]:
        return functools.partial(engine.get_context, who, QUERY, token_budget=budget)

    with (
        dbs.fresh(backend) as alone_url,
        dbs.fresh(backend) as crowd_url,
        MemoryEngine(alone_url) as alone,
        MemoryEngine(crowd_url) as crowd,
    ):
        load(alone, {"giulia": items(40)})
        t = time.perf_counter()
        load(crowd, {"giulia": items(40), **others(sizes.other_owners)})
        loaded = time.perf_counter() - t
        a, c = in_turns(read(alone, person()), read(crowd, person()), sizes.runs)
    table.put("40 facts, database alone", backend, a)
    table.put(f"40 facts, with {sizes.other_owners:,} other people x 10 facts", backend, c)
    table.put("  ratio (crowded / alone)", backend, c / a, "{:.2f}x")
    table.put(
        f"  time to bulk-load {sizes.other_owners * 10:,} other facts", backend, loaded, "{:.0f} s"
    )
    with dbs.fresh(backend) as url, MemoryEngine(url) as engine:
        load(
            engine,
            {"giulia": items(sizes.one_person), "big": items(sizes.big_owner, seed=11)},
        )
        small, big = in_turns(read(engine, person()), read(engine, person("big")), sizes.runs)
    table.put(f"{sizes.one_person:,} facts of one person", backend, small)
    table.put(f"{sizes.big_owner:,} facts of one person", backend, big)
    table.put(
        f"  ratio ({sizes.big_owner:,} / {sizes.one_person:,})", backend, big / small, "{:.2f}x"
    )


def writes(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Workload 3: remember, one process, then 4 processes each for their own person."""
    with dbs.fresh(backend) as url:
        MemoryEngine(url).close()
        one = w.remember_rates(url, 1, sizes.remember)[0]
        four = w.remember_rates(url, 4, sizes.remember // 2)
    table.put("remember, 1 process (facts/s)", backend, one, "{:,.0f}")
    table.put("remember, 4 processes (facts/s per process, slowest)", backend, min(four), "{:,.0f}")
    table.put("remember, 4 processes (facts/s in all)", backend, sum(four), "{:,.0f}")


def told(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Workload 4: readers under one reader name while writers correct what they read: reader
    processes, threads of one engine, and engines of one process."""
    duplicates = lost = 0
    for shape in w.TOLD_SHAPES:
        with dbs.fresh(backend) as url:
            MemoryEngine(url).close()
            r = w.told_once(url, shape, sizes.told_readers, sizes.told_writers, sizes.told_reads)
        readers = {
            "processes": f"{sizes.told_readers} processes",
            "threads": f"{sizes.told_readers} threads of one engine",
            "engines": f"{sizes.told_readers} threads on "
            f"{w.engines_of(shape, sizes.told_readers)} engines of one process",
        }[shape]
        label = f"told once: {readers}, {sizes.told_writers} writers"
        table.put(label + ": corrections", backend, str(r.corrections))
        table.put(
            label + ": changes told (during / by the final read)",
            backend,
            f"{r.told} / {r.told_after}",
        )
        table.put(label + ": duplicates", backend, str(r.duplicates))
        table.put(label + ": lost (untold at the end)", backend, str(r.lost))
        table.put(label + ": reads (gave way)", backend, f"{r.reads:,} ({r.gave_way})")
        table.put(
            label + ": read p50 / p95 (ms)", backend, f"{r.read_p50_ms:.2f} / {r.read_p95_ms:.2f}"
        )
        duplicates += r.duplicates
        lost += r.lost
    table.figures[("duplicates", backend)] = duplicates
    table.figures[("lost", backend)] = lost


def memory(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Workload 5: the memory of a process serving many reads."""
    with dbs.fresh(backend) as url:
        MemoryEngine(url).close()
        warmed, end, peak = w.memory_profile(url, sizes.memory_reads, sizes.memory_warm)
    label = f"process serving {sizes.memory_reads:,} reads"
    table.put(label + ": peak RSS (MB)", backend, peak, "{:.0f}")
    table.put(label + ": RSS growth after warm-up (MB)", backend, end - warmed, "{:+.1f}")
    long_memories.rss(table, dbs, backend, sizes)


Workload = Callable[[Table, Databases, str, Sizes], None]


def _later(module: str, name: str) -> Workload:
    """A workload of a module imported when it runs: the frameworks that placement, store and
    server drive take seconds to import, which ``--only`` another workload need not spend."""

    def run(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
        found: Workload = getattr(importlib.import_module(f"benchmarks.{module}"), name)
        found(table, dbs, backend, sizes)

    return run


WORKLOADS: dict[str, Workload] = {
    "reads": reads,
    "flat": flat,
    "writes": writes,
    "told": told,
    "memory": memory,
    "relevance": relevance.relevance,
    "memories": long_memories.memories,
    "concurrency": concurrency.concurrency,
    "placement": _later("placement", "placement"),
    "store": _later("store", "store"),
    "locomo": locomo.locomo,
    "server": _later("server_load", "server_load"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, to check that everything runs"
    )
    parser.add_argument(
        "--postgres", default=os.environ.get("KORELY_TEST_POSTGRES_URL", DEFAULT_POSTGRES)
    )
    parser.add_argument(
        "--only", choices=sorted(WORKLOADS), action="append", help="run only these workloads"
    )
    parser.add_argument(
        "--backend", choices=BACKENDS, action="append", help="run only on these databases"
    )
    parser.add_argument(
        "--data", help="LoCoMo's locomo10.json, for the locomo workload (skipped without it)"
    )
    parser.add_argument(
        "--embed",
        help="locomo: also rank with this embedding model (provider:model, e.g. "
        "openai:text-embedding-3-small; needs its API key), or 'fake' to check the path runs",
    )
    parser.add_argument(
        "--answer",
        metavar="MODEL",
        help="locomo: have this chat model (provider:model, needs its API key) answer from the "
        "2,000-token block, judged by the same model as LoCoMo's papers judge (J score)",
    )
    args = parser.parse_args(argv)
    workloads = dict(WORKLOADS)
    workloads["locomo"] = functools.partial(
        locomo.locomo, data=args.data, embed=args.embed, answer=args.answer
    )
    sizes = SMOKE if args.smoke else Sizes()
    w.WARM = sizes.warm
    if args.smoke:
        # Tiny sizes start dozens of short-lived processes, each of which would spend longer
        # importing the workloads than working: fork them from one process that imported them.
        w.SPAWN = multiprocessing.get_context("forkserver")
        w.SPAWN.set_forkserver_preload(
            ["benchmarks.workloads", "benchmarks.concurrency", "benchmarks.long_memories"]
        )
    table = Table()
    with tempfile.TemporaryDirectory(prefix="korely-bench-") as workdir:
        dbs = Databases(args.postgres, workdir)
        for backend in args.backend or BACKENDS:
            if backend == "postgresql" and dbs.unavailable:
                print(f"PostgreSQL skipped: {dbs.unavailable}", file=sys.stderr)
                continue
            for name in args.only or WORKLOADS:
                if args.smoke:
                    # Each timing starts with a gc.collect(), which would go through every object
                    # of the imported frameworks each time: a fraction of a second at tiny sizes
                    # that take less. Whatever lives now is left out of the collections.
                    gc.freeze()
                t = time.perf_counter()
                workloads[name](table, dbs, backend, sizes)
                print(f"{backend} {name}: {time.perf_counter() - t:.0f} s", file=sys.stderr)
    print(machine())
    print()
    print(table.markdown())
    for section in table.sections:
        print()
        print(section)
    return 0


def machine() -> str:
    return (
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs, medians in ms unless said otherwise"
    )
