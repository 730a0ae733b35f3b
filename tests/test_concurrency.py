"""Racing writers on one key: one true row, every write in history, nothing raised to a caller."""

from __future__ import annotations

import multiprocessing
import threading

from korely_memory import Identity, MemoryEngine

WRITERS = 8
WRITES = 200


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
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WRITERS) as pool:
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
