"""The engine's workloads: reads by size, writes, told-once under load, memory of a long-lived
process.

Workers that run in processes of their own are plain top-level functions, so
the ``spawn`` start method can import them; each opens its own engine.
"""

from __future__ import annotations

import gc
import multiprocessing
import resource
import statistics
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from korely_memory import MemoryEngine
from korely_memory._db._schema import marks

from .data import QUERY, items, load, person

READER = "support-bot"
SPAWN = multiprocessing.get_context("spawn")
WARM: int | None = None  # at most this many unmeasured runs before a timing (``Sizes.warm``)


def _warm(asked: int) -> int:
    return asked if WARM is None else min(asked, WARM)


def median_ms(work: Callable[[], object], runs: int, warm: int = 10) -> float:
    """Median wall time of ``work`` in milliseconds, after ``warm`` unmeasured runs."""
    for _ in range(_warm(warm)):
        work()
    gc.collect()
    times = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        work()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1e6


def median_ms_after(
    work: Callable[[], object], before: Callable[[], object], runs: int, warm: int = 3
) -> float:
    """Median wall time of ``work`` in milliseconds, each run after ``before`` (not timed)."""
    for _ in range(_warm(warm)):
        before()
        work()
    times = []
    for _ in range(runs):
        before()
        t = time.perf_counter_ns()
        work()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1e6


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] if ordered else float("nan")


def writes_nothing(engine: MemoryEngine, read: Callable[[], object]) -> bool:
    """Whether a read leaves every table as it was (a steady read must write nothing)."""
    from korely_memory._db._schema import Base

    def snapshot() -> list[list[tuple[Any, ...]]]:
        with engine.db.connect() as conn:
            return [
                [tuple(r) for r in conn.execute(sa.select(t))] for t in Base.metadata.sorted_tables
            ]

    before = snapshot()
    read()
    return snapshot() == before


# -- writes -------------------------------------------------------------------


def remember_worker(url: str, user: str, n: int, start: Any) -> float:
    """Record ``n`` new facts for ``user``; returns facts per second."""
    with MemoryEngine(url) as engine:
        who = person(user)
        engine.remember(who, "warm-up", "A first fact, so the connection is open")
        facts = items(n + 1, seed=zlib.crc32(user.encode()))[1:]
        if start is not None:
            start.wait()
        t = time.perf_counter()
        for f in facts:
            engine.remember(who, f.key, f.content)
        return n / (time.perf_counter() - t)


def remember_rates(url: str, processes: int, n: int) -> list[float]:
    """Facts per second of each of ``processes`` processes writing at once, each for its own
    person."""
    if processes == 1:  # in a process of its own, as an application would be
        with SPAWN.Pool(1) as pool:
            return [pool.apply(remember_worker, (url, "writer-0", n, None))]
    with SPAWN.Manager() as manager:
        start = manager.Barrier(processes)
        with SPAWN.Pool(processes) as pool:
            return pool.starmap(
                remember_worker,
                [(url, f"writer-{p}-{processes}", n, start) for p in range(processes)],
            )


# -- told once under load ---------------------------------------------------------

# The shapes the readers take: processes each with an engine, threads of one engine, and
# engines of one process with threads each (a server, an agent serving many conversations).
TOLD_SHAPES = ("processes", "threads", "engines")
ENGINES = 4  # engines of the "engines" shape (at most one a reader); its readers spread over them


def engines_of(shape: str, readers: int) -> int:
    """How many engines of this process the readers of ``shape`` read through (0: none)."""
    return {"processes": 0, "threads": 1, "engines": min(ENGINES, readers)}[shape]


def read_told(
    engine: MemoryEngine, stop: Any, count: Any
) -> tuple[list[tuple[int, int | None]], list[float], int]:
    """Read under one reader name until told to stop: the changes told (was, now), each read's
    time, give-ways. ``count`` (a shared integer) counts the reads."""
    told: list[tuple[int, int | None]] = []
    times: list[float] = []
    gave_way = 0
    who = person()
    while not stop.is_set():
        t = time.perf_counter_ns()
        block = engine.get_context(who, QUERY, reader=READER)
        times.append((time.perf_counter_ns() - t) / 1e6)
        told += [(c.was.id, None if c.now is None else c.now.id) for c in block.changed]
        gave_way += block.changed_more is None
        with count.get_lock():
            count.value += 1
    return told, times, gave_way


def reader_worker(url: str, stop: Any, ready: Any, count: Any, out: Any) -> None:
    """A reader process: one engine, ``read_told`` until stopped; its results go to ``out``."""
    with MemoryEngine(url) as engine:
        engine.get_context(person(), QUERY, reader=READER)
        ready.wait()
        out.put(read_told(engine, stop, count))


def writer_worker(url: str, index: int, keys: list[str], stop: Any, ready: Any, out: Any) -> None:
    """Correct this writer's keys in turn until told to stop; puts how many it made."""
    made = 0
    who = person()
    with MemoryEngine(url) as engine:
        ready.wait()
        while not stop.is_set():
            key = keys[made % len(keys)]
            engine.correct(who, key, f"Correction {made} by writer {index} of {key}")
            made += 1
            time.sleep(0.005)
    out.put(made)


