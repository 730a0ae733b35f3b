"""Measure the engine and its peers on the same work, on SQLite and PostgreSQL, and print one table.

    python -m benchmarks            # the full run (about 15 minutes on 2 vCPU)
    python -m benchmarks --smoke    # tiny sizes: only checks that every workload still runs

PostgreSQL is the server at ``--postgres`` (default ``$KORELY_TEST_POSTGRES_URL``,
else the local one the tests use); each workload gets a schema of its own,
dropped afterwards. Where no server answers, its column says why.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import sqlalchemy as sa

from korely_memory import MemoryEngine
from korely_memory._tokens import TokenCounter

from . import peers
from . import workloads as w
from .data import QUERY, items, load, others, person

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")
PEER = "LangGraph SqliteStore / PostgresStore"


@dataclass(frozen=True)
class Sizes:
    facts: tuple[int, ...] = (40, 1_000, 10_000)
    budgets: tuple[int, ...] = (800, 4_000)
    runs: int = 200
    peer_runs: int = 30
    other_owners: int = 100_000
    big_owner: int = 100_000
    remember: int = 2_000
    told_readers: int = 8
    told_writers: int = 2
    told_seconds: float = 10.0
    memory_reads: int = 10_000
    memory_warm: int = 1_000


SMOKE = Sizes(
    facts=(40, 200),
    budgets=(800,),
    runs=3,
    peer_runs=2,
    other_owners=200,
    big_owner=400,
    remember=20,
    told_readers=2,
    told_writers=1,
    told_seconds=0.5,
    memory_reads=50,
    memory_warm=10,
)


@dataclass
class Table:
    rows: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    figures: dict[tuple[str, str], float] = field(default_factory=dict)

    def put(self, label: str, backend: str, value: float | str, fmt: str = "{:.2f}") -> None:
        if isinstance(value, float | int):
            self.figures[(label, backend)] = float(value)
            text = fmt.format(value)
        else:
            text = value
        for name, cells in self.rows:
            if name == label:
                cells[backend] = text
                return
        self.rows.append((label, {backend: text}))

    def get(self, label: str, backend: str) -> float | None:
        return self.figures.get((label, backend))

    def markdown(self) -> str:
        out = ["| workload | SQLite | PostgreSQL |", "|---|---:|---:|"]
        out += [
            f"| {name} | {cells.get('sqlite', '–')} | {cells.get('postgresql', '–')} |"
            for name, cells in self.rows
        ]
        return "\n".join(out)


class Databases:
    """Fresh, empty databases: a SQLite file, or a PostgreSQL schema dropped afterwards."""

    def __init__(self, postgres: str, workdir: str) -> None:
        self.postgres = sa.make_url(postgres)
        self.workdir = workdir
        self.unavailable: str | None = None
        try:
            probe = sa.create_engine(self.postgres, connect_args={"connect_timeout": 3})
            with probe.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            probe.dispose()
        except Exception as exc:  # any failure means no PostgreSQL for this run
            self.unavailable = f"PostgreSQL not reachable: {exc.__class__.__name__}"

    @contextlib.contextmanager
    def fresh(self, backend: str) -> Iterator[str]:
        name = f"korely_bench_{uuid.uuid4().hex[:10]}"
        if backend == "sqlite":
            yield f"sqlite:///{os.path.join(self.workdir, name)}.db"
            return
        admin = sa.create_engine(self.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        try:
            yield self.postgres.update_query_dict(
                {"options": f"-csearch_path={name}"}
            ).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
            admin.dispose()

    def libpq(self) -> str:
        return self.postgres.set(drivername="postgresql").render_as_string(hide_password=False)


def reads(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Workload 1: get_context by number of facts and budget, without and with a reader; and the peers."""
    for n in sizes.facts:
        with dbs.fresh(backend) as url, MemoryEngine(url) as engine:
            load(engine, {"giulia": items(n)})
            who = person()
            for budget in sizes.budgets:
                plain = w.median_ms(
                    lambda: engine.get_context(who, QUERY, token_budget=budget), sizes.runs
                )
                table.put(f"get_context, {n:,} facts, budget {budget}", backend, plain)
                read = lambda: engine.get_context(who, QUERY, token_budget=budget, reader=w.READER)  # noqa: E731
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
    """Workload 2: the cost of a read does not grow with other people's data, nor with one's own past the budget.

    The two databases compared are read in turns, batch after batch, so that
    whatever else the machine does weighs on both alike.
    """
    budget = sizes.budgets[0]
    read = lambda engine, who: lambda: engine.get_context(who, QUERY, token_budget=budget)  # noqa: E731
    with dbs.fresh(backend) as alone_url, dbs.fresh(backend) as crowd_url:
        with MemoryEngine(alone_url) as alone, MemoryEngine(crowd_url) as crowd:
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
        load(engine, {"giulia": items(1_000), "big": items(sizes.big_owner, seed=11)})
        small, big = in_turns(read(engine, person()), read(engine, person("big")), sizes.runs)
    table.put("1,000 facts of one person", backend, small)
    table.put(f"{sizes.big_owner:,} facts of one person", backend, big)
    table.put(f"  ratio ({sizes.big_owner:,} / 1,000)", backend, big / small, "{:.2f}x")


