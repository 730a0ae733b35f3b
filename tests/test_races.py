"""Promises under forced interleavings: another engine acts between two steps of the first.

Each test puts a second writer exactly where a race would put it (between a
read's snapshot and its marks, inside an erasure, inside a forgotten memory),
deterministically, through a hook on one internal step, and checks what the
promise says must hold afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from korely_memory import Identity, InvalidRequest, MemoryEngine, NotCurrent, NotFound
from korely_memory._db import _database
from korely_memory._db._schema import fact_terms, facts
from korely_memory._store import _marks, _memories, _versions, _word_index
from korely_memory._values._identity import EndCause

from .helpers import hold_the_mark_lock

ADMIN = Identity("acme", "anna", "support-copilot")


@pytest.fixture
def other(db_url: str) -> Iterator[MemoryEngine]:
    """A second engine on the same database: another process, as far as the first can tell."""
    with MemoryEngine(db_url) as engine:
        yield engine


def before(
    module: Any, name: str, action: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run ``action`` once, just before the first engine calls ``module.name``."""
    original = getattr(module, name)
    done = threading.Event()

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if not done.is_set():
            done.set()
            action()
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, hooked)


def between_snapshot_and_marks(action: Callable[[], None], mp: pytest.MonkeyPatch) -> None:
    """Run ``action`` after a read's snapshot has closed, before its mark transaction begins."""
    before(_database, "writing_within", action, mp)