@dataclass
class ToldOnce:
    corrections: int
    told: int
    told_after: int
    duplicates: int
    lost: int
    reads: int
    gave_way: int
    read_p50_ms: float
    read_p95_ms: float


def repeats(told: list[tuple[int, int | None]]) -> int:
    """How many tellings repeat an earlier one: an ended version told again, or a version told
    again as what holds now."""
    ends: set[int] = set()
    nows: set[int] = set()
    n = 0
    for was, now in told:
        n += was in ends or (now is not None and now in nows)
        ends.add(was)
        if now is not None:
            nows.add(now)
    return n


def told_once(
    url: str,
    shape: str,
    readers: int,
    writers: int,
    reads: int,
    cap_seconds: float = 300.0,
    facts: int = 40,
) -> ToldOnce:
    """``readers`` (processes, threads of one engine, or threads spread over ``ENGINES`` engines of
    this process, by ``shape``) read under one reader name while ``writers`` processes correct
    the facts they read, until the readers have read ``reads`` times (or ``cap_seconds``)."""
    who = person()
    with MemoryEngine(url) as engine:
        for f in items(facts):
            engine.remember(who, f.key, f.content)
        keys = [f.key for f in items(facts)]
    count = SPAWN.Value("q", 0)
    stop, out = SPAWN.Event(), SPAWN.Queue()
    in_process = shape != "processes"
    ready = SPAWN.Barrier(writers + (1 if in_process else readers))
    procs = [
        SPAWN.Process(target=writer_worker, args=(url, w, keys[w::writers], stop, ready, out))
        for w in range(writers)
    ]
    if not in_process:
        procs += [
            SPAWN.Process(target=reader_worker, args=(url, stop, ready, count, out))
            for _ in range(readers)
        ]
    for p in procs:
        p.start()
    engines = [MemoryEngine(url) for _ in range(engines_of(shape, readers))]
    results: list[Any] = []

    def read(engine: MemoryEngine) -> None:
        results.append(read_told(engine, stop, count))

    threads = [
        threading.Thread(target=read, args=(engines[i % len(engines)],))
        for i in range(readers if in_process else 0)
    ]
    try:
        for e in engines:
            e.get_context(who, QUERY, reader=READER)
        if in_process:
            ready.wait()
        for t in threads:
            t.start()
        deadline = time.monotonic() + cap_seconds
        while count.value < reads and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
        for e in engines:
            e.close()
    gathered = [out.get() for _ in range(len(procs))]
    for p in procs:
        p.join()
    made = sum(g for g in gathered if isinstance(g, int))
    results += [g for g in gathered if not isinstance(g, int)]
    told = [t for r in results for t in r[0]]
    times = [t for r in results for t in r[1]]
    with MemoryEngine(url) as engine:
        after: list[tuple[int, int | None]] = []
        while True:  # what a read gave way on waits for the next read
            block = engine.get_context(who, QUERY, reader=READER, token_budget=4000, changes="all")
            after += [(c.was.id, None if c.now is None else c.now.id) for c in block.changed]
            if not block.changed and not block.changed_more:
                break
        with engine.db.connect() as conn:
            lost = conn.execute(
                sa.select(sa.func.count())
                .select_from(marks)
                .where(
                    marks.c.reader == READER,
                    marks.c.ended_at.is_not(None),
                    marks.c.told_at.is_(None),
                )
            ).scalar_one()
    return ToldOnce(
        corrections=made,
        told=len(told),
        told_after=len(after),
        duplicates=repeats(told + after),
        lost=lost,
        reads=len(times),
        gave_way=sum(r[2] for r in results),
        read_p50_ms=statistics.median(times) if times else float("nan"),
        read_p95_ms=p95(times),
    )


# -- memory of a long-lived process ---------------------------------------------------


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _status_mb(field: str) -> float:
    """A figure of /proc/self/status, such as the peak resident size (VmHWM), which is this
    process's own."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    """This process's peak resident size."""
    return _status_mb("VmHWM")


def memory_worker(url: str, reads: int, warm: int) -> tuple[float, float, float]:
    """Serve ``reads`` reads after ``warm`` ones: (RSS after warm-up, RSS at the end, peak RSS),
    in MB."""
    who = person("memory")
    queries = [QUERY, "invoices on paper", "Milan office", None]
    with MemoryEngine(url) as engine:
        load(engine, {"memory": items(40)})
        for i in range(warm):
            engine.get_context(who, queries[i % 4], reader=READER)
        gc.collect()
        warmed = rss_mb()
        for i in range(reads):
            engine.get_context(who, queries[i % 4], reader=READER)
        gc.collect()
        end = rss_mb()
    return warmed, end, peak_rss_mb()


def memory_profile(url: str, reads: int, warm: int) -> tuple[float, float, float]:
    with SPAWN.Pool(1) as pool:
        return pool.apply(memory_worker, (url, reads, warm))
