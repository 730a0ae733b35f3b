"""Captured facts held for the person's approval: capture(hold_for_owner=True), pending, approve,
decline. Nothing held is shown anywhere until approved; approving writes it as the person's own
statement; it is the person's data, exported and erased with them."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from korely_memory import (
    Fact,
    Identity,
    InvalidRequest,
    MemoryEngine,
    NotCurrent,
    NotFound,
    Operation,
    PendingFact,
)
from korely_memory._store import _pending

from .helpers import snapshot

SECRET = "zqheldsecretword"
MARCO = Identity("acme", "marco", "support-copilot")
ANNA = Identity("acme", "anna", "support-copilot")
EXCERPT = [("user", "I moved to Milan, and I have a cat."), ("assistant", "Noted.")]


def extracting(*operations: Operation) -> Any:
    """An extractor that answers these operations, whatever it is shown."""
    return lambda messages, facts: list(operations)


def hold(
    engine: MemoryEngine, who: Identity, *operations: Operation, reader: str | None = "bot"
) -> list[PendingFact]:
    """Capture ``operations`` for ``who``, held; returns what each step held."""
    report = engine.capture(
        who, EXCERPT, extractor=extracting(*operations), hold_for_owner=True, reader=reader
    )
    assert report.memory is None
    assert [s.outcome for s in report.steps] == ["held"] * len(operations), report.steps
    return [s.pending for s in report.steps if s.pending is not None]


def shown_anywhere(engine: MemoryEngine, who: Identity, words: str, reader: str) -> list[str]:
    """Where ``words`` show for ``who``: a block (with notices), a search, the facts, history."""
    found = []
    block = engine.get_context(who, "Where does Giulia live? A cat?", reader=reader)
    if words in block.text:
        found.append("block")
    result = engine.search(who, "Milan cat")
    if any(words in f.content for f in result.facts) or any(
        words in m.content for m in result.memories
    ):
        found.append("search")
    if any(words in f.content for f in engine.get_facts(who, include_invalidated=True)):
        found.append("facts")
    if any(words in f.content for key in ("home-city", "pet") for f in engine.history(who, key)):
        found.append("history")
    return found


# -- holding -----------------------------------------------------------------------------------


def test_a_held_capture_writes_no_fact_and_shows_nothing_until_approved(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="other-bot")
    correct, remember = hold(
        engine,
        giulia,
        Operation("replace", "home-city", "Giulia lives in Milan"),
        Operation("record", "pet", "Giulia has a cat"),
    )

    assert (correct.operation, correct.key, correct.content) == (
        "correct",
        "home-city",
        "Giulia lives in Milan",
    )
    assert (remember.operation, remember.user, remember.agent, remember.reader) == (
        "remember",
        "giulia",
        "support-copilot",
        "bot",
    )
    assert engine.pending(giulia) == [correct, remember]  # oldest first
    for words in ("Milan", "cat"):
        assert shown_anywhere(engine, giulia, words, "other-bot") == []
    assert engine.get_context(giulia, reader="other-bot").changed == ()  # no notice either
    assert engine.search_memories(giulia, "") == []  # no excerpt is kept


def test_approving_writes_it_as_the_persons_own_statement_told_once_to_other_readers(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="other-bot")
    engine.get_context(giulia, reader="app")
    (held,) = hold(engine, giulia, Operation("replace", "home-city", "Giulia lives in Milan"))

    written = engine.approve(giulia, held.id, reader="app")

    assert isinstance(written, Fact)
    assert (written.content, written.source_memory_id, written.is_current) == (
        "Giulia lives in Milan",
        None,
        True,
    )
    old, new = engine.history(giulia, "home-city")
    assert (old.end_cause, old.replaced_by_id, new.id) == ("corrected", new.id, written.id)
    assert engine.pending(giulia) == []
    told = engine.get_context(giulia, reader="other-bot")
    assert [(c.was.content, c.now.content if c.now else None) for c in told.changed] == [
        ("Giulia lives in Rome", "Giulia lives in Milan")
    ]
    assert engine.get_context(giulia, reader="other-bot").changed == ()  # once
    assert engine.get_context(giulia, reader="app").changed == ()  # not its own change
    assert "Giulia lives in Milan" in engine.get_context(giulia, "Where?").text


def test_approving_a_remember_and_a_forget(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "diet", "Giulia is vegetarian")
    pet, diet = hold(
        engine, giulia, Operation("record", "pet", "Giulia has a cat"), Operation("end", "diet")
    )
    assert (diet.operation, diet.content) == ("forget", None)

    remembered = engine.approve(giulia, pet.id)
    ended = engine.approve(giulia, diet.id)

    assert remembered is not None and (remembered.key, remembered.content) == (
        "pet",
        "Giulia has a cat",
    )
    assert ended is not None and (ended.key, ended.end_cause) == ("diet", "forgotten")
    assert [f.key for f in engine.get_facts(giulia)] == ["pet"]


def test_a_held_change_whose_key_holds_nothing_any_more_is_refused(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """A correct or a forget whose fact was forgotten meanwhile would write over that: refused
    (``NotCurrent``, none holds), nothing changes, and it stays held until declined."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(giulia, "diet", "Giulia is vegetarian")
    city, diet = hold(
        engine,
        giulia,
        Operation("replace", "home-city", "Giulia lives in Milan"),
        Operation("end", "diet"),
    )
    engine.forget(giulia, "home-city")
    engine.forget(giulia, "diet")
    before = snapshot(engine)

    for held in (city, diet):
        with pytest.raises(NotCurrent) as refused:
            engine.approve(giulia, held.id)
        assert refused.value.current_fact_id is None
        assert "decline it" in str(refused.value)

    assert snapshot(engine) == before
    assert engine.pending(giulia) == [city, diet]
    engine.decline(giulia, city.id)
    engine.decline(giulia, diet.id)
    assert engine.pending(giulia) == [] and engine.get_facts(giulia) == []


