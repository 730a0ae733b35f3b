"""Valid time and recorded time: what was true then, and what the store knew then."""

from __future__ import annotations

import datetime as dt
import time

from korely_memory import Identity, MemoryEngine

UTC = dt.timezone.utc


def contents(found: list) -> list[str]:
    return [f.content for f in found]


def test_a_move_in_september_learned_in_october(engine: MemoryEngine, giulia: Identity) -> None:
    """The store learns in October (now) that Giulia moved on 1 September."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome", valid_from=dt.date(2026, 1, 1))
    learned_rome = dt.datetime.now(UTC)
    time.sleep(0.01)
    engine.remember(giulia, "home-city", "Giulia lives in Milan", valid_from=dt.date(2026, 9, 1))
    mid_september = dt.datetime(2026, 9, 15, tzinfo=UTC)

    # What was true in mid-September, as we know it now: Milan.
    assert contents(engine.get_facts(giulia, as_of=mid_september)) == ["Giulia lives in Milan"]
    # What the store held before it learned of the move: Rome.
    assert contents(engine.get_facts(giulia, known_as_of=learned_rome)) == ["Giulia lives in Rome"]
    # Mid-September, as the store knew it then: Rome.
    both = engine.get_facts(giulia, as_of=mid_september, known_as_of=learned_rome)
    assert contents(both) == ["Giulia lives in Rome"]
    # In August, even as we know it now: Rome.
    assert contents(engine.get_facts(giulia, as_of=dt.date(2026, 8, 1))) == ["Giulia lives in Rome"]
    # Before anything held: nothing.
    assert engine.get_facts(giulia, as_of=dt.date(2025, 6, 1)) == []
    rome = engine.history(giulia, "home-city")[0]
    assert rome.invalid_at == dt.datetime(2026, 9, 1, tzinfo=UTC)


def test_known_as_of_before_anything_was_recorded_is_empty(
    engine: MemoryEngine, giulia: Identity
) -> None:
    before = dt.datetime.now(UTC) - dt.timedelta(seconds=1)
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    assert engine.get_facts(giulia, known_as_of=before) == []


def test_forgotten_fact_still_answers_the_past(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "plan", "Giulia uses the Pro plan", valid_from=dt.date(2026, 1, 1))
    engine.forget(giulia, "plan", at=dt.date(2026, 6, 1))
    assert engine.get_facts(giulia) == []
    assert contents(engine.get_facts(giulia, as_of=dt.date(2026, 3, 1))) == [
        "Giulia uses the Pro plan"
    ]
    assert engine.get_facts(giulia, as_of=dt.date(2026, 7, 1)) == []


def test_include_invalidated_lists_ended_versions_too(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    engine.remember(giulia, "plan", "Pro plan")
    engine.forget(giulia, "plan")
    found = engine.get_facts(giulia, include_invalidated=True)
    assert sorted(contents(found)) == ["Giulia lives in Milan", "Giulia lives in Rome", "Pro plan"]
    assert [f.recorded_at for f in found] == sorted((f.recorded_at for f in found), reverse=True)


def test_naive_datetimes_are_utc(engine: MemoryEngine, giulia: Identity) -> None:
    fact = engine.remember(
        giulia, "home-city", "Giulia lives in Rome", valid_from=dt.datetime(2026, 3, 4, 5, 6)
    )
    assert fact.valid_from == dt.datetime(2026, 3, 4, 5, 6, tzinfo=UTC)
    assert fact.recorded_at.tzinfo is not None
    rome = dt.timezone(dt.timedelta(hours=1))
    moved = engine.remember(
        giulia, "home-city", "Milan", valid_from=dt.datetime(2026, 9, 1, 1, 0, tzinfo=rome)
    )
    assert moved.valid_from == dt.datetime(2026, 9, 1, 0, 0, tzinfo=UTC)


# -- one clock --------------------------------------------------------------------------------

AHEAD = dt.timedelta(hours=1)


def running_ahead(engine: MemoryEngine, by: dt.timedelta = AHEAD) -> MemoryEngine:
    """The engine as if its process ran on a machine whose clock is ``by`` ahead."""
    engine._system_clock = lambda: dt.datetime.now(UTC) + by  # type: ignore[method-assign]
    return engine


def test_a_hold_is_not_beaten_by_a_server_whose_clock_runs_ahead(
    postgresql_url: str, giulia: Identity
) -> None:
    with MemoryEngine(postgresql_url) as here, running_ahead(MemoryEngine(postgresql_url)) as fast:
        here.remember(giulia, "home-city", "Giulia lives in Rome")
        here.get_context(giulia, reader="bot")
        here.correct(giulia, "home-city", "Giulia lives in Milan")

        held = here.get_context(giulia, reader="bot", hold=dt.timedelta(seconds=5))
        assert [c.now and c.now.content for c in held.changed] == ["Giulia lives in Milan"]
        # A server an hour ahead would take the 5-second hold for run out: one clock, held.
        assert fast.get_context(giulia, reader="bot", hold=dt.timedelta(seconds=5)).changed == ()
        assert fast.get_context(giulia, reader="bot").changed == ()
        assert here.acknowledge(held.receipt) == 1  # type: ignore[arg-type]


def test_a_client_whose_clock_runs_ahead_cannot_push_a_key_into_the_future(
    postgresql_url: str, giulia: Identity
) -> None:
    with MemoryEngine(postgresql_url) as here, running_ahead(MemoryEngine(postgresql_url)) as fast:
        fast.remember(giulia, "home-city", "Giulia lives in Rome")
        here.correct(giulia, "home-city", "Giulia lives in Milan")
        fast.remember(giulia, "pet", "Giulia has a cat")
        now = dt.datetime.now(UTC)

        shown = contents(here.get_facts(giulia))
        assert sorted(contents(here.get_facts(giulia, as_of=now))) == sorted(shown)
        assert sorted(contents(fast.get_facts(giulia, known_as_of=now))) == sorted(shown)
        for fact in here.get_facts(giulia, include_invalidated=True):
            assert fact.recorded_at <= now and fact.valid_from <= now


def test_on_postgresql_every_time_is_the_server_s(postgresql_url: str, giulia: Identity) -> None:
    with running_ahead(MemoryEngine(postgresql_url)) as fast:
        before = dt.datetime.now(UTC)
        fact = fast.remember(giulia, "home-city", "Giulia lives in Rome")
        memory = fast.add_memory(giulia, "Giulia said she lives in Rome")
        assert before <= fact.recorded_at <= dt.datetime.now(UTC)
        assert before <= memory.created_at <= dt.datetime.now(UTC)


def test_on_sqlite_the_time_is_this_process_s(sqlite_url: str, giulia: Identity) -> None:
    # SQLite's processes share one machine and its clock: the engine takes that clock.
    with running_ahead(MemoryEngine(sqlite_url)) as engine:
        before = dt.datetime.now(UTC) + AHEAD
        fact = engine.remember(giulia, "home-city", "Giulia lives in Rome")
        assert before <= fact.recorded_at <= dt.datetime.now(UTC) + AHEAD