def in_turns(
    first: Callable[[], object], second: Callable[[], object], runs: int
) -> tuple[float, float]:
    """Medians of two reads measured in alternating batches."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(5):
        a.append(w.median_ms(first, max(1, runs // 5), warm=5))
        b.append(w.median_ms(second, max(1, runs // 5), warm=5))
    return statistics.median(a), statistics.median(b)


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
    """Workload 4: readers under one reader name while writers correct what they read."""
    with dbs.fresh(backend) as url:
        MemoryEngine(url).close()
        r = w.told_once(url, sizes.told_readers, sizes.told_writers, sizes.told_seconds)
    label = f"told once: {sizes.told_readers} readers, {sizes.told_writers} writers, {sizes.told_seconds:g} s"
    table.put(label + ": corrections", backend, str(r.corrections))
    table.put(
        label + ": changes told (during / by the final read)", backend, f"{r.told} / {r.told_after}"
    )
    table.put(label + ": duplicates", backend, str(r.duplicates))
    table.put(label + ": lost (untold at the end)", backend, str(r.lost))
    table.put(label + ": reads (gave way)", backend, f"{r.reads:,} ({r.gave_way})")
    table.put(
        label + ": read p50 / p95 (ms)", backend, f"{r.read_p50_ms:.2f} / {r.read_p95_ms:.2f}"
    )
    table.figures[("duplicates", backend)] = r.duplicates
    table.figures[("lost", backend)] = r.lost


def memory(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Workload 5: the memory of a process serving many reads."""
    with dbs.fresh(backend) as url:
        MemoryEngine(url).close()
        warmed, end, peak = w.memory_profile(url, sizes.memory_reads, sizes.memory_warm)
    label = f"process serving {sizes.memory_reads:,} reads"
    table.put(label + ": peak RSS (MB)", backend, peak, "{:.0f}")
    table.put(label + ": RSS growth after warm-up (MB)", backend, end - warmed, "{:+.1f}")


WORKLOADS = {"reads": reads, "flat": flat, "writes": writes, "told": told, "memory": memory}


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
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else Sizes()
    table = Table()
    with tempfile.TemporaryDirectory(prefix="korely-bench-") as workdir:
        dbs = Databases(args.postgres, workdir)
        for backend in args.backend or BACKENDS:
            if backend == "postgresql" and dbs.unavailable:
                print(f"PostgreSQL skipped: {dbs.unavailable}", file=sys.stderr)
                continue
            for name in args.only or WORKLOADS:
                t = time.perf_counter()
                WORKLOADS[name](table, dbs, backend, sizes)
                print(f"{backend} {name}: {time.perf_counter() - t:.0f} s", file=sys.stderr)
    print(machine())
    print()
    print(table.markdown())
    return 0


def machine() -> str:
    return (
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
        f"medians in ms unless said otherwise"
    )
