"""Agent notices: read marks and "Changed since you last read", each change told once.

The rules are in docs/concepts.md, "Notices".
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from korely_memory import Identity, InvalidRequest, MemoryEngine
from korely_memory._db._schema import marks

from .helpers import Running, snapshot, statements

GIULIA_SALES = Identity("acme", "giulia", "sales-copilot")
MARCO = Identity("acme", "marco", "support-copilot")
TEAM = Identity("acme", None, "support-copilot")
ADMIN = Identity("acme", "anna", "support-copilot")
NOON = dt.datetime(2026, 3, 10, 12, tzinfo=dt.timezone.utc)
TODAY = NOON.date().isoformat()
CHANGED = "## Changed since you last read"


@pytest.fixture
def engine(db_url: str) -> Iterator[MemoryEngine]:
    """The engine's clock runs from noon of a fixed day: the days the notices print are TODAY."""
    with MemoryEngine(db_url, clock=Running(NOON)) as eng:
        yield eng


def mark_count(engine: MemoryEngine) -> int:
    with engine.db.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM korely_marks")).scalar_one()


def test_the_story(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    first = engine.get_context(giulia, "Where does Giulia live?", reader="support-bot")
    assert "Giulia lives in Rome" in first.text and CHANGED not in first.text
    # Another agent (same identity, another reader) learns she moved.
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    told = engine.get_context(giulia, "Where does Giulia live?", reader="support-bot")
    assert told.volatile.startswith(
        f"{CHANGED}\n"
        f"- was: Giulia lives in Rome -> now: Giulia lives in Milan ({TODAY}, corrected)\n\n"
    )
    assert len(told.changed) == 1 and told.changed[0].now is not None and told.changed_more == 0
    again = engine.get_context(giulia, "Where does Giulia live?", reader="support-bot")
    assert CHANGED not in again.text and again.changed == ()
    assert "Giulia lives in Milan" in again.text
    # A reader that never read Rome is told nothing.
    assert CHANGED not in engine.get_context(giulia, reader="billing-bot").text
    # Reading without a reader filters nothing and keeps nothing.
    assert engine.get_context(giulia).text == again.text


def test_a_chain_is_told_from_what_was_read_to_what_holds(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="bot")
    engine.remember(giulia, "home-city", "Giulia lives in Florence")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    block = engine.get_context(giulia, reader="bot")
    assert (
        f"- was: Giulia lives in Rome -> now: Giulia lives in Milan ({TODAY}, corrected)"
        in block.text
    )
    assert "Florence" not in block.text


def test_a_forgotten_fact_is_no_longer_true(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "plan", "Giulia uses the Pro plan")
    engine.get_context(giulia, reader="bot")
    engine.forget(giulia, "plan")
    block = engine.get_context(giulia, reader="bot")
    assert f"- no longer true: Giulia uses the Pro plan ({TODAY}, forgotten)" in block.text
    assert block.changed[0].now is None


def test_a_replacement_this_identity_cannot_see_is_told_as_no_longer_true(
    engine: MemoryEngine,
    giulia: Identity,
) -> None:
    engine.remember(TEAM, "escalation", "Escalate to Paolo")
    engine.get_context(TEAM, reader="bot")  # team memory read: subject is nobody
    engine.remember(TEAM, "escalation", "Escalate to the secret on-call list")
    block = engine.get_context(giulia, reader="bot")  # Giulia cannot see team memory
    assert f"- no longer true: Escalate to Paolo ({TODAY}, stated)" in block.text
    assert "secret" not in block.text


def test_a_fact_true_again_with_the_same_content_is_no_change(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="bot")
    engine.forget(giulia, "home-city")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    block = engine.get_context(giulia, reader="bot")
    assert CHANGED not in block.text and block.changed_more == 0
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    engine.correct(giulia, "home-city", "Giulia lives in Rome")
    assert CHANGED not in engine.get_context(giulia, reader="bot").text


def test_a_fact_whose_memory_was_forgotten_keeps_its_words_out(
    engine: MemoryEngine, giulia: Identity
) -> None:
    memory = engine.add_memory(giulia, "Giulia said her daughter's school is Liceo Manzoni")
    engine.remember(giulia, "school", "Daughter attends Liceo Manzoni", source_memory_id=memory.id)
    engine.get_context(giulia, reader="bot")
    engine.forget_memory(giulia, memory.id)
    block = engine.get_context(giulia, reader="bot")
    assert f"- no longer true: a fact whose memory was forgotten ({TODAY}, forgotten)" in block.text
    assert "Manzoni" not in block.text
    assert all(
        "Manzoni" not in f.content for f in engine.get_facts(giulia, include_invalidated=True)
    )
    (kept,) = engine.history(giulia, "school")
    assert kept.erased and kept.content == "" and kept.end_cause == "forgotten"


def test_a_fact_read_from_a_memory_replacing_another_says_so(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="bot")
    memory = engine.add_memory(giulia, "Giulia: I moved to Milan last week")
    engine.remember(giulia, "home-city", "Giulia lives in Milan", source_memory_id=memory.id)
    assert (
        f"-> now: Giulia lives in Milan ({TODAY}, read from a memory)"
        in engine.get_context(giulia, reader="bot").text
    )


def test_memory_with_no_end_user_tells_only_explicit_changes_by_default(
    engine: MemoryEngine,
) -> None:
    engine.remember(TEAM, "escalation", "Escalate to Paolo")
    engine.remember(TEAM, "hours", "Open 9-17")
    engine.get_context(TEAM, reader="bot")
    memory = engine.add_memory(TEAM, "Standup: escalations go to Sara now")
    engine.remember(TEAM, "escalation", "Escalate to Sara", source_memory_id=memory.id)
    engine.correct(TEAM, "hours", "Open 8-18")
    default = engine.get_context(TEAM, reader="bot")
    assert [c.cause for c in default.changed] == ["corrected"]
    assert default.changed_more == 0  # what is not told is not counted
    everything = engine.get_context(TEAM, reader="bot", changes="all")
    assert [c.cause for c in everything.changed] == ["read_from_memory"]
    assert "(2026" in everything.text or f"({TODAY}, read from a memory)" in everything.text


def test_account_fact_closed_from_a_memory_is_told_only_on_request(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    old = engine.confirm(ADMIN, engine.remember(MARCO, "hours", "Open 9-17", scope="account").id)
    engine.get_context(giulia, reader="bot")
    memory = engine.add_memory(MARCO, "Meeting notes: support hours change to 8-18")
    proposal = engine.remember(
        MARCO, "hours", "Open 8-18", scope="account", source_memory_id=memory.id
    )
    engine.confirm(ADMIN, proposal.id)
    assert engine.history(giulia, "hours")[0].end_cause == "read_from_memory"
    quiet = engine.get_context(giulia, reader="bot")
    assert quiet.changed == () and quiet.changed_more == 0 and "Open 8-18" in quiet.text
    told = engine.get_context(giulia, reader="bot", changes="all")
    assert [c.was.id for c in told.changed] == [old.id]
    assert "- was: Open 9-17 -> now: Open 8-18" in told.text


def test_five_changes_are_told_three_at_a_time_newest_first(
    engine: MemoryEngine, giulia: Identity
) -> None:
    for i in range(5):
        engine.remember(giulia, f"k{i}", f"old value {i}")
    engine.get_context(giulia, reader="bot")
    for i in range(5):
        engine.correct(giulia, f"k{i}", f"new value {i}")
    first = engine.get_context(giulia, reader="bot")
    assert [c.was.key for c in first.changed] == ["k4", "k3", "k2"]
    assert first.changed_more == 2
    lines = first.volatile.split("\n\n")[0].split("\n")
    assert lines[0] == CHANGED and lines[1].startswith("- was: old value 4 -> now: new value 4")
    second = engine.get_context(giulia, reader="bot")
    assert [c.was.key for c in second.changed] == ["k1", "k0"] and second.changed_more == 0
    assert engine.get_context(giulia, reader="bot").changed == ()


def test_a_long_change_line_is_shortened(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "bio", "Giulia " + "worked in many places " * 40)
    engine.get_context(giulia, reader="bot")
    engine.correct(giulia, "bio", "Giulia " + "now works in Milan " * 40)
    block = engine.get_context(giulia, reader="bot", token_budget=400)
    (line,) = [x for x in block.text.split("\n") if x.startswith("- was:")]
    assert "…" in line and len(line) < 250


def test_a_change_that_does_not_fit_waits(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "bio", "Giulia " + "worked in many places " * 40)
    engine.get_context(giulia, reader="bot")
    engine.correct(giulia, "bio", "Giulia " + "now works in Milan " * 40)
    tight = engine.get_context(giulia, reader="bot", token_budget=60)
    assert tight.changed == () and tight.changed_more == 1 and tight.tokens <= 60
    roomy = engine.get_context(giulia, reader="bot", token_budget=800)
    assert [c.cause for c in roomy.changed] == ["corrected"]


def test_one_reader_hears_of_every_agent_definition_it_read(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(GIULIA_SALES, "budget", "Giulia's budget is 10k")
    engine.get_context(giulia, reader="bot")
    engine.get_context(GIULIA_SALES, reader="bot")
    engine.correct(GIULIA_SALES, "budget", "Giulia's budget is 20k")
    block = engine.get_context(giulia, reader="bot")
    # The reader hears that what it read no longer holds,
    # and nothing of the other definition's new fact.
    assert f"- no longer true: Giulia's budget is 10k ({TODAY}, corrected)" in block.text
    assert "20k" not in block.text
    # Read under two names to keep them apart.
    engine.get_context(giulia, reader="support-only")
    engine.correct(GIULIA_SALES, "budget", "Giulia's budget is 30k")
    assert CHANGED not in engine.get_context(giulia, reader="support-only").text


def test_a_block_for_another_user_never_tells_this_users_changes(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    assert CHANGED not in engine.get_context(MARCO, reader="bot").text
    assert "Rome" in engine.get_context(giulia, reader="bot").text


def test_account_fact_changes_reach_every_user_the_reader_serves(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    engine.confirm(ADMIN, engine.remember(MARCO, "hours", "Open 9-17", scope="account").id)
    engine.get_context(giulia, reader="bot")
    engine.correct(ADMIN, "hours", "Open 8-18")
    block = engine.get_context(
        MARCO, reader="bot"
    )  # the mark has no subject: any user's block tells it
    assert "- was: Open 9-17 -> now: Open 8-18" in block.text
    assert CHANGED not in engine.get_context(giulia, reader="bot").text


def test_reads_into_the_past_and_history_leave_no_mark(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    now = NOON + dt.timedelta(minutes=5)
    engine.get_context(giulia, reader="bot", as_of=now)
    engine.get_context(giulia, reader="bot", known_as_of=now)
    engine.get_facts(giulia, reader="bot", as_of=now)
    engine.get_facts(giulia, reader="bot", known_as_of=now)
    engine.get_facts(giulia, reader="bot", include_invalidated=True)
    engine.history(giulia, "home-city")
    engine.proposals("acme")
    assert mark_count(engine) == 0
    engine.get_facts(giulia, reader="bot")
    assert mark_count(engine) == 1


def test_get_facts_with_a_reader_marks_what_it_hands_over(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_facts(giulia, reader="bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    assert (
        "- was: Giulia lives in Rome -> now: Giulia lives in Milan"
        in engine.get_context(giulia, reader="bot").text
    )


def test_a_steady_read_writes_nothing(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="bot")
    before = snapshot(engine)
    with statements(engine.db) as sent:
        for _ in range(3):
            engine.get_context(giulia, "where", reader="bot")
    writing = ("INSERT", "UPDATE", "DELETE", "BEGIN IMMEDIATE")
    assert sent and [s for s in sent if s.lstrip().upper().startswith(writing)] == []
    assert snapshot(engine) == before


def test_a_mark_holds_no_text_and_one_row_per_fact(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    for _ in range(3):
        engine.get_context(giulia, reader="bot")
    with engine.db.connect() as conn:
        rows = conn.execute(sa.select(marks)).mappings().all()
    assert len(rows) == 1
    assert "Rome" not in repr(dict(rows[0]))
    assert rows[0]["subject"] == "giulia" and rows[0]["reader"] == "bot"
    assert rows[0]["last_read_at"].minute == 0


@pytest.mark.parametrize(
    "bad", ["", ".", "..", "a/b", "new\nline", "tab\tchar", "nul\x00", "x" * 256], ids=repr
)
def test_a_bad_reader_name_is_refused_and_leaves_nothing(
    engine: MemoryEngine, bad: str, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    before = snapshot(engine)
    with pytest.raises(InvalidRequest) as caught:
        engine.get_context(giulia, reader=bad)
    assert caught.value.field == "reader"
    with pytest.raises(InvalidRequest):
        engine.delete_reader("acme", bad)
    assert snapshot(engine) == before


def test_trim_removes_old_marks_and_marks_whose_change_was_told(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(giulia, "plan", "Pro plan")
    engine.get_context(giulia, reader="bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    engine.get_context(giulia, reader="bot")  # told: Rome's mark is spent; Milan's is new
    assert mark_count(engine) == 3
    report = engine.trim()
    assert (report.marks_told, report.marks_expired) == (1, 0)
    assert mark_count(engine) == 2
    report = engine.trim(now=NOON + dt.timedelta(days=89))
    assert report.marks_expired == 0
    report = engine.trim(now=NOON + dt.timedelta(days=91))
    assert report.marks_expired == 2 and mark_count(engine) == 0


def test_delete_reader_says_how_many_it_removed(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "a", "first")
    engine.remember(giulia, "b", "second")
    engine.get_context(giulia, reader="bot")
    engine.get_context(giulia, reader="other")
    assert engine.delete_reader("acme", "bot") == 2
    assert engine.delete_reader("acme", "bot") == 0
    assert mark_count(engine) == 2


def test_a_held_lock_makes_the_read_give_way_not_fail(
    engine: MemoryEngine, db_url: str, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    holder = sa.create_engine(db_url)
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.exec_driver_sql("UPDATE korely_marks SET subject = subject")
            locked.set()
            release.wait(10)
            conn.rollback()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert locked.wait(10)
        start = time.monotonic()
        block = engine.get_context(giulia, reader="bot")
        took = time.monotonic() - start
    finally:
        release.set()
        thread.join()
        holder.dispose()
    # The holder keeps its lock for 10 s: a read that waited for it would take that long. The
    # read waits MARK_WAIT (0.2 s) at most; the rest of the bound is room for a busy machine.
    assert took < 3
    assert block.changed_more is None and block.changed == ()
    assert "Giulia lives in Milan" in block.text
    later = engine.get_context(giulia, reader="bot")
    assert [c.cause for c in later.changed] == ["corrected"]
    assert engine.get_context(giulia, reader="bot").changed == ()


def test_marks_go_with_their_fact_and_with_an_erased_user(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(MARCO, "home-city", "Marco lives in Turin")
    engine.get_context(giulia, reader="bot")
    engine.get_context(MARCO, reader="bot")
    engine.get_context(MARCO, reader="giulia")  # a reader with the user's name
    assert mark_count(engine) == 3
    report = engine.erase_user("acme", "giulia")
    assert report.marks == 2 and report.facts == 1
    assert mark_count(engine) == 1


def test_changes_never_starve_the_first_memory(engine: MemoryEngine, giulia: Identity) -> None:
    for i in range(3):
        engine.remember(
            giulia, f"k{i}", f"Giulia's old arrangement number {i} " + "with many details " * 6
        )
    engine.get_context(giulia, reader="bot")
    for i in range(3):
        engine.correct(
            giulia, f"k{i}", f"Giulia's new arrangement number {i} " + "with other details " * 6
        )
    engine.add_memory(giulia, "Giulia asked about the arrangement for invoices " * 10)
    block = engine.get_context(giulia, "arrangement invoices", reader="bot", token_budget=260)
    assert block.memories, "the first memory keeps its room"
    assert block.changed and block.tokens <= 260
    # The changes that did not fit wait; none is lost.
    told = len(block.changed)
    while block.changed_more:
        block = engine.get_context(giulia, "arrangement invoices", reader="bot", token_budget=800)
        told += len(block.changed)
    assert told == 3
