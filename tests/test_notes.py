"""Notes: a conversation's memory as a series of notes, each holding only what it was not shown.

`get_context(..., conversation=...)` keeps each note; an adapter puts every earlier one back at its
message, byte for byte. The notes are the person's data: erased, redacted, exported and trimmed.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest
import sqlalchemy as sa

from korely_memory import Identity, InvalidRequest, MemoryEngine, Note, NotRefittable
from korely_memory._db._schema import UTCDateTime
from korely_memory._engine.context import ContextMethods
from korely_memory._store import _notes
from korely_memory._store._notes import REDACTED
from korely_memory._text._render import STABLE

from .helpers import snapshot

ADMIN = Identity("acme", "anna", "support-copilot")


def cities(engine: MemoryEngine, giulia: Identity, n: int = 12) -> None:
    for i in range(n):
        engine.remember(giulia, f"trip-{i:02}", f"Giulia visited city number {i} in spring")


def test_a_note_shows_only_what_the_conversation_was_not_shown(
    engine: MemoryEngine, giulia: Identity
) -> None:
    cities(engine, giulia)
    query = "Which cities did Giulia visit?"
    whole = engine.get_context(giulia, query)
    first = engine.get_context(giulia, query, conversation="t", anchor="1")
    assert first.text == whole.text and first.facts == whole.facts
    assert first.note == Note("t", giulia.agent, 1, "1", whole.volatile, first.note.facts,
                              created_at=first.note.created_at)  # fmt: skip
    assert sorted(first.note.facts) == sorted(f.id for f in whole.facts)

    again = engine.get_context(giulia, query, conversation="t", anchor="2")
    assert again.text == STABLE and again.volatile == "" and again.facts == ()
    assert again.note is not None and again.note.text == "" and again.note.seq == 2

    engine.remember(giulia, "pet", "Giulia has a cat called Miso")
    third = engine.get_context(giulia, "Does Giulia have a cat?", conversation="t", anchor="3")
    assert [f.key for f in third.facts] == ["pet"]
    assert "Miso" in third.volatile and "city number" not in third.volatile
    assert third.tokens == engine.count_tokens(third.text)

    # Another conversation was shown nothing yet.
    other = engine.get_context(giulia, query, conversation="u")
    assert other.volatile == engine.get_context(giulia, query).volatile


def test_earlier_notes_are_kept_byte_for_byte_and_a_turn_read_again_adds_to_its_message(
    engine: MemoryEngine, giulia: Identity
) -> None:
    cities(engine, giulia, 4)
    texts = []
    for turn in range(1, 4):
        engine.remember(giulia, f"hobby-{turn}", f"Giulia took up hobby {turn} this year")
        block = engine.get_context(giulia, f"hobby {turn}", conversation="t", anchor=f"m{turn}")
        assert block.note is not None
        texts.append(block.note.text)
    assert [n.text for n in engine.notes(giulia, "t")] == texts
    assert [n.anchor for n in engine.notes(giulia, "t")] == ["m1", "m2", "m3"]

    # The third turn read again (its agent wrote meanwhile): a note for the same message, with
    # only what is new; the notes before stay as they were.
    engine.remember(giulia, "hobby-4", "Giulia took up hobby 4 this year")
    again = engine.get_context(giulia, "hobby 3 hobby 4", conversation="t", anchor="m3")
    assert again.note is not None and (again.note.seq, again.note.anchor) == (4, "m3")
    assert "hobby 4" in again.volatile and "hobby 3" not in again.volatile
    kept = engine.notes(giulia, "t")
    assert [n.text for n in kept] == [*texts, again.note.text]


def test_what_a_note_no_longer_in_the_prompt_showed_is_shown_again(
    engine: MemoryEngine, giulia: Identity
) -> None:
    cities(engine, giulia, 5)
    first = engine.get_context(giulia, "cities", conversation="t", anchor="1")
    assert len(first.facts) == 5
    assert engine.get_context(giulia, "cities", conversation="t", anchor="2").facts == ()
    # The first turn was summarised away: only the second note is still in the prompt.
    third = engine.get_context(giulia, "cities", conversation="t", anchor="3", present=[2])
    assert third.facts == first.facts


def test_a_fact_shown_in_an_older_version_comes_as_a_change_once(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, "Where does Giulia live?", conversation="t", anchor="1")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")

    told = engine.get_context(giulia, "Where does Giulia live?", conversation="t", anchor="2")
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in told.volatile
    assert "## Known facts" not in told.volatile
    assert [(c.was.content, c.now and c.now.content) for c in told.changed] == [
        ("Giulia lives in Rome", "Giulia lives in Milan")
    ]
    after = engine.get_context(giulia, "Where does Giulia live?", conversation="t", anchor="3")
    assert after.volatile == ""


def test_with_a_reader_a_change_is_told_once_by_its_marks_and_the_fact_not_repeated(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(giulia, "pet", "Giulia has a cat")
    engine.get_context(giulia, "Giulia", reader="bot", conversation="t", anchor="1")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")  # by someone else

    told = engine.get_context(giulia, "Giulia", reader="bot", hold=True, conversation="t",
                              anchor="2")  # fmt: skip
    assert told.volatile.count("Giulia lives in Milan") == 1
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in told.volatile
    assert "cat" not in told.volatile
    assert told.receipt is not None and engine.acknowledge(told.receipt) == 1
    assert engine.get_context(giulia, "Giulia", reader="bot", conversation="t").volatile == ""
    # The same reader in another conversation is not told again, and is shown the facts.
    other = engine.get_context(giulia, "Giulia", reader="bot", conversation="u")
    assert "was:" not in other.volatile and "Giulia lives in Milan" in other.volatile


def test_every_fact_a_whole_block_shows_is_in_a_note_still_in_the_prompt(
    engine: MemoryEngine, giulia: Identity
) -> None:
    rng = random.Random(7)
    topics = ["food", "travel", "work", "family", "music", "sport"]
    for i in range(60):
        topic = topics[i % len(topics)]
        engine.remember(giulia, f"{topic}-{i}", f"Giulia {topic} detail {i} " + "words " * (i % 5))
    present: list[int] = []
    for turn in range(1, 25):
        query = " ".join(rng.sample(topics, 2))
        if turn % 6 == 0:
            engine.correct(giulia, f"food-{rng.randrange(0, 60, 6)}", f"Giulia food changed {turn}")
        if turn % 8 == 0:
            present = present[len(present) // 2 :]  # the oldest turns were trimmed away
        whole = engine.get_context(giulia, query, token_budget=400)
        block = engine.get_context(giulia, query, token_budget=400, conversation="t",
                                   anchor=str(turn), present=present)  # fmt: skip
        assert block.note is not None and block.tokens <= 400
        kept = {n.seq: n for n in engine.notes(giulia, "t")}
        in_prompt = {i for s in [*present, block.note.seq] for i in kept[s].facts}
        assert {f.id for f in whole.facts} <= in_prompt, turn
        present.append(block.note.seq)


def test_erasing_a_fact_redacts_the_notes_that_showed_it(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "health", "Giulia is allergic to peanuts")
    engine.remember(giulia, "pet", "Giulia has a cat called Miso")
    engine.add_memory(giulia, "Giulia told us her cat Miso hates the vet")
    engine.get_context(giulia, "Giulia cat peanuts", conversation="t", anchor="1")
    engine.correct(giulia, "health", "Giulia is allergic to hazelnuts")
    engine.get_context(giulia, "Giulia cat peanuts", conversation="t", anchor="2")
    assert "peanuts" in engine.notes(giulia, "t")[1].text  # told as a change

    engine.forget(giulia, "health", erase=True)
    kept = engine.notes(giulia, "t")
    assert all("peanuts" not in n.text and "hazelnuts" not in n.text for n in kept)
    assert REDACTED in kept[0].text.split("\n") and REDACTED in kept[1].text.split("\n")
    assert "Miso" in kept[0].text  # the other lines stay as they were
    assert "peanuts" not in str(engine.export_user("acme", "giulia").to_dict())
    assert not any("peanuts" in (v or "") for v in snapshot(engine).values())

    memory = engine.search_memories(giulia, "vet")[0]
    engine.forget_memory(giulia, memory.id)
    assert all("vet" not in n.text for n in engine.notes(giulia, "t"))


def test_a_fact_erased_between_the_read_and_its_note_is_not_kept(
    engine: MemoryEngine, db_url: str, giulia: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.remember(giulia, "health", "Giulia is allergic to peanuts")
    engine.remember(giulia, "pet", "Giulia has a cat")
    noted = ContextMethods._noted

    def erased_first(self: MemoryEngine, *args: object, **kwargs: object) -> object:
        with MemoryEngine(db_url) as other:  # a second engine commits between the two steps
            other.forget(giulia, "health", erase=True)
        return noted(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ContextMethods, "_noted", erased_first)
    block = engine.get_context(giulia, "Giulia peanuts cat", conversation="t", anchor="1")
    assert block.note is not None
    assert "peanuts" not in block.note.text and "cat" in block.note.text
    assert "peanuts" not in engine.notes(giulia, "t")[0].text
    with pytest.raises(NotRefittable):  # a note is never rendered anew, nor over the room
        block.fit(block.tokens - 5)


def test_notes_are_the_person_s_data_erased_exported_and_trimmed(
    engine: MemoryEngine, giulia: Identity
) -> None:
    marco = Identity("acme", "marco", giulia.agent)
    for who in (giulia, marco):
        engine.remember(who, "home-city", f"{who.user} lives in Rome")
        engine.get_context(who, "home", conversation="t", anchor="1")
        engine.get_context(who, "home", conversation="t2", anchor="1")

    exported = engine.export_user("acme", "giulia")
    assert [(n.conversation, n.seq) for n in exported.notes] == [("t", 1), ("t2", 1)]
    assert exported.to_dict()["notes"][0]["text"] == exported.notes[0].text

    assert engine.trim().notes == 0
    # Giulia's conversations, and the first note of one of Marco's, were last read 100 days ago.
    engine.get_context(marco, "home", conversation="t2", anchor="2")
    long_ago = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=100)
    with engine.db.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE korely_notes SET created_at = :t WHERE owner_key = 'giulia'"
                " OR (conversation = 't2' AND seq = 1)"
            ).bindparams(sa.bindparam("t", type_=UTCDateTime)),
            {"t": long_ago},
        )
    assert engine.trim().notes == 2
    assert engine.notes(giulia, "t") == [] and engine.notes(giulia, "t2") == []
    assert [n.seq for n in engine.notes(marco, "t2")] == [1, 2]
    assert len(engine.notes(marco, "t")) == 1

    engine.get_context(giulia, "home", conversation="t", anchor="1")
    report = engine.erase_user("acme", "giulia")
    assert report.notes == 1 and engine.notes(giulia, "t") == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"conversation": ""}, "conversation"),
        ({"conversation": "a\nb"}, "conversation"),
        ({"conversation": 3}, "conversation"),
        ({"conversation": "t", "anchor": "x" * 256}, "anchor"),
        ({"anchor": "m1"}, "conversation"),
        ({"present": [1]}, "conversation"),
        ({"conversation": "t", "present": [0]}, "present"),
        ({"conversation": "t", "present": "1"}, "present"),
        ({"conversation": "t", "present": [[1]]}, "present"),
        ({"conversation": "t", "present": [{}]}, "present"),
        (
            {"conversation": "t", "as_of": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)},
            "conversation",
        ),
    ],
)
def test_a_bad_conversation_argument_is_refused_and_writes_nothing(
    engine: MemoryEngine, giulia: Identity, kwargs: dict[str, object], field: str
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    before = snapshot(engine)
    with pytest.raises(InvalidRequest) as refused:
        engine.get_context(giulia, "home", **kwargs)  # type: ignore[arg-type]
    assert refused.value.field == field
    assert snapshot(engine) == before


def test_two_processes_noting_one_conversation_at_once_each_get_a_place(
    engine: MemoryEngine, db_url: str, giulia: Identity
) -> None:
    """Each turn of one conversation read at the same time by two engines: no read fails, and
    every note has a place of its own."""
    import threading

    cities(engine, giulia, 6)
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def turns(name: str) -> None:
        try:
            with MemoryEngine(db_url) as own:
                start.wait()
                for n in range(10):
                    own.get_context(giulia, "cities", conversation="t", anchor=f"{name}{n}")
        except BaseException as failed:  # reported below
            failures.append(failed)

    threads = [threading.Thread(target=turns, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    kept = engine.notes(giulia, "t")
    assert [n.seq for n in kept] == list(range(1, 21))
    assert sorted(n.anchor or "" for n in kept) == sorted(
        f"{a}{n}" for a in "ab" for n in range(10)
    )
    assert sum(len(n.facts) for n in kept) == 6  # each fact shown once in the conversation


def test_a_change_told_in_a_turn_stays_told_when_the_turn_is_read_again(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """With a reader and no hold the change is spent by the read that told it; the turn read
    again keeps it in the prompt (its first note stays) and does not tell it twice."""
    engine.remember(giulia, "home", "Giulia lives in Rome")
    engine.get_context(giulia, "home", reader="bot", conversation="t", anchor="1")
    engine.correct(giulia, "home", "Giulia lives in Milan")
    first = engine.get_context(giulia, "home", reader="bot", conversation="t", anchor="2")
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in first.volatile
    engine.remember(giulia, "pet", "Giulia has a cat")
    again = engine.get_context(giulia, "home pet", reader="bot", conversation="t", anchor="2")
    assert "cat" in again.volatile and "Milan" not in again.volatile
    at_2 = [n.text for n in engine.notes(giulia, "t") if n.anchor == "2"]
    assert "\n".join(at_2).count("now: Giulia lives in Milan") == 1


def test_more_changes_than_a_block_tells_come_as_facts_and_none_is_lost(
    engine: MemoryEngine, giulia: Identity
) -> None:
    for name in ("one", "two", "three", "four", "five"):
        engine.remember(giulia, f"d-{name}", f"Giulia value d {name}")
    engine.get_context(giulia, "value", conversation="t", anchor="1")
    for name in ("one", "two", "three", "four", "five"):
        engine.correct(giulia, f"d-{name}", f"Giulia value d {name} changed")
    whole = engine.get_context(giulia, "value")
    block = engine.get_context(giulia, "value", conversation="t", anchor="2")
    assert len(block.changed) == 3
    for fact in whole.facts:
        assert fact.content in block.volatile


def test_a_change_drawn_from_the_notes_leaves_the_facts_the_room_they_need(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home", "Giulia lives in Rome")
    engine.get_context(giulia, "Giulia", conversation="t", anchor="1", token_budget=300)
    engine.correct(giulia, "home", "Giulia lives in Milan")
    for n in range(9):
        engine.remember(giulia, f"thing-{n}", f"Giulia keeps thing {n} in the drawer")
    whole = engine.get_context(giulia, "Giulia", token_budget=300)
    block = engine.get_context(giulia, "Giulia", conversation="t", anchor="2", token_budget=300)
    assert block.tokens <= 300
    for fact in whole.facts:
        assert fact.content in block.volatile or fact.content in engine.notes(giulia, "t")[0].text


def test_two_changes_that_read_alike_are_redacted_one_by_one(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "city", "Rome")
    engine.remember(giulia, "office", "Rome")
    engine.get_context(giulia, "Rome", conversation="t", anchor="1")
    engine.correct(giulia, "city", "Paris")
    engine.correct(giulia, "office", "Paris")
    told = engine.get_context(giulia, "Paris", conversation="t", anchor="2")
    assert told.volatile.count("was: Rome -> now: Paris") == 2
    engine.forget(giulia, "city", erase=True)
    note = engine.notes(giulia, "t")[1]
    assert note.text.split("\n").count(REDACTED) == 1
    assert note.text.count("was: Rome -> now: Paris") == 1


def test_a_fact_read_from_a_forgotten_memory_leaves_the_notes(
    engine: MemoryEngine, giulia: Identity
) -> None:
    memory = engine.add_memory(giulia, "Giulia said she is allergic to peanuts")
    engine.remember(giulia, "health", "Giulia is allergic to peanuts", source_memory_id=memory.id)
    engine.get_context(giulia, "allergic peanuts", conversation="t", anchor="1")
    assert "peanuts" in engine.notes(giulia, "t")[0].text
    engine.forget_memory(giulia, memory.id)
    assert "peanuts" not in engine.notes(giulia, "t")[0].text
    assert "peanuts" not in str(engine.export_user("acme", "giulia").to_dict())
    assert not any("peanuts" in (v or "") for v in snapshot(engine).values())


def test_a_thousand_versions_are_redacted_at_once(engine: MemoryEngine, giulia: Identity) -> None:
    """Redaction looks for ids in chunks: one expression with a thousand of them is deeper than
    SQLite takes."""
    engine.remember(giulia, "status", "Giulia status one")
    engine.get_context(giulia, "status", conversation="t", anchor="1")
    shown = engine.notes(giulia, "t")[0].facts[0]
    with engine.db.begin() as conn:
        changed = _notes.redact(conn, "acme", [*range(10_000, 10_999), shown], range(1, 1001))
    assert changed == 1
    assert engine.notes(giulia, "t")[0].text.split("\n")[-1] == REDACTED


def test_an_erasure_waits_for_a_note_being_kept_and_then_redacts_it(
    engine: MemoryEngine, db_url: str, giulia: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note holds what it shows while it is kept: an erasure that comes meanwhile waits for it,
    then redacts it, on PostgreSQL (row locks) and SQLite (one writer) alike. The note shows a
    version corrected since its block was read, which the erasure's own end of the true
    version does not touch."""
    import threading
    import time

    engine.remember(giulia, "health", "Giulia is allergic to peanuts")
    holding, go = threading.Event(), threading.Event()
    lines_of = _notes.lines_of

    def paused(block: object) -> object:
        holding.set()  # inside the note's transaction, what it shows held
        assert go.wait(30)
        return lines_of(block)  # type: ignore[arg-type]

    noted_at = ContextMethods._noted

    def corrected_first(self: MemoryEngine, *args: object, **kwargs: object) -> object:
        with MemoryEngine(db_url) as other:  # the note will show a version no longer true
            other.correct(giulia, "health", "Giulia is allergic to hazelnuts")
        return noted_at(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ContextMethods, "_noted", corrected_first)
    monkeypatch.setattr(_notes, "lines_of", paused)
    noted = threading.Thread(
        target=engine.get_context, args=(giulia, "peanuts"), kwargs={"conversation": "t"}
    )
    noted.start()
    assert holding.wait(30)
    failures: list[BaseException] = []

    def erase() -> None:
        try:
            with MemoryEngine(db_url) as other:
                other.forget(giulia, "health", erase=True)
        except BaseException as failed:  # reported below
            failures.append(failed)

    erasing = threading.Thread(target=erase)
    erasing.start()
    time.sleep(0.5)  # the erasure is under way, waiting for the note
    go.set()
    noted.join()
    erasing.join()
    assert failures == []
    assert "peanuts" not in engine.notes(giulia, "t")[0].text
    assert not any("peanuts" in (v or "") for v in snapshot(engine).values())
