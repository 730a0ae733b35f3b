"""Facts that expire: true until their ``valid_until``, then gone from reads of the present, kept
in the past and in history, and told once to a reader that was handed them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from korely_memory import EndCause, Identity, InvalidRequest, MemoryEngine, NotFound, Operation
from korely_memory._db._schema import UTCDateTime, facts
from korely_memory._read import _candidates
from korely_memory._store import _versions
from korely_memory._values import _expiry
from korely_memory.tools import MEMORY_TOOLS

from .cli_helpers import as_json, korely
from .helpers import Clock, snapshot

UTC = dt.timezone.utc
DEC_1 = dt.datetime(2026, 12, 1, 9, tzinfo=UTC)
LEAVE = "Giulia is on leave until 15 December"


@pytest.fixture
def clock() -> Clock:
    return Clock(DEC_1)


@pytest.fixture
def engine(db_url: str, clock: Clock) -> Iterator[MemoryEngine]:
    with MemoryEngine(db_url, clock=clock) as engine:
        yield engine


def keys(found: object) -> list[str]:
    return sorted(f.key for f in found)  # type: ignore[attr-defined]


def told(block: object) -> list[str]:
    return [line for line in block.text.splitlines() if "no longer true" in line or "was:" in line]  # type: ignore[attr-defined]


def test_a_fact_is_true_until_its_valid_until_and_kept_in_the_past(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    leave = engine.remember(giulia, "leave", LEAVE, valid_until=dt.date(2026, 12, 15))
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    # A date means through that day: the fact ends at the next midnight, UTC.
    assert leave.valid_until == dt.datetime(2026, 12, 16, tzinfo=UTC)
    block = engine.get_context(giulia)
    assert f"- leave: {LEAVE} (since 2026-12-01, until 2026-12-15)" in block.text

    clock.to(dt.datetime(2026, 12, 15, 23, 59, tzinfo=UTC))
    assert keys(engine.get_facts(giulia)) == ["home-city", "leave"]

    clock.to(dt.datetime(2026, 12, 16, tzinfo=UTC))
    assert keys(engine.get_facts(giulia)) == ["home-city"]
    block = engine.get_context(giulia, "Is Giulia on leave?")
    assert LEAVE not in block.text and block.omitted == 0
    assert keys(engine.search(giulia, "leave").facts) == []
    # The past keeps it, and history says how it ended.
    assert keys(engine.get_facts(giulia, as_of=dt.date(2026, 12, 10))) == ["home-city", "leave"]
    (version,) = engine.history(giulia, "leave")
    assert version.end_cause is EndCause.EXPIRED and not version.is_current
    assert version.invalid_at == version.valid_until == dt.datetime(2026, 12, 16, tzinfo=UTC)
    # What the store knew on 10 December held the end to come, and nothing else ended it.
    known = engine.get_facts(giulia, known_as_of=dt.datetime(2026, 12, 10, tzinfo=UTC))
    assert keys(known) == ["home-city", "leave"]


@pytest.mark.parametrize("settled_by", ["nothing", "trim", "a new fact under the key"])
def test_a_reader_handed_a_fact_that_expires_is_told_once(
    engine: MemoryEngine, clock: Clock, giulia: Identity, settled_by: str
) -> None:
    engine.remember(giulia, "leave", LEAVE, valid_until=dt.datetime(2026, 12, 15, 18, tzinfo=UTC))
    assert LEAVE in engine.get_context(giulia, reader="bot").text

    clock.to(dt.datetime(2026, 12, 15, 17, tzinfo=UTC))
    assert told(engine.get_context(giulia, reader="bot")) == []

    clock.to(dt.datetime(2026, 12, 16, 8, tzinfo=UTC))
    if settled_by == "trim":
        assert engine.trim().facts_expired == 1
    elif settled_by == "a new fact under the key":
        back = engine.remember(giulia, "leave", "Giulia is back from leave")
        assert back.replaced_by_id is None
    block = engine.get_context(giulia, reader="bot")
    assert told(block) == [f"- no longer true: {LEAVE} (2026-12-15, expired)"]
    assert [c.cause for c in block.changed] == [EndCause.EXPIRED]
    assert told(engine.get_context(giulia, reader="bot")) == []
    engine.trim()
    assert told(engine.get_context(giulia, reader="bot")) == []
    (first, *_) = engine.history(giulia, "leave")
    assert first.end_cause is EndCause.EXPIRED
    assert first.ended_recorded_at == dt.datetime(2026, 12, 15, 18, tzinfo=UTC)


def test_a_correction_before_the_expiry_is_told_and_the_expiry_never(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    engine.remember(giulia, "leave", LEAVE, valid_until=dt.date(2026, 12, 15))
    engine.get_context(giulia, reader="bot")
    clock.to(dt.datetime(2026, 12, 5, tzinfo=UTC))
    engine.correct(giulia, "leave", "Giulia is on leave until 20 December")
    clock.to(dt.datetime(2026, 12, 6, tzinfo=UTC))
    assert told(engine.get_context(giulia, reader="bot")) == [
        f"- was: {LEAVE} -> now: Giulia is on leave until 20 December (2026-12-05, corrected)"
    ]
    clock.to(dt.datetime(2026, 12, 17, tzinfo=UTC))
    assert told(engine.get_context(giulia, reader="bot")) == []
    assert keys(engine.get_facts(giulia)) == ["leave"]  # the correction has no end


def test_a_correction_that_expired_is_told_as_the_end_of_what_the_reader_had(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    engine.remember(giulia, "status", "Giulia is at her desk")
    engine.get_context(giulia, reader="bot")
    meeting = DEC_1 + dt.timedelta(hours=1)
    engine.correct(giulia, "status", "Giulia is in a meeting", valid_until=meeting)
    clock.to(DEC_1 + dt.timedelta(hours=2))
    # Handed the desk, never the meeting, which is over: nothing holds under the key now.
    assert told(engine.get_context(giulia, reader="bot")) == [
        "- no longer true: Giulia is at her desk (2026-12-01, expired)"
    ]
    assert told(engine.get_context(giulia, reader="bot")) == []
    assert keys(engine.get_facts(giulia)) == []


def test_an_expired_fact_frees_its_key_and_counts_for_nothing(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    engine.remember(giulia, "leave", LEAVE, valid_until=dt.date(2026, 12, 15), max_facts=2)
    engine.remember(giulia, "home-city", "Giulia lives in Rome", max_facts=2)
    clock.to(dt.datetime(2026, 12, 20, tzinfo=UTC))
    # The expired fact no longer takes a place under the ceiling.
    engine.remember(giulia, "pet", "Giulia has a cat", max_facts=2)
    assert keys(engine.get_facts(giulia)) == ["home-city", "pet"]
    with pytest.raises(NotFound):
        engine.correct(giulia, "leave", "Giulia is on leave again")
    with pytest.raises(NotFound):
        engine.forget(giulia, "leave")
    again = engine.remember(giulia, "leave", "Giulia is on leave again")
    assert again.is_current and [v.end_cause for v in engine.history(giulia, "leave")] == [
        EndCause.EXPIRED,
        None,
    ]


def test_an_expired_fact_of_a_person_does_not_hide_the_account_s(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    admin = Identity("acme", "anna", giulia.agent)
    engine.grant_admin("acme", "anna")
    engine.confirm(admin, engine.remember(admin, "hours", "Open 9-17", scope="account").id)
    engine.remember(
        giulia, "hours", "Giulia works 8-12 this week", valid_until=dt.date(2026, 12, 4)
    )
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia works 8-12 this week"]
    clock.to(dt.datetime(2026, 12, 5, tzinfo=UTC))
    assert [f.content for f in engine.get_facts(giulia)] == ["Open 9-17"]
    assert "Open 9-17" in engine.get_context(giulia).text


def test_a_block_pages_and_counts_without_the_expired_facts(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    for i in range(120):
        engine.remember(giulia, f"old-{i}", f"Giulia noted thing number {i}")
    clock.to(DEC_1 + dt.timedelta(minutes=1))
    for i in range(60):  # the newest facts, all expiring within the hour
        engine.remember(
            giulia,
            f"brief-{i}",
            f"Giulia is briefly busy {i}",
            valid_until=DEC_1 + dt.timedelta(hours=1),
        )
    small = engine.get_context(giulia, token_budget=300)
    assert small.omitted == 180 - len(small.facts)
    clock.to(DEC_1 + dt.timedelta(hours=2))
    small = engine.get_context(giulia, token_budget=300)
    assert small.facts and all(f.key.startswith("old-") for f in small.facts)
    assert small.omitted == 120 - len(small.facts)
    whole = engine.get_context(giulia, token_budget=8000)
    assert len(whole.facts) == 120 and whole.omitted == 0
    matching = engine.get_context(giulia, "briefly busy", token_budget=300)
    assert all(f.key.startswith("old-") for f in matching.facts)


def test_an_interval_that_does_not_go_forward_is_refused_by_name(
    engine: MemoryEngine, giulia: Identity
) -> None:
    rome = engine.remember(
        giulia, "home-city", "Giulia lives in Rome", valid_from=dt.date(2026, 6, 1)
    )
    before = snapshot(engine)
    cases = [
        (lambda: engine.remember(giulia, "leave", LEAVE, valid_until=DEC_1), "valid_until"),
        (
            lambda: engine.remember(
                giulia, "leave", LEAVE, valid_until=DEC_1 - dt.timedelta(days=1)
            ),
            "valid_until",
        ),
        (
            lambda: engine.remember(
                giulia,
                "leave",
                LEAVE,
                valid_from=dt.date(2026, 12, 10),
                valid_until=dt.date(2026, 12, 9),
            ),
            "valid_until",
        ),
        (
            lambda: engine.correct(giulia, "home-city", "Giulia lives in Milan", valid_until=DEC_1),
            "valid_until",
        ),
        (lambda: engine.remember(giulia, "leave", LEAVE, valid_until="15 December"), "valid_until"),
        (lambda: engine.forget(giulia, "home-city", at=dt.date(2026, 5, 31)), "at"),
    ]
    for call, field in cases:
        with pytest.raises(InvalidRequest) as refused:
            call()
        assert refused.value.field == field
    assert snapshot(engine) == before
    assert engine.get_facts(giulia) == [rome]
    # A fact true since June may be ended in June: an interval of its own.
    assert engine.forget(giulia, "home-city", at=dt.date(2026, 6, 1)).invalid_at == rome.valid_from


def test_the_tools_take_until_and_refuse_it_in_the_past(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    remember = next(t for t in MEMORY_TOOLS if t.name == "remember")
    correct = next(t for t in MEMORY_TOOLS if t.name == "correct")
    assert "until" in {a.name for a in remember.arguments} and "until" in {
        a.name for a in correct.arguments
    }
    done = remember.run(engine, giulia, {"key": "leave", "content": LEAVE, "until": "2026-12-15"})
    assert done.ok and "until 2026-12-15" in done.text
    (leave,) = engine.get_facts(giulia)
    assert leave.valid_until == dt.datetime(2026, 12, 16, tzinfo=UTC)
    moved = correct.run(
        engine,
        giulia,
        {"key": "leave", "content": "Giulia is on leave", "until": "2026-12-20T12:00:00Z"},
    )
    assert moved.ok and engine.get_facts(giulia)[0].valid_until == dt.datetime(
        2026, 12, 20, 12, tzinfo=UTC
    )
    before = snapshot(engine)
    for until in ("2026-11-30", "2026-12-01T08:00:00+00:00", "next week", "2026-02-30"):
        refused = remember.run(
            engine, giulia, {"key": "trip", "content": "Giulia travels", "until": until}
        )
        assert not refused.ok and "until" in refused.text
    assert snapshot(engine) == before


def test_the_cli_shows_when_a_fact_ends(db_url: str, giulia: Identity) -> None:
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "leave", LEAVE, valid_until=dt.date(2099, 12, 15))
    shown = korely("--url", db_url, "facts", "acme", "giulia", "support-copilot")
    assert shown.exit_code == 0 and "until" in shown.stdout and "2099-12-16" in shown.stdout
    (fact,) = as_json(
        korely("--url", db_url, "--json", "facts", "acme", "giulia", "support-copilot")
    )
    assert fact["valid_until"].startswith("2099-12-16")


def test_two_engines_tell_an_expiry_once(db_url: str, clock: Clock, giulia: Identity) -> None:
    with MemoryEngine(db_url, clock=clock) as one, MemoryEngine(db_url, clock=clock) as two:
        one.remember(giulia, "leave", LEAVE, valid_until=dt.date(2026, 12, 15))
        one.get_context(giulia, reader="bot")
        clock.to(dt.datetime(2026, 12, 16, tzinfo=UTC))
        held = one.get_context(giulia, reader="bot", hold=True)
        assert [c.cause for c in held.changed] == [EndCause.EXPIRED]
        assert two.get_context(giulia, reader="bot").changed == ()
        assert one.acknowledge(held.receipt) == 1  # type: ignore[arg-type]
        assert two.get_context(giulia, reader="bot").changed == ()


# -- every write that meets an expired fact ----------------------------------------------


def extractor(*found: Operation) -> object:
    return lambda _turns, _known: list(found)


def test_capture_keeps_an_end_it_repeats_and_takes_an_expired_key_for_a_new_one(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    engine.remember(giulia, "leave", LEAVE, valid_until=dt.date(2026, 12, 15))
    said = [("user", "I'm on leave until 15 December, as I said.")]
    report = engine.capture(giulia, said, extractor=extractor(Operation("record", "leave", LEAVE)))
    assert [s.outcome for s in report.steps] == ["unchanged"]
    assert engine.get_facts(giulia)[0].valid_until == dt.datetime(2026, 12, 16, tzinfo=UTC)

    clock.to(dt.datetime(2026, 12, 20, tzinfo=UTC))
    back = [("user", "I'm back, and I'm travelling to Oslo next.")]
    report = engine.capture(
        giulia,
        back,
        extractor=extractor(
            Operation("record", "leave", "Giulia is back from leave"),
            Operation("end", "leave-note"),
        ),
    )
    assert [s.outcome for s in report.steps] == ["recorded", "refused"]
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia is back from leave"]
    assert [v.end_cause for v in engine.history(giulia, "leave")] == [EndCause.EXPIRED, None]


def test_capture_never_ends_the_account_s_fact_behind_an_expired_one_of_an_administrator(
    engine: MemoryEngine, clock: Clock
) -> None:
    anna = Identity("acme", "anna", "support-copilot")
    marco = Identity("acme", "marco", "support-copilot")
    engine.grant_admin("acme", "anna")
    engine.confirm(
        anna, engine.remember(anna, "office", "The office is in Milan", scope="account").id
    )
    engine.remember(
        anna, "office", "Anna works from Turin this week", valid_until=dt.date(2026, 12, 4)
    )
    clock.to(dt.datetime(2026, 12, 8, tzinfo=UTC))
    said = [("user", "The office thing is over.")]
    report = engine.capture(anna, said, extractor=extractor(Operation("end", "office")))
    assert [s.outcome for s in report.steps] == ["refused"]
    assert [f.content for f in engine.get_facts(marco)] == ["The office is in Milan"]


def test_an_expired_fact_can_still_be_erased(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    engine.remember(giulia, "health", "Giulia is in hospital", valid_until=dt.date(2026, 12, 4))
    clock.to(dt.datetime(2026, 12, 8, tzinfo=UTC))
    with pytest.raises(NotFound):
        engine.forget(giulia, "health")  # nothing true to end
    erased = engine.forget(giulia, "health", erase=True)
    assert erased.erased and erased.end_cause is EndCause.EXPIRED
    assert [v.content for v in engine.history(giulia, "health")] == [""]
    assert "hospital" not in str(engine.export_user("acme", "giulia"))


def test_forgetting_a_memory_or_confirming_a_proposal_leaves_an_expiry_as_it_was(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    anna = Identity("acme", "anna", "support-copilot")
    engine.grant_admin("acme", "anna")
    note = engine.add_memory(giulia, "Giulia said she is in Rome until the 4th")
    engine.remember(
        giulia,
        "where",
        "Giulia is in Rome",
        valid_until=dt.date(2026, 12, 4),
        source_memory_id=note.id,
    )
    engine.confirm(anna, engine.remember(anna, "desk", "The desk opens at 9", scope="account").id)
    engine.correct(anna, "desk", "The desk opens at 10 this week", valid_until=dt.date(2026, 12, 4))
    clock.to(dt.datetime(2026, 12, 8, tzinfo=UTC))
    engine.forget_memory(giulia, note.id)
    engine.confirm(anna, engine.remember(giulia, "desk", "The desk opens at 8", scope="account").id)
    end = dt.datetime(2026, 12, 5, tzinfo=UTC)
    (where,) = engine.history(giulia, "where")
    assert (where.end_cause, where.invalid_at) == (EndCause.EXPIRED, end)
    week = [
        v for v in engine.history(anna, "desk") if v.content == "The desk opens at 10 this week"
    ]
    assert [(v.end_cause, v.invalid_at) for v in week] == [(EndCause.EXPIRED, end)]


def test_a_past_interval_is_recorded_as_history_and_handed_to_nobody(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "trip", "Giulia is in Oslo")
    engine.get_context(giulia, reader="bot")
    past = engine.remember(
        giulia,
        "trip",
        "Giulia was in Oslo in June",
        valid_from=dt.date(2026, 6, 1),
        valid_until=dt.date(2026, 6, 30),
        reader="writer",
    )
    assert not past.is_current and past.end_cause is EndCause.EXPIRED
    assert engine.get_facts(giulia) == []
    assert told(engine.get_context(giulia, reader="writer")) == []
    assert [f.content for f in engine.get_facts(giulia, as_of=dt.date(2026, 6, 15))] == [
        "Giulia was in Oslo in June"
    ]


def test_an_export_shows_an_expired_fact_ended(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    engine.remember(giulia, "leave", LEAVE, valid_until=dt.date(2026, 12, 15))
    engine.get_context(giulia, reader="bot")
    (mark,) = engine.export_user("acme", "giulia").marks
    assert mark.ended_at is None  # its end is still to come
    clock.to(dt.datetime(2026, 12, 20, tzinfo=UTC))
    exported = engine.export_user("acme", "giulia")
    (fact,) = exported.facts
    assert fact.end_cause is EndCause.EXPIRED and not fact.is_current
    assert exported.marks[0].ended_at == dt.datetime(2026, 12, 16, tzinfo=UTC)


# -- the rules, in Python and in SQL ---------------------------------------------------------

ENDS = [None, DEC_1 - dt.timedelta(microseconds=1), DEC_1, DEC_1 + dt.timedelta(microseconds=1)]


@pytest.mark.parametrize("ended", [None, DEC_1 - dt.timedelta(hours=1)], ids=["true", "ended"])
def test_each_expiry_rule_says_the_same_in_python_and_in_sql(
    engine: MemoryEngine, giulia: Identity, ended: dt.datetime | None
) -> None:
    """``is_live``/``live``, ``is_expired``/``expired``, ``is_due``/``due``/``to_come``: for every
    end before, at and after the moment (and none), the database, reading the moments as the
    engine stores them, answers what Python answers."""
    stored = engine.remember(giulia, "leave", LEAVE)
    moment = sa.literal(DEC_1, UTCDateTime())
    for until in ENDS:
        fact = dataclasses.replace(stored, ended_recorded_at=ended, valid_until=until)
        row = sa.select(
            sa.literal(ended, UTCDateTime()).label("ended_recorded_at"),
            sa.literal(until, UTCDateTime()).label("valid_until"),
        ).subquery("row")
        asked = sa.select(
            _expiry.live(row, moment).label("live"),
            _expiry.expired(row, moment).label("expired"),
            _expiry.due(row.c.valid_until, moment).label("due"),
            _expiry.to_come(row.c.valid_until, moment).label("to_come"),
        )
        with engine.db.connect() as conn:
            said = {k: bool(v) for k, v in conn.execute(asked).one()._mapping.items()}
        due = _expiry.is_due(until, DEC_1)
        python = {
            "live": _expiry.is_live(fact, DEC_1),
            "expired": _expiry.is_expired(fact, DEC_1),
            "due": due,
            "to_come": not due,
        }
        assert said == python, f"valid_until {until}"


def _terms(index: str, alias: str) -> list[str]:
    """The terms of the partial index ``index``'s predicate, as a query on ``alias`` says them."""
    (found,) = [i for i in facts.indexes if i.name == index]
    where = str(found.dialect_options["sqlite"]["where"])
    assert where == str(found.dialect_options["postgresql"]["where"])
    qualified = re.sub(r"\b(ended_recorded_at|valid_until|scope)\b", rf"{alias}.\1", where)
    return [term.strip() for term in qualified.split(" AND ")]


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_the_reads_state_the_partial_indexes_terms_as_the_indexes_do(database: str) -> None:
    """SQLite uses a partial index only when the query's WHERE holds each of the index's terms
    as the index writes it (and PostgreSQL's generic plans prove no more): the statements built
    on the rules state them so."""
    dialect: Any = {"sqlite": sqlite.dialect(), "postgresql": postgresql.dialect()}[database]

    def sql(statement: Any) -> str:
        return str(statement.compile(dialect=dialect))

    block = sql(_candidates._statement(2, database == "postgresql"))
    expected = {
        "the facts that expired": (
            sql(_versions._EXPIRED),
            _terms("ix_korely_facts_expiring", "korely_facts"),
        ),
        "the own facts counted": (
            sql(_versions._COUNT_OWN),
            _terms("uq_korely_facts_true_personal", "korely_facts"),
        ),
        "a block's candidates": (
            block,
            _terms("ix_korely_facts_true_recent", "korely_facts")
            + _terms("ix_korely_facts_true_account_recent", "korely_facts")
            + _terms("ix_korely_facts_expiring", "gone")
            + _terms("ix_korely_facts_true_account_recent", "shared")
            + _terms("uq_korely_facts_true_personal", "own"),
        ),
        "a search": (
            sql(_candidates._search_statement(database)),
            _terms("ix_korely_facts_expiring", "gone")
            + _terms("uq_korely_facts_true_personal", "own"),
        ),
    }
    missing = {
        read: [term for term in terms if term not in said]
        for read, (said, terms) in expected.items()
    }
    assert {read: terms for read, terms in missing.items() if terms} == {}
    # The expiring index's two terms come together, in its order.
    assert " AND ".join(_terms("ix_korely_facts_expiring", "gone")) in block
