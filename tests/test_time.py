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
