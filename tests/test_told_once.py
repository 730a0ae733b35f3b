"""Told once under load: many readers under one name at the same moment, threads and processes."""

from __future__ import annotations

import threading
from typing import Any

from korely_memory import Identity, MemoryEngine

from .processes import PROCESSES

READERS = 8
ROUNDS = 50


def read_rounds(url: str, who: Identity, start: Any, done: Any, out: Any = None) -> list[int]:
    """Each round: wait for the change, read under the shared reader name, report what was told."""
    told: list[int] = []
    gave_way = 0
    with MemoryEngine(url) as engine:
        for _ in range(ROUNDS):
            start.wait()
            block = engine.get_context(who, "where", reader="support-bot")
            told.extend(c.was.id for c in block.changed)
            gave_way += block.changed_more is None
            done.wait()
    if out is not None:
        out.append(told)
    return told


def drive(engine: MemoryEngine, who: Identity, start: Any, done: Any) -> list[int]:
    """Make one change before each round; returns the ids of the versions that ended."""
    ended = []
    for r in range(ROUNDS):
        ended.append(engine.get_facts(who)[0].id)
        engine.correct(who, "home-city", f"Giulia lives in city number {r}")
        start.wait()
        done.wait()
    return ended


def settle_leftovers(engine: MemoryEngine, who: Identity) -> list[int]:
    """A change a read gave way on waits for the next read: collect those."""
    block = engine.get_context(who, "where", reader="support-bot", changes="all")
    told = [c.was.id for c in block.changed]
    while block.changed_more:
        block = engine.get_context(who, "where", reader="support-bot")
        told += [c.was.id for c in block.changed]
    return told


def prepare(url: str, who: Identity) -> MemoryEngine:
    engine = MemoryEngine(url)
    engine.remember(who, "home-city", "Giulia lives in Rome")
    engine.get_context(who, reader="support-bot")
    return engine


def test_told_once_with_threads(db_url: str, giulia: Identity) -> None:
    with prepare(db_url, giulia) as engine:
        start, done = (
            threading.Barrier(READERS + 1, timeout=120),
            threading.Barrier(READERS + 1, timeout=120),
        )
        results: list[list[int]] = []
        threads = [
            threading.Thread(target=read_rounds, args=(db_url, giulia, start, done, results))
            for _ in range(READERS)
        ]
        for t in threads:
            t.start()
        ended = drive(engine, giulia, start, done)
        for t in threads:
            t.join()
        told = [i for r in results for i in r] + settle_leftovers(engine, giulia)
        assert sorted(told) == sorted(ended)  # every change told, and only once


def read_in_process(url: str, who: Identity, start: Any, done: Any, results: Any) -> None:
    results.put(read_rounds(url, who, start, done))


def test_told_once_with_processes_on_postgresql(postgresql_url: str, giulia: Identity) -> None:
    # Barriers reach a process only when handed over at its start.
    start, done, results = (
        PROCESSES.Barrier(READERS + 1, timeout=120),
        PROCESSES.Barrier(READERS + 1, timeout=120),
        PROCESSES.Queue(),
    )
    procs = [
        PROCESSES.Process(
            target=read_in_process, args=(postgresql_url, giulia, start, done, results)
        )
        for _ in range(READERS)
    ]
    with prepare(postgresql_url, giulia) as engine:
        for p in procs:
            p.start()
        try:
            ended = drive(engine, giulia, start, done)
            told = [i for _ in procs for i in results.get(timeout=120)]
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
        told += settle_leftovers(engine, giulia)
    assert sorted(told) == sorted(ended)
    assert all(p.exitcode == 0 for p in procs)