def test_approving_after_someone_else_wrote_the_key_is_refused(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """Rome is held for Giulia's approval; the CRM then writes Naples: approving Rome would
    replace Naples silently. A held forget of a fact restated since would end the new one."""
    engine.remember(giulia, "diet", "Giulia is vegetarian")
    rome, diet = hold(
        engine,
        giulia,
        Operation("record", "home-city", "Giulia lives in Rome"),
        Operation("end", "diet"),
    )
    assert (rome.drawn_against, diet.drawn_against) == (None, engine.get_facts(giulia)[0].id)
    naples = engine.remember(giulia, "home-city", "Giulia lives in Naples")  # the CRM
    engine.forget(giulia, "diet")
    restated = engine.remember(giulia, "diet", "Giulia is vegetarian")
    before = snapshot(engine)

    with pytest.raises(NotCurrent) as refused:
        engine.approve(giulia, rome.id)
    assert refused.value.current_fact_id == naples.id
    with pytest.raises(NotCurrent) as refused:
        engine.approve(giulia, diet.id)
    assert refused.value.current_fact_id == restated.id

    assert snapshot(engine) == before
    assert sorted(f.content for f in engine.get_facts(giulia)) == [
        "Giulia is vegetarian",
        "Giulia lives in Naples",
    ]
    assert engine.pending(giulia) == [rome, diet]


def test_a_held_change_still_drawn_against_what_holds_is_written(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """Another key written meanwhile, or the same fact read, changes nothing: it is written."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    (city,) = hold(engine, giulia, Operation("replace", "home-city", "Giulia lives in Milan"))
    engine.remember(giulia, "pet", "Giulia has a cat")
    engine.get_context(giulia, "Where?", reader="bot")
    written = engine.approve(giulia, city.id)
    assert written is not None and written.content == "Giulia lives in Milan"


def test_declining_writes_nothing(engine: MemoryEngine, giulia: Identity) -> None:
    (held,) = hold(engine, giulia, Operation("record", "pet", "Giulia has a cat"))
    before = snapshot(engine)

    declined = engine.decline(giulia, held.id)

    assert declined == held
    assert engine.pending(giulia) == [] and engine.get_facts(giulia) == []
    with engine.db.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(_pending.pending)).scalar() == 0
    after = snapshot(engine)
    assert {t: v for t, v in after.items() if t != "korely_pending"} == {
        t: v for t, v in before.items() if t != "korely_pending"
    }
    with pytest.raises(NotFound):  # declined once is gone
        engine.decline(giulia, held.id)


def test_the_same_change_is_held_once(engine: MemoryEngine, giulia: Identity) -> None:
    cat = Operation("record", "pet", "Giulia has a cat")
    first, again = hold(engine, giulia, cat, cat)
    (later,) = hold(engine, giulia, cat)
    (dog,) = hold(engine, giulia, Operation("record", "pet", "Giulia has a dog"))

    assert first == again == later
    assert engine.pending(giulia) == [dog]  # a newer change to the key supersedes the older
    with pytest.raises(NotFound):
        engine.approve(giulia, first.id)
    assert engine.get_facts(giulia) == []


def test_what_is_the_accounts_is_proposed_as_without_holding(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    hours = engine.remember(ANNA, "hours", "Open 9-17", scope="account")
    engine.confirm(ANNA, hours.id)
    report = engine.capture(
        giulia,
        EXCERPT,
        extractor=extracting(
            Operation("record", "loyalty", "Acme runs a loyalty program", scope="account"),
            Operation("end", "hours"),
            Operation("replace", "hours", "Open 8-18"),
            Operation("record", "pet", "Giulia has a cat"),
        ),
        hold_for_owner=True,
    )
    assert [s.outcome for s in report.steps] == ["proposed", "refused", "proposed", "held"]
    assert sorted(p.key for p in engine.proposals("acme")) == ["hours", "loyalty"]
    assert [p.key for p in engine.pending(giulia)] == ["pet"]


def test_what_would_be_refused_or_change_nothing_is_not_held(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    report = engine.capture(
        giulia,
        EXCERPT,
        extractor=extracting(
            Operation("record", "home-city", "Giulia lives in Rome"),
            Operation("replace", "nothing-here", "x"),
            Operation("end", "nothing-here"),
            Operation("record", "#bad key!", "x"),
            Operation("record", "pet", "Giulia has a cat"),
        ),
        hold_for_owner=True,
        max_facts=1,
    )
    assert [s.outcome for s in report.steps] == [
        "unchanged",
        "refused",
        "refused",
        "refused",
        "refused",  # the ceiling: one fact kept already
    ]
    assert engine.pending(giulia) == []


def test_a_dry_run_holds_nothing(engine: MemoryEngine, giulia: Identity) -> None:
    before = snapshot(engine)
    report = engine.capture(
        giulia,
        EXCERPT,
        extractor=extracting(Operation("record", "pet", "Giulia has a cat")),
        hold_for_owner=True,
        dry_run=True,
    )
    assert report.dry_run and [s.outcome for s in report.steps] == ["held"]
    assert snapshot(engine) == before


# -- whose -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "someone",
    [
        MARCO,
        Identity("acme", "giulia", "sales"),
        Identity("globex", "giulia", "support-copilot"),
        Identity("acme", None, "support-copilot"),
    ],
    ids=["another user", "another agent", "another account", "no user"],
)
def test_another_identity_neither_sees_nor_approves_nor_declines(
    engine: MemoryEngine, giulia: Identity, someone: Identity
) -> None:
    (held,) = hold(engine, giulia, Operation("record", "pet", "Giulia has a cat"))
    before = snapshot(engine)

    assert engine.pending(someone) == []
    for act in (engine.approve, engine.decline):
        with pytest.raises(NotFound) as refused:
            act(someone, held.id)
        assert "cat" not in str(refused.value)
    assert snapshot(engine) == before
    assert engine.pending(giulia) == [held]


def test_an_agent_team_memory_holds_for_its_own_identity(engine: MemoryEngine) -> None:
    team = Identity("acme", None, "planner")
    (held,) = hold(engine, team, Operation("record", "sprint", "The sprint ends on Friday"))
    assert held.user is None and engine.pending(team) == [held]
    assert engine.approve(team, held.id) is not None
    assert [f.key for f in engine.get_facts(team)] == ["sprint"]


# -- at once -----------------------------------------------------------------------------------


@pytest.fixture
def other(db_url: str) -> Iterator[MemoryEngine]:
    """A second engine on the same database: another process, as far as the first can tell."""
    with MemoryEngine(db_url) as engine:
        yield engine


def test_of_two_engines_approving_the_same_change_at_once_one_writes_it(
    engine: MemoryEngine, other: MemoryEngine, giulia: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first to take it holds it until it commits: the second waits, then finds it gone."""
    (held,) = hold(engine, giulia, Operation("record", "pet", "Giulia has a cat"))
    took = _pending.take
    first = threading.Event()

    def slow_take(*args: Any) -> PendingFact | None:
        found = took(*args)
        if not first.is_set():
            first.set()
            time.sleep(0.3)  # the other engine's approval arrives meanwhile
        return found

    monkeypatch.setattr(_pending, "take", slow_take)
    results: dict[str, Any] = {}

    def approve(name: str, on: MemoryEngine) -> None:
        try:
            results[name] = on.approve(giulia, held.id)
        except NotFound as refused:
            results[name] = refused

    threads = [threading.Thread(target=approve, args=(n, e)) for n, e in [("a", engine)]]
    threads[0].start()
    assert first.wait(10)
    threads.append(threading.Thread(target=approve, args=("b", other)))
    threads[1].start()
    for thread in threads:
        thread.join(30)

    written = [r for r in results.values() if isinstance(r, Fact)]
    refused = [r for r in results.values() if isinstance(r, NotFound)]
    assert len(written) == 1 and len(refused) == 1, results
    assert [f.content for f in engine.history(giulia, "pet")] == ["Giulia has a cat"]
    assert engine.pending(giulia) == []


async def test_the_async_twins_do_the_same(engine: MemoryEngine, giulia: Identity) -> None:
    report = await engine.acapture(
        giulia,
        EXCERPT,
        extractor=extracting(
            Operation("record", "pet", "Giulia has a cat"),
            Operation("record", "home-city", "Giulia lives in Milan"),
        ),
        hold_for_owner=True,
    )
    assert [s.outcome for s in report.steps] == ["held", "held"]
    pet, city = await engine.apending(giulia)
    assert (await engine.aapprove(giulia, pet.id)) is not None
    assert (await engine.adecline(giulia, city.id)) == city
    assert [f.key for f in engine.get_facts(giulia)] == ["pet"]


# -- the person's data -------------------------------------------------------------------------


def test_erasing_the_person_erases_what_is_held_for_them(
    engine: MemoryEngine, giulia: Identity
) -> None:
    hold(engine, giulia, Operation("record", "health", f"Giulia has {SECRET}"))
    hold(engine, Identity("acme", "giulia", "sales"), Operation("record", "x", f"{SECRET} too"))
    (marcos,) = hold(engine, MARCO, Operation("record", "desk", "Marco's desk"), reader="giulia")

    report = engine.erase_user("acme", "giulia")

    assert report.pending == 2
    assert engine.pending(giulia) == []
    everything = json.dumps(snapshot(engine))
    assert SECRET not in everything and "giulia" not in everything
    (kept,) = engine.pending(MARCO)  # his stays, naming no reader of her name
    assert (kept.id, kept.content, kept.reader) == (marcos.id, "Marco's desk", None)


def test_erasing_a_fact_drops_the_changes_to_it_held(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "health", "Giulia has diabetes")
    hold(
        engine,
        giulia,
        Operation("replace", "health", f"Giulia has {SECRET}"),
        Operation("record", "pet", "Giulia has a cat"),
    )
    (sales,) = hold(
        engine, Identity("acme", "giulia", "sales"), Operation("record", "health", "Fine")
    )

    engine.forget(giulia, "health", erase=True)

    assert [p.key for p in engine.pending(giulia)] == ["pet"]
    assert engine.pending(Identity("acme", "giulia", "sales")) == [sales]  # another namespace
    assert SECRET not in json.dumps(snapshot(engine))


def test_no_held_word_of_an_erased_person_stays_in_the_sqlite_file(
    sqlite_url: str, giulia: Identity
) -> None:
    path = Path(sa.make_url(sqlite_url).database or "")
    with MemoryEngine(sqlite_url) as engine:
        hold(engine, giulia, Operation("record", "health", f"Giulia has {SECRET}"))
        assert SECRET.encode() in _bytes(path)
        assert engine.erase_user("acme", "giulia").scrubbed
        assert SECRET.encode() not in _bytes(path)


def _bytes(path: Path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_an_export_holds_them_and_an_import_holds_them_again(
    engine: MemoryEngine, giulia: Identity
) -> None:
    (held,) = hold(engine, giulia, Operation("record", "pet", "Giulia has a cat"))
    data = json.loads(json.dumps(engine.export_user("acme", "giulia").to_dict()))
    assert [(p["operation"], p["content"], p["user"]) for p in data["pending"]] == [
        ("remember", "Giulia has a cat", "giulia")
    ]
    engine.erase_user("acme", "giulia")

    restored = engine.import_user(data)

    (again,) = engine.pending(giulia)
    assert restored.pending == (again,)
    assert (again.key, again.content, again.captured_at) == (
        held.key,
        held.content,
        held.captured_at,
    )
    assert engine.approve(giulia, again.id) is not None


def test_an_import_draws_a_held_change_against_the_version_imported(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """Imported versions get new ids: a held change is drawn against the new id of its
    version. An export made before held changes named their version draws each against the
    version its key holds."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    (city,) = hold(engine, giulia, Operation("replace", "home-city", "Giulia lives in Milan"))
    data = json.loads(json.dumps(engine.export_user("acme", "giulia").to_dict()))
    assert data["pending"][0]["drawn_against"] == city.drawn_against is not None
    for legacy in (False, True):
        engine.erase_user("acme", "giulia")
        if legacy:
            del data["pending"][0]["drawn_against"]
        engine.import_user(data)
        (again,) = engine.pending(giulia)
        (rome,) = engine.get_facts(giulia)
        assert again.drawn_against == rome.id != city.drawn_against
    written = engine.approve(giulia, again.id)
    assert written is not None and written.content == "Giulia lives in Milan"


def test_an_import_refuses_a_held_change_drawn_against_no_version_of_theirs(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    hold(engine, giulia, Operation("replace", "home-city", "Giulia lives in Milan"))
    data = json.loads(json.dumps(engine.export_user("acme", "giulia").to_dict()))
    engine.erase_user("acme", "giulia")
    data["pending"][0]["drawn_against"] = 10**6
    with pytest.raises(InvalidRequest) as refused:
        engine.import_user(data)
    assert refused.value.field == "pending[0].drawn_against"
    assert engine.pending(giulia) == []


def test_an_export_made_before_held_changes_existed_imports(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    data = engine.export_user("acme", "giulia").to_dict()
    del data["pending"]
    engine.erase_user("acme", "giulia")
    assert engine.import_user(data).pending == ()


def test_a_person_with_only_a_held_change_is_not_imported_over(
    engine: MemoryEngine, giulia: Identity
) -> None:
    data = engine.export_user("acme", "giulia")
    hold(engine, giulia, Operation("record", "pet", "Giulia has a cat"))
    with pytest.raises(InvalidRequest) as refused:
        engine.import_user(data)
    assert refused.value.field == "user"


# -- bad input ---------------------------------------------------------------------------------


def _call(engine: MemoryEngine, method: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    return getattr(engine, method)(*args, **kwargs)


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "field"),
    [
        ("pending", [object()], {}, "who"),
        ("pending", [Identity("acme", "a/b", "bot")], {}, "user"),
        ("approve", [None, 1], {}, "who"),
        ("approve", [Identity("acme", "giulia", "support-copilot"), "1"], {}, "pending_id"),
        ("approve", [Identity("acme", "giulia", "support-copilot"), -1], {}, "pending_id"),
        ("approve", [Identity("acme", "giulia", "support-copilot"), True], {}, "pending_id"),
        ("approve", [Identity("acme", "giulia", "support-copilot"), 1], {"reader": ""}, "reader"),
        ("decline", [Identity("", "giulia", "support-copilot"), 1], {}, "account"),
        ("decline", [Identity("acme", "giulia", "support-copilot"), 1.0], {}, "pending_id"),
    ],
)
def test_bad_arguments_are_refused_by_name_and_change_nothing(
    engine: MemoryEngine,
    giulia: Identity,
    method: str,
    args: list[Any],
    kwargs: dict[str, Any],
    field: str,
) -> None:
    hold(engine, giulia, Operation("record", "pet", "Giulia has a cat"))
    before = snapshot(engine)
    with pytest.raises(InvalidRequest) as refused:
        _call(engine, method, args, kwargs)
    assert refused.value.field == field
    assert snapshot(engine) == before


@pytest.mark.parametrize("flag", ["yes", 1, None])
def test_hold_for_owner_must_be_a_flag(engine: MemoryEngine, giulia: Identity, flag: Any) -> None:
    called: list[object] = []
    before = snapshot(engine)
    with pytest.raises(InvalidRequest) as refused:
        engine.capture(
            giulia,
            EXCERPT,
            extractor=lambda m, f: called.append(m) or [],
            hold_for_owner=flag,
        )
    assert refused.value.field == "hold_for_owner" and called == []
    assert snapshot(engine) == before
