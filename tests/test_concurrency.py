"""Racing writers on one key: one true row, every write in history, nothing raised to a caller."""

from __future__ import annotations

import collections
import itertools
import os
import threading
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from korely_memory import Identity, MemoryEngine
from korely_memory._db import _database

from .processes import PROCESSES

WRITERS = 8
WRITES = 100  # each: every write of every writer races the seven others for the one key


def write_many(url: str, who: Identity, writer: int, errors: list[str] | None = None) -> int:
    """Record WRITES versions of one key; returns how many calls raised."""
    failed = 0
    with MemoryEngine(url) as engine:
        for n in range(WRITES):
            try:
                verb = engine.correct if n % 3 == 2 else engine.remember
                verb(who, "home-city", f"writer {writer} write {n}")
            except Exception as exc:  # the point of the test: nothing may reach the caller
                failed += 1
                if errors is not None:
                    errors.append(repr(exc))
    return failed


def check_outcome(engine: MemoryEngine, who: Identity) -> None:
    history = engine.history(who, "home-city")
    true_rows = [f for f in history if f.is_current]
    assert len(true_rows) == 1
    assert sorted(f.content for f in history) == sorted(
        f"writer {w} write {n}" for w in range(WRITERS) for n in range(WRITES)
    )
    ended = [f for f in history if not f.is_current]
    assert all(f.replaced_by_id is not None for f in ended)
    # Each replacement points to the version recorded right after it.
    assert [f.replaced_by_id for f in history[:-1]] == [f.id for f in history[1:]]


def test_racing_threads(db_url: str, giulia: Identity) -> None:
    errors: list[str] = []
    with MemoryEngine(db_url) as engine:
        threads = [
            threading.Thread(target=write_many, args=(db_url, giulia, w, errors))
            for w in range(WRITERS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        check_outcome(engine, giulia)


def test_racing_processes_on_postgresql(postgresql_url: str, giulia: Identity) -> None:
    with MemoryEngine(postgresql_url):
        pass  # the schema exists before the writers start
    with PROCESSES.Pool(WRITERS) as pool:
        failures = pool.starmap(write_many, [(postgresql_url, giulia, w) for w in range(WRITERS)])
    assert failures == [0] * WRITERS
    with MemoryEngine(postgresql_url) as engine:
        check_outcome(engine, giulia)


def test_racing_first_writes_of_a_new_key(db_url: str) -> None:
    """Nobody holds the key yet: the writers must still queue, not collide on the unique index."""
    with MemoryEngine(db_url) as engine:
        barrier = threading.Barrier(WRITERS)
        errors: list[str] = []

        def first(w: int) -> None:
            barrier.wait()
            try:
                engine.remember(
                    Identity("acme", "marco", "support-copilot"), "fresh-key", f"from {w}"
                )
            except Exception as exc:
                errors.append(repr(exc))

        threads = [threading.Thread(target=first, args=(w,)) for w in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        history = engine.history(Identity("acme", "marco", "support-copilot"), "fresh-key")
        assert len(history) == WRITERS and sum(f.is_current for f in history) == 1


def test_memories_in_two_schemas_of_one_database_never_wait_for_each_other(
    postgresql_url: str, other_postgresql_url: str, giulia: Identity
) -> None:
    """PostgreSQL's advisory locks belong to the whole database: the engine scopes its own to
    the schema, so a writer holding a key in one schema does not stop the same key in another."""
    from korely_memory._db._database import writing
    from korely_memory._store._versions import lock_key

    with MemoryEngine(postgresql_url) as one, MemoryEngine(other_postgresql_url) as two:
        one.remember(giulia, "home-city", "Giulia lives in Rome")
        with writing(one.db) as conn:
            lock_key(conn, giulia, "home-city")  # held until this block ends
            written = threading.Thread(
                target=two.remember, args=(giulia, "home-city", "Giulia lives in Milan")
            )
            written.start()
            written.join(10)
            assert not written.is_alive(), "the other schema's writer waited for this lock"
            # and within one schema the lock still holds
            waiting = threading.Thread(
                target=one.correct, args=(giulia, "home-city", "Giulia lives in Turin")
            )
            waiting.start()
            waiting.join(0.5)
            assert waiting.is_alive()
        waiting.join(10)
        assert [f.content for f in one.get_facts(giulia)] == ["Giulia lives in Turin"]
        assert [f.content for f in two.get_facts(giulia)] == ["Giulia lives in Milan"]


def test_the_threads_of_a_process_take_turns_to_write_to_a_sqlite_file(
    sqlite_url: str, giulia: Identity
) -> None:
    """SQLite's busy handler lets whoever asks first take the lock: a writer that sleeps between
    its tries is passed by the others again and again (here, without the queue, five runs in six
    see a writer passed by dozens of writes, all 50 of another's) and can wait past
    ``write_wait``. Queued, each thread writes behind at most the writers that came before it:
    between two writes of one thread, each other thread writes once, or again when it made its
    next write ready before this one did (twice on two cores busy with eight other loops; three
    times is left for a busier machine). The order of the commits shows it however busy the
    machine; a wait in seconds would not."""
    engines = [MemoryEngine(sqlite_url, write_wait=30) for _ in range(WRITERS)]
    errors: list[str] = []
    start = threading.Barrier(WRITERS)

    def write(w: int) -> None:
        start.wait()
        for n in range(50):
            try:
                engines[w].remember(giulia, "home-city", f"writer {w} write {n}")
            except Exception as exc:
                errors.append(repr(exc))

    try:
        threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        writers = [int(f.content.split()[1]) for f in engines[0].history(giulia, "home-city")]
        assert sorted(writers) == sorted(w for w in range(WRITERS) for _ in range(50))
        for w in range(WRITERS):
            mine = [at for at, writer in enumerate(writers) if writer == w]
            for before, after in itertools.pairwise(mine):
                between = collections.Counter(writers[before + 1 : after])
                assert max(between.values(), default=0) <= 3, (
                    f"writer {w} was passed by {dict(between)} between two of its writes"
                )
    finally:
        for engine in engines:
            engine.close()


def test_engines_on_one_sqlite_file_share_its_queue_of_writers(tmp_path: Path) -> None:
    """Two engines of one process on the same file (by an absolute and a relative path) take
    turns with each other; another file has a queue of its own."""
    first = MemoryEngine(f"sqlite:///{tmp_path / 'memory.db'}")
    second = MemoryEngine(f"sqlite:///{os.path.relpath(tmp_path / 'memory.db')}")
    other = MemoryEngine(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        with _database.queued(first.db):
            with (
                pytest.raises(OperationalError, match="database is locked"),
                _database.queued(second.db, 0.05),
            ):
                pass
            with _database.queued(other.db, 0.05) as left:
                assert left is None  # no wait: its file is another
    finally:
        for engine in (first, second, other):
            engine.close()
