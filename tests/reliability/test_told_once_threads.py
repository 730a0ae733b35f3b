"""Told exactly once between the reads of one engine: threads, and engines of one process.

A server, or an agent serving many conversations, reads under one reader name from many
threads of one engine, with the engine's kept blocks on. Two reads of one name then race each
other as well as the writers: one reads from a snapshot older than the other's, and writes
its marks after it. Two interleavings are forced here, each with reads held between their
snapshot and their marks, on both databases:

* a read from an older snapshot hands over a version that a newer read's notice had already
  replaced: that version's end must not be told again;
* a read hands over a version whose mark is written after another read's snapshot and before
  its marks: the other read's notice covers it, and nothing is told twice.

Then the world: threads of one engine and engines of one process read under one name while
another engine corrects, and every change is checked against what happened, with the rule of
``test_told_once_processes`` and one more: no version is told twice as the ``now`` of a change.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from korely_memory import ContextBlock, Identity, MemoryEngine

from .test_told_once_processes import (
    SECONDS,
    Figures,
    as_read,
    assert_told_once,
    check_world,
    plant,
    reads_until,
    writes_until,
)

ACCOUNT, AGENT, BOT = "acme", "support", "support-bot"
WHO = Identity(ACCOUNT, "giulia", AGENT)


# -- reads held between their snapshot and their marks -----------------------------------


class Held:
    """A read in a thread of its own, held after its snapshot until ``finish``."""

    def __init__(self, gate: Gate, engine: MemoryEngine) -> None:
        self.reached, self.go = threading.Event(), threading.Event()
        self.block: ContextBlock | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(gate, engine))
        self.thread.start()
        assert self.reached.wait(10), "the read never reached its marks"

    def _run(self, gate: Gate, engine: MemoryEngine) -> None:
        gate.holding[threading.get_ident()] = self
        try:
            self.block = engine.get_context(WHO, "where does she live", reader=BOT)
        except BaseException as exc:  # the test's thread raises it
            self.error = exc
        finally:
            self.reached.set()

    def finish(self) -> ContextBlock:
        self.go.set()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the read never finished"
        if self.error is not None:
            raise self.error
        assert self.block is not None
        assert self.block.changed_more is not None, "the read gave way: nothing was tested"
        return self.block


class Gate:
    """Holds the reads of chosen threads between their snapshot and their marks.

    The ONE place that knows an engine internal: the marks are written by
    ``MemoryEngine._write_marks``, after the read's snapshot has closed.
    """

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.holding: dict[int, Held] = {}

    def read(self) -> Held:
        return Held(self, self.engine)


@contextmanager
def gate_on(engine: MemoryEngine) -> Iterator[Gate]:
    gate = Gate(engine)
    original = getattr(engine, "_write_marks", None)
    if original is None:
        pytest.fail("MemoryEngine._write_marks is gone: re-point Gate")

    def hooked(*args: Any, **kwargs: Any) -> Any:
        held = gate.holding.pop(threading.get_ident(), None)
        if held is not None:
            held.reached.set()
            assert held.go.wait(10), "the held read was never let go"
        return original(*args, **kwargs)

    engine._write_marks = hooked  # type: ignore[method-assign]
    try:
        yield gate
    finally:
        del engine._write_marks


def told(block: ContextBlock) -> list[tuple[str, str | None]]:
    return [(c.was.content, None if c.now is None else c.now.content) for c in block.changed]


def read(engine: MemoryEngine) -> ContextBlock:
    block = engine.get_context(WHO, "where does she live", reader=BOT)
    assert block.changed_more is not None, "the read gave way: nothing was tested"
    return block


def lives(city: str) -> str:
    return f"Giulia lives in {city}"


# -- the interleavings, forced ---------------------------------------------------------------


def test_a_read_from_an_older_snapshot_never_reopens_what_a_newer_read_told(
    db_url: str,
) -> None:
    """Rome was handed, then Florence replaced it. Read A takes its snapshot (Florence, and
    Rome's change to tell) and is held; Milan replaces Florence and read B tells "Rome -> Milan".
    A then finds Rome's change taken, and hands over Florence, which has ended. Florence's end
    is Milan, which the name was told: no read tells it again, and the next change is told
    once."""
    with MemoryEngine(db_url) as engine, MemoryEngine(db_url) as writer, gate_on(engine) as gate:
        writer.remember(WHO, "home-city", lives("Rome"))
        assert read(engine).changed == ()
        writer.correct(WHO, "home-city", lives("Florence"))
        a = gate.read()
        writer.correct(WHO, "home-city", lives("Milan"))
        assert told(read(engine)) == [(lives("Rome"), lives("Milan"))]
        shown = a.finish()
        assert told(shown) == [] and lives("Florence") in shown.text

        assert told(read(engine)) == [], "Milan was told twice"
        writer.correct(WHO, "home-city", lives("Turin"))
        assert [now for _, now in told(read(engine))] == [lives("Turin")]
        assert told(read(engine)) == []


def test_a_mark_written_behind_a_telling_read_is_told_with_it(db_url: str) -> None:
    """Read A (Rome) and read B (Florence) are held in turn; A's mark of Rome is written after
    Florence replaced it, so Rome waits. Milan replaces Florence; read C takes its snapshot
    (Rome -> Milan to tell) and is held; B's mark of Florence, ended, is written; C tells
    Milan. The name was told Milan once: no read tells "Florence -> Milan" after it."""
    with MemoryEngine(db_url) as engine, MemoryEngine(db_url) as writer, gate_on(engine) as gate:
        writer.remember(WHO, "home-city", lives("Rome"))
        a = gate.read()
        writer.correct(WHO, "home-city", lives("Florence"))
        b = gate.read()
        assert lives("Rome") in a.finish().text
        writer.correct(WHO, "home-city", lives("Milan"))
        c = gate.read()
        assert lives("Florence") in b.finish().text
        assert [now for _, now in told(c.finish())] == [lives("Milan")]

        assert told(read(engine)) == [], "Milan was told twice"
        writer.correct(WHO, "home-city", lives("Turin"))
        assert [now for _, now in told(read(engine))] == [lives("Turin")]
        assert told(read(engine)) == []


# -- the world: threads of one engine, engines of one process ---------------------------------


def run_threads(url: str, engines: int, threads: int, writers: int, label: str) -> Figures:
    """``threads`` threads on each of ``engines`` engines read under one name, while
    ``writers`` threads, each on an engine of its own, correct and forget."""
    seed = random.randrange(2**32)
    stop = threading.Event()
    out: dict[tuple[str, int], Any] = {}
    with contextlib.ExitStack() as stack:
        engine = stack.enter_context(MemoryEngine(url))
        plant(engine)
        readers = [stack.enter_context(MemoryEngine(url)) for _ in range(engines)]

        def read(i: int) -> None:
            out["read", i] = reads_until(stop, readers[i % engines], BOT, seed + i)

        def write(i: int) -> None:
            with MemoryEngine(url) as own:
                out["write", i] = writes_until(stop, own, i, seed + 1000 + i)

        def guarded(what: Callable[[int], None], i: int) -> None:
            try:
                what(i)
            except BaseException as exc:  # the test's thread raises it
                out["error", i] = exc
                stop.set()

        started = [
            threading.Thread(target=guarded, args=(read, i)) for i in range(engines * threads)
        ] + [threading.Thread(target=guarded, args=(write, i)) for i in range(writers)]
        for t in started:
            t.start()
        try:
            time.sleep(SECONDS)
        finally:
            stop.set()
            for t in started:
                t.join(60)
        errors = [v for k, v in out.items() if k[0] == "error"]
        if errors:
            raise errors[0]
        reads = [as_read(row) for k, rows in out.items() if k[0] == "read" for row in rows]
        log = [entry for k, rows in out.items() if k[0] == "write" for entry in rows]
        return check_world(engine, reads, log, [BOT], label, seed)


def test_each_change_is_told_once_to_one_name_read_by_threads_of_one_engine(db_url: str) -> None:
    """4 threads of one engine read under one name, its kept blocks on; 2 writers."""
    backend = db_url.split(":", 1)[0].split("+")[0]
    assert_told_once(run_threads(db_url, 1, 4, 2, f"{backend}, 1 engine x 4 threads, 2 writers"))


def test_each_change_is_told_once_to_one_name_read_by_engines_of_one_process(
    db_url: str,
) -> None:
    """3 engines of one process, 2 threads each, read under one name; 2 writers."""
    backend = db_url.split(":", 1)[0].split("+")[0]
    assert_told_once(run_threads(db_url, 3, 2, 2, f"{backend}, 3 engines x 2 threads, 2 writers"))
