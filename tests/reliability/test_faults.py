"""Faults: a writer killed mid-write, a connection cut mid-transaction, a database locked too long.

After each, the rows still keep the promises of versions, every write the engine
acknowledged is there, nothing half-written is, and the next call works.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError

from korely_memory import Identity, MemoryEngine
from korely_memory._store._versions import lock_key

from ..helpers import snapshot
from ..processes import PROCESSES
from .soak import scale, tally
from .world import GIULIA, broken_invariants

TEAM = Identity("acme", None, "support")
KEYS = ("home-city", "plan", "hours")


def write_until_killed(url: str, ledger: str, start: int) -> None:
    """Write, correct, forget and read in a loop; append each acknowledged content to ``ledger``."""
    with MemoryEngine(url) as engine, open(ledger, "a", encoding="utf-8") as out:
        i = start
        while True:
            i += 1
            who = GIULIA if i % 2 else TEAM
            key = KEYS[i % len(KEYS)]
            content = f"write {i} of {os.getpid()}"
            if i % 7 == 0:
                with contextlib.suppress(LookupError):
                    engine.forget(who, key)
                continue
            if i % 5 == 0:
                engine.get_context(who, reader="bot")
                continue
            engine.remember(who, key, content)
            out.write(content + "\n")
            out.flush()


def wait_for_writes(ledger: Path, written: int) -> None:
    """Until the writers have started writing.

    A new process takes a while to start and connect.
    """
    deadline = time.monotonic() + 60
    while len(ledger.read_text(encoding="utf-8").splitlines()) <= written:
        assert time.monotonic() < deadline, "the writers never wrote"
        time.sleep(0.05)


def kill_writers_mid_write(url: str, tmp_path: Path) -> None:
    rounds, writers = scale(3, 40), scale(2, 4)
    ledger = tmp_path / "acknowledged.txt"
    ledger.touch()
    rng = random.Random()
    written = 0
    for r in range(rounds):
        procs = [
            PROCESSES.Process(
                target=write_until_killed, args=(url, str(ledger), (r * writers + w) * 1_000_000)
            )
            for w in range(writers)
        ]
        for p in procs:
            p.start()
        wait_for_writes(ledger, written)
        time.sleep(rng.random())
        for p in procs:
            assert p.pid is not None
            os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            p.join()
        tally("writer processes killed", writers)
        with MemoryEngine(url) as engine:
            assert broken_invariants(engine) == []
            stored = {
                f.content
                for who in (GIULIA, TEAM)
                for f in engine.get_facts(who, include_invalidated=True)
            }
            acknowledged = set(ledger.read_text(encoding="utf-8").splitlines())
            assert len(acknowledged) > written, "the writers were killed before writing anything"
            assert acknowledged <= stored, (
                f"lost acknowledged writes: {sorted(acknowledged - stored)[:5]}"
            )
            tally("acknowledged writes before a kill", len(acknowledged) - written)
            written = len(acknowledged)
            after = engine.remember(GIULIA, "home-city", f"written after kill {r}")
            assert after in engine.get_facts(GIULIA)


def test_a_writer_killed_mid_write_leaves_no_partial_version(db_url: str, tmp_path: Path) -> None:
    kill_writers_mid_write(db_url, tmp_path)


def backend_pid(conn: Any) -> int:
    return int(conn.connection.dbapi_connection.info.backend_pid)


def terminate(url: str, pid: int) -> None:
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        assert conn.execute(
            sa.text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid}
        ).scalar_one()
    admin.dispose()


def test_a_connection_cut_between_ending_and_inserting_a_version_changes_nothing(
    postgresql_url: str,
) -> None:
    with MemoryEngine(postgresql_url) as engine:
        for n in range(scale(1, 25)):
            cut_between_ending_and_inserting(engine, postgresql_url, f"home-city-{n}")


def cut_between_ending_and_inserting(engine: MemoryEngine, url: str, key: str) -> None:
    engine.remember(GIULIA, key, "Giulia lives in Rome")
    engine.get_context(GIULIA, reader="bot")
    before = snapshot(engine)
    cut: list[int] = []

    def cut_before_insert(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not cut and statement.lstrip().upper().startswith("INSERT INTO KORELY_FACTS"):
            cut.append(backend_pid(conn))
            terminate(url, cut[0])  # the old version is already ended in this transaction

    event.listen(engine.db, "before_cursor_execute", cut_before_insert)
    try:
        with pytest.raises(DBAPIError) as raised:
            engine.remember(GIULIA, key, "Giulia lives in Milan")
    finally:
        event.remove(engine.db, "before_cursor_execute", cut_before_insert)
    tally("connections terminated mid-write")
    assert cut and raised.value.connection_invalidated
    assert snapshot(engine) == before
    assert engine.remember(GIULIA, key, "Giulia lives in Milan").content == "Giulia lives in Milan"
    assert [f.content for f in engine.history(GIULIA, key)] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]
    assert broken_invariants(engine) == []


def test_a_connection_cut_while_waiting_for_a_lock_raises_and_the_next_call_works(
    postgresql_url: str,
) -> None:
    with MemoryEngine(postgresql_url) as engine:
        for n in range(scale(1, 25)):
            cut_while_waiting(engine, postgresql_url, f"plan-{n}")


def cut_while_waiting(engine: MemoryEngine, url: str, key: str) -> None:
    engine.remember(GIULIA, key, "Giulia uses the Pro plan")
    before = snapshot(engine)
    holder = sa.create_engine(url)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            engine.correct(GIULIA, key, "Giulia uses the Team plan")
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    with holder.connect() as hold, hold.begin():
        lock_key(hold, GIULIA, key)
        writer = threading.Thread(target=write)
        writer.start()
        pid = wait_for_lock_waiter(holder, backend_pid(hold))
        terminate(url, pid)
        writer.join(10)
    holder.dispose()
    tally("connections terminated while waiting")
    assert len(errors) == 1 and isinstance(errors[0], DBAPIError), errors
    assert snapshot(engine) == before
    assert (
        engine.correct(GIULIA, key, "Giulia uses the Team plan").content
        == "Giulia uses the Team plan"
    )


def wait_for_lock_waiter(engine: sa.Engine, holder: int) -> int:
    """The backend waiting for a lock that ``holder`` (a backend's pid) holds, and only that one:
    other tests may wait for locks of their own at the same time."""
    deadline = time.monotonic() + 10
    with engine.connect() as conn:
        while time.monotonic() < deadline:
            pid = conn.execute(
                sa.text(
                    "SELECT pid FROM pg_stat_activity WHERE :holder = ANY(pg_blocking_pids(pid)) "
                    "AND query LIKE '%pg_advisory_xact_lock%'"
                ),
                {"holder": holder},
            ).scalar()
            conn.rollback()
            if pid is not None:
                return int(pid)
            time.sleep(0.01)
    raise AssertionError("the writer never waited for the lock")


def hold_write_lock(path: str, held: Any, release: Any) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    held.set()
    release.wait(30)
    conn.execute("ROLLBACK")
    conn.close()


def test_a_database_locked_longer_than_the_writer_waits_raises_and_loses_nothing(
    sqlite_url: str,
) -> None:
    with MemoryEngine(sqlite_url, write_wait=0.3) as engine:
        for n in range(scale(1, 25)):
            locked_longer_than_the_wait(engine, sqlite_url, f"home-city-{n}")


def locked_longer_than_the_wait(engine: MemoryEngine, url: str, key: str) -> None:
    path = sa.make_url(url).database
    assert path is not None
    engine.remember(GIULIA, key, "Giulia lives in Rome")
    engine.get_context(GIULIA, reader="bot")
    before = snapshot(engine)
    held, release = PROCESSES.Event(), PROCESSES.Event()
    locker = PROCESSES.Process(target=hold_write_lock, args=(path, held, release))
    locker.start()
    try:
        assert held.wait(30)
        started = time.monotonic()
        with pytest.raises(DBAPIError, match="locked"):
            engine.remember(GIULIA, key, "Giulia lives in Milan")
        waited = time.monotonic() - started
        # A read still answers: its mark step gives way.
        block = engine.get_context(GIULIA, reader="helper")
        assert "Giulia lives in Rome" in block.text
    finally:
        release.set()
        locker.join()
    tally("locks held past the writer's wait")
    assert 0.25 <= waited < 2.0, waited
    assert snapshot(engine) == before
    assert engine.remember(GIULIA, key, "Giulia lives in Milan").content == "Giulia lives in Milan"
    assert [f.content for f in engine.history(GIULIA, key)] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]
    assert broken_invariants(engine) == []