def in_thread(action: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Start ``action`` in a thread; its result (or exception) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(action())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


# -- notices: a change racing a read is told exactly once ----------------------------


def test_a_change_committed_between_a_read_and_its_marks_is_told(
    engine: MemoryEngine, other: MemoryEngine, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    between_snapshot_and_marks(
        lambda: other.correct(giulia, "home-city", "Giulia lives in Milan"), monkeypatch
    )
    first = engine.get_context(giulia, reader="support-bot")
    assert "Giulia lives in Rome" in first.text  # the snapshot, taken before the change

    told = engine.get_context(giulia, reader="support-bot")
    assert [(c.was.content, c.now and c.now.content) for c in told.changed] == [
        ("Giulia lives in Rome", "Giulia lives in Milan")
    ]
    assert engine.get_context(giulia, reader="support-bot").changed == ()


def test_a_change_whose_writer_is_mid_transaction_during_the_marks_is_told(
    engine: MemoryEngine, other: MemoryEngine, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    """The writer has ended the version (row locked, not committed) when the marks are written."""
    rome = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    writer_started = threading.Event()
    release = threading.Event()

    def writer() -> None:
        with _database.writing(other.db) as conn:
            _versions.end_versions(
                conn, facts.c.id == rome.id, cause=EndCause.FORGOTTEN, now=rome.recorded_at
            )
            writer_started.set()
            release.wait(5)

    thread = threading.Thread(target=writer)

    def start_writer_then_release_soon() -> None:
        thread.start()
        assert writer_started.wait(5)
        threading.Timer(0.05, release.set).start()  # commits while the mark step waits

    between_snapshot_and_marks(start_writer_then_release_soon, monkeypatch)
    first = engine.get_context(giulia, reader="support-bot")
    thread.join(5)
    assert "Giulia lives in Rome" in first.text

    # Whether the mark step waited for the writer or gave way to it, the change is told next.
    told = engine.get_context(giulia, reader="support-bot")
    assert [(c.was.id, c.now) for c in told.changed] == [(rome.id, None)]
    assert engine.get_context(giulia, reader="support-bot").changed == ()


def test_a_read_that_gave_way_has_its_facts_marked_by_the_next_read(
    engine: MemoryEngine,
    other: MemoryEngine,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    giulia: Identity,
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    holder = hold_the_mark_lock(db_url, giulia)
    try:
        first = engine.get_context(giulia, reader="support-bot")
    finally:
        holder()
    assert first.gave_way and first.changed_more is None and "Giulia lives in Rome" in first.text

    other.correct(giulia, "home-city", "Giulia lives in Milan")
    told = engine.get_context(giulia, reader="support-bot")
    assert not told.gave_way
    assert [c.now and c.now.content for c in told.changed] == ["Giulia lives in Milan"]
    assert engine.get_context(giulia, reader="support-bot").changed == ()


@pytest.mark.parametrize(
    "fault",
    [
        "SELECT pg_terminate_backend(pg_backend_pid())",  # 57P01: administrator shutdown, failover
        "SET idle_in_transaction_session_timeout = '20ms'",  # 25P03, at the next statement
    ],
)
def test_the_mark_step_gives_way_when_its_connection_is_gone(
    postgresql_url: str, fault: str, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    with MemoryEngine(postgresql_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        original = _marks.hand_over

        def broken(conn: sa.Connection, *args: Any) -> None:
            conn.exec_driver_sql(fault)
            threading.Event().wait(0.2)
            original(conn, *args)

        monkeypatch.setattr(_marks, "hand_over", broken)
        block = engine.get_context(giulia, reader="support-bot")
        assert block.gave_way and block.changed_more is None
        assert "Giulia lives in Rome" in block.text
        monkeypatch.setattr(_marks, "hand_over", original)
        engine.correct(giulia, "home-city", "Giulia lives in Milan")
        told = engine.get_context(giulia, reader="support-bot")
        assert [c.now and c.now.content for c in told.changed] == ["Giulia lives in Milan"]


# -- erasure is serialised against the person's writers ---------------------------------


def test_a_write_racing_an_erasure_never_survives_under_the_pseudonym(
    engine: MemoryEngine, other: MemoryEngine, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    shared = engine.remember(giulia, "loyalty", "Acme runs a loyalty program", scope="account")
    engine.confirm(ADMIN, shared.id)
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    racing: list[Any] = []

    def write_during_the_erasure() -> None:
        thread, out = in_thread(
            lambda: other.remember(giulia, "diagnosis", "Giulia has a private condition")
        )
        thread.join(0.5)  # on PostgreSQL the write waits for the erasure; SQLite's waits anyway
        racing.append((thread, out))

    before(_word_index, "erased", write_during_the_erasure, monkeypatch)
    report = engine.erase_user("acme", "giulia")
    thread, out = racing[0]
    thread.join(10)

    assert report.account_facts_kept == 1
    with engine.db.connect() as conn:
        renamed = conn.execute(
            sa.select(facts.c.key, facts.c.scope, facts.c.content).where(
                facts.c.owner == report.pseudonym
            )
        ).all()
        terms = conn.execute(sa.select(fact_terms.c.space, fact_terms.c.fact_id)).all()
        owners = dict(conn.execute(sa.select(facts.c.id, facts.c.owner_key)).all())
    # Only the confirmed account fact carries the pseudonym; the racing write came after.
    assert [(k, s) for k, s, _ in renamed] == [("loyalty", "account")]
    assert isinstance(out[0], type(shared)) and out[0].owner == "giulia"
    # Every word in the index belongs to a fact that exists, in its owner's space or the account's.
    for space, fact_id in terms:
        assert space in ("/account", owners[fact_id]), (space, fact_id)


def test_a_fact_read_from_a_memory_never_outlives_its_forgetting(
    engine: MemoryEngine, other: MemoryEngine, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    memory = engine.add_memory(giulia, "Giulia said her daughter attends Liceo Manzoni")
    racing: list[Any] = []

    def read_a_fact_from_it_meanwhile() -> None:
        thread, out = in_thread(
            lambda: other.remember(
                giulia, "school", "Daughter attends Liceo Manzoni", source_memory_id=memory.id
            )
        )
        thread.join(0.5)
        racing.append((thread, out))

    # Inside the forgetting, once the facts read from it ended and lost their words.
    before(_memories, "unanswer", read_a_fact_from_it_meanwhile, monkeypatch)
    engine.forget_memory(giulia, memory.id)
    thread, out = racing[0]
    thread.join(10)

    assert isinstance(out[0], NotFound)  # it waited for the forgetting, then found no memory
    assert all(
        "Manzoni" not in f.content for f in engine.get_facts(giulia, include_invalidated=True)
    )


def test_max_facts_holds_under_racing_writers(db_url: str, giulia: Identity) -> None:
    engines = [MemoryEngine(db_url) for _ in range(8)]
    start = threading.Barrier(len(engines))
    refused: list[int] = []

    def add(i: int) -> None:
        start.wait()
        for n in range(3):
            try:
                engines[i].remember(giulia, f"key-{i}-{n}", f"fact {i} {n}", max_facts=10)
            except Exception:  # LimitExceeded: the ceiling did its work
                refused.append(i)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(len(engines))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(engines[0].get_facts(giulia)) == 10
    assert len(refused) == 8 * 3 - 10
    for e in engines:
        e.close()


class _DriverError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"SQLSTATE {sqlstate}")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("sqlstate", "gives_way"),
    [
        ("55P03", True),  # lock timeout
        ("57014", True),  # statement timeout
        ("40P01", True),  # deadlock
        ("57P01", True),  # administrator shutdown, failover
        ("57P02", True),  # crash shutdown
        ("57P03", True),  # cannot connect now
        ("25P03", True),  # idle-in-transaction timeout
        ("08006", True),  # connection failure
        ("53300", True),  # too many connections
        ("23505", False),  # a unique violation is a bug, not weather
        ("42P01", False),  # an undefined table too
        ("22001", False),
    ],
)
def test_the_mark_step_gives_way_to_weather_not_to_bugs(sqlstate: str, gives_way: bool) -> None:
    error = sa.exc.OperationalError("UPDATE korely_marks ...", {}, _DriverError(sqlstate))
    assert _database.gives_way(error) is gives_way


# -- a write that names the version it means -----------------------------------------


def test_a_correction_naming_a_version_replaced_meanwhile_writes_nothing(
    engine: MemoryEngine, other: MemoryEngine, giulia: Identity
) -> None:
    read = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    meanwhile = other.correct(giulia, "home-city", "Giulia lives in Milan")
    with pytest.raises(NotCurrent) as refused:
        engine.correct(giulia, "home-city", "Giulia lives in Turin", expected_id=read.id)
    assert refused.value.current_fact_id == meanwhile.id
    with pytest.raises(NotCurrent) as refused:
        engine.forget(giulia, "home-city", expected_id=read.id)
    assert refused.value.current_fact_id == meanwhile.id
    assert [f.content for f in engine.history(giulia, "home-city")] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]
    other.forget(giulia, "home-city")
    with pytest.raises(NotCurrent) as refused:
        engine.correct(giulia, "home-city", "Giulia lives in Turin", expected_id=meanwhile.id)
    assert refused.value.current_fact_id is None
    assert engine.get_facts(giulia) == []


def test_of_two_corrections_naming_one_version_exactly_one_is_written(
    db_url: str, giulia: Identity
) -> None:
    with MemoryEngine(db_url) as first, MemoryEngine(db_url) as second:
        read = first.remember(giulia, "home-city", "Giulia lives in Rome")
        start = threading.Barrier(2)

        def correct(engine: MemoryEngine, content: str) -> Any:
            start.wait()
            return engine.correct(giulia, "home-city", content, expected_id=read.id)

        threads = [
            in_thread(lambda e=e, c=c: correct(e, c))  # type: ignore[misc]
            for e, c in ((first, "Giulia lives in Milan"), (second, "Giulia lives in Turin"))
        ]
        for thread, _ in threads:
            thread.join(30)
        outcomes = [out[0] for _, out in threads]
        written = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, NotCurrent)]
        assert len(written) == 1 and len(refused) == 1, outcomes
        assert refused[0].current_fact_id == written[0].id
        assert [f.content for f in first.history(giulia, "home-city")] == [
            "Giulia lives in Rome",
            written[0].content,
        ]
        with pytest.raises(InvalidRequest) as bad:
            first.correct(giulia, "home-city", "x", expected_id=-1)
        assert bad.value.field == "expected_id"
