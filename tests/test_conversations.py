"""A conversation kept turn by turn: a turn is found with the turn it answers and by the days it
names, and nothing of a memory that went is left in the index of the one that answered it."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine
from korely_memory._db._schema import memories, memory_terms
from korely_memory._store import _erasure, _memories, _versions
from korely_memory._text._days import days_words
from korely_memory._text._words import Words

from .helpers import Clock

UTC = dt.timezone.utc
MAY_8 = dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday

QUESTION = "Caroline: Which instrument have you been learning lately?"
ANSWER = "Melanie: The clarinet, since the spring. Lessons on Thursdays."


@pytest.fixture
def clock() -> Clock:
    return Clock(MAY_8)


@pytest.fixture
def engine(db_url: str, clock: Clock) -> Iterator[MemoryEngine]:
    with MemoryEngine(db_url, clock=clock) as engine:
        yield engine


def chat(engine: MemoryEngine, who: Identity, clock: Clock, *turns: str) -> list[int]:
    """Keep each turn as a memory, a few seconds apart."""
    kept = []
    for turn in turns:
        kept.append(engine.add_memory(who, turn).id)
        clock.advance(seconds=20)
    return kept


def found(engine: MemoryEngine, who: Identity, query: str) -> list[str]:
    return [m.content for m in engine.search(who, query).memories]


def indexed(engine: MemoryEngine, memory_id: int) -> set[str]:
    with engine.db.connect() as conn:
        return set(
            conn.execute(
                sa.select(memory_terms.c.term).where(memory_terms.c.memory_id == memory_id)
            ).scalars()
        )


def replies_to(engine: MemoryEngine, memory_id: int) -> int | None:
    with engine.db.connect() as conn:
        return conn.execute(
            sa.select(memories.c.replies_to).where(memories.c.id == memory_id)
        ).scalar_one()


def test_an_answer_is_found_by_the_question_it_answers(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    question, answer = chat(engine, giulia, clock, QUESTION, ANSWER)
    assert replies_to(engine, answer) == question
    assert ANSWER in found(engine, giulia, "What instrument is Melanie learning?")
    block = engine.get_context(giulia, "instrument learning", token_budget=400)
    assert "clarinet" in block.text


def test_a_memory_kept_long_after_answers_nothing(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    engine.add_memory(giulia, QUESTION)
    clock.advance(minutes=_memories.REPLY_WINDOW.total_seconds() / 60 + 1)
    later = engine.add_memory(giulia, ANSWER)
    assert replies_to(engine, later.id) is None
    assert ANSWER not in found(engine, giulia, "Which instrument?")


def test_only_the_same_namespace_is_answered(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    marco = Identity(giulia.account, "marco", giulia.agent)
    other_agent = Identity(giulia.account, giulia.user, "another-agent")
    engine.add_memory(giulia, QUESTION)
    for who in (marco, other_agent):
        kept = engine.add_memory(who, ANSWER)
        assert replies_to(engine, kept.id) is None
        assert found(engine, who, "instrument") == []


def test_a_memory_gains_from_the_turns_that_answer_it(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    """Two questions with the same words: the one whose answer also speaks of it ranks first,
    though it is the older."""
    answered = "Caroline: Did you go hiking in the Dolomites?"
    chat(
        engine, giulia, clock, answered, "Melanie: Yes! Hiking there was the best week of my year."
    )
    clock.advance(hours=2)
    alone = "Caroline: Did you go hiking in the Dolomites?!"
    chat(engine, giulia, clock, alone, "Melanie: Not this time, sadly.")
    ranked = found(engine, giulia, "hiking Dolomites")
    assert ranked.index(answered) < ranked.index(alone)


def test_a_memory_gains_from_the_answer_to_its_answer(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    """The second turn after a question is still about it: the question gains its score too."""
    first = "Caroline: Did you get to the Dolomites?"
    chat(engine, giulia, clock, first, "Melanie: Yes!", "Melanie: Hiking there was the best.")
    clock.advance(hours=2)
    second = "Caroline: Did you get to the Dolomites?!"
    chat(engine, giulia, clock, second, "Melanie: Yes!", "Melanie: Not much to tell, though.")
    ranked = found(engine, giulia, "hiking Dolomites")
    assert ranked.index(first) < ranked.index(second)


def test_a_memory_is_found_by_the_days_it_names(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    said = "Caroline: I went to a support group yesterday, and ran a charity race last Sunday."
    engine.add_memory(giulia, said)
    clock.advance(days=30)
    engine.add_memory(giulia, "Caroline: Another day, another group meeting.")
    for day in ("8 May 2023", "May 7, 2023", "7 May", "the race on 7 May 2023"):
        assert found(engine, giulia, day)[0] == said, day
    assert found(engine, giulia, "June 2023")[0] != said


def test_days_are_read_in_english_only(sqlite_url: str, giulia: Identity, clock: Clock) -> None:
    with MemoryEngine(sqlite_url, clock=clock, language="italian") as engine:
        engine.add_memory(giulia, "Giulia: sono andata in palestra ieri")
        assert engine.search(giulia, "8 May 2023").memories == ()


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("nothing said of time", ["8 May 2023"]),
        ("I went yesterday", ["8 May 2023", "7 May 2023"]),
        ("last night and last Friday", ["8 May 2023", "7 May 2023", "5 May 2023"]),
        ("last Monday", ["8 May 2023", "1 May 2023"]),  # said on a Monday: a week before
        ("last weekend", ["8 May 2023", "6 May 2023"]),
        ("two weeks ago, 3 days ago", ["8 May 2023", "24 April 2023", "5 May 2023"]),
        ("a couple of months ago", ["8 May 2023", "March 2023"]),
        ("last month; a year ago", ["8 May 2023", "2022", "April 2023"]),
    ],
)
def test_the_days_a_text_points_to(text: str, days: list[str]) -> None:
    assert days_words(MAY_8, text) == " ".join(days)


def test_months_back_cross_the_year() -> None:
    assert days_words(dt.datetime(2023, 1, 8, tzinfo=UTC), "2 months ago") == (
        "8 January 2023 November 2022"
    )


# -- nothing of a memory that went stays in another's index -------------------------------


def test_forgetting_the_memory_answered_rebuilds_its_answer(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    question, answer = chat(engine, giulia, clock, QUESTION, ANSWER)
    assert "instrument" in indexed(engine, answer)
    engine.forget_memory(giulia, question)
    assert replies_to(engine, answer) is None
    assert "instrument" not in indexed(engine, answer)
    assert found(engine, giulia, "instrument") == []
    assert found(engine, giulia, "clarinet") == [ANSWER]  # found by its own words still


def test_erasing_a_fact_spares_the_answer_and_takes_its_copy_of_the_words(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    """The memory that holds the erased words goes; the one answering it stays (its own words
    do not hold them) with an index that no longer does."""
    said = "Giulia: my bank PIN is kept under the blue teapot"
    holding, reply, later = chat(
        engine, giulia, clock, said, "Assistant: Noted, I will remember that.", "Giulia: thanks!"
    )
    assert "teapot" in indexed(engine, reply)
    engine.remember(giulia, "pin-place", "Giulia keeps her bank PIN under the blue teapot")
    engine.forget(giulia, "pin-place", erase=True)
    left = {m.id: m.content for m in engine.search(giulia, "noted remember thanks").memories}
    assert holding not in left
    assert set(left) == {reply, later}
    assert indexed(engine, reply).isdisjoint({"teapot", "pin", "bank", "blue"})
    assert replies_to(engine, reply) is None
    assert replies_to(engine, later) == reply  # its own link is untouched
    assert found(engine, giulia, "teapot") == []


def test_an_erased_person_leaves_no_index(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    chat(engine, giulia, clock, QUESTION, ANSWER)
    engine.erase_user(giulia.account, giulia.user)
    with engine.db.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(memory_terms)).scalar() == 0
        assert conn.execute(sa.select(sa.func.count()).select_from(memories)).scalar() == 0


def test_a_memory_whose_answer_went_first_is_forgotten_whole(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    question, answer, follow_up = chat(engine, giulia, clock, QUESTION, ANSWER, "Caroline: Nice!")
    engine.forget_memory(giulia, answer)
    assert replies_to(engine, follow_up) is None
    assert "clarinet" not in indexed(engine, follow_up)
    engine.forget_memory(giulia, question)
    assert found(engine, giulia, "nice") == ["Caroline: Nice!"]


def test_own_words_come_first_in_a_long_memory_s_index(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    """A memory with nearly as many distinct words as an index holds: the words of the memory
    it answers take only the room left, so an erased fact still finds its own words."""
    repeated = " ".join(f"topic{i} topic{i}" for i in range(40))
    many = " ".join(f"subject{i}" for i in range(1_000))
    engine.add_memory(giulia, f"Caroline: {repeated}")
    clock.advance(seconds=20)
    holding = engine.add_memory(giulia, f"Melanie: {many} and Alice lives in Paris").id
    assert {"alic", "live", "pari"} <= indexed(engine, holding)
    assert len(indexed(engine, holding)) == _memories.MAX_TERMS
    engine.remember(giulia, "alice-city", "Alice lives in Paris")
    engine.forget(giulia, "alice-city", erase=True)
    assert holding not in {m.id for m in engine.export_user("acme", "giulia").memories}


def test_erasing_a_fact_takes_the_copy_a_spared_answer_holds(
    engine: MemoryEngine, giulia: Identity, clock: Clock
) -> None:
    """The question holds one of the fact's words, its answer another: neither says most of
    them, both stay; the answer's copy of the question's words goes."""
    question, answer = chat(
        engine, giulia, clock, "Caroline: is Alice still around?", "Melanie: she moved to Paris"
    )
    assert {"alic", "pari"} <= indexed(engine, answer)
    engine.remember(giulia, "alice-city", "Alice lives in Paris")
    engine.forget(giulia, "alice-city", erase=True)
    assert {m.id for m in engine.export_user("acme", "giulia").memories} == {question, answer}
    assert "alic" not in indexed(engine, answer)
    assert "pari" in indexed(engine, answer)
    assert replies_to(engine, answer) is None


def test_a_clock_without_a_zone_is_read_as_utc(sqlite_url: str, giulia: Identity) -> None:
    naive = MAY_8.replace(tzinfo=None)
    with MemoryEngine(sqlite_url, clock=lambda: naive) as engine:
        first = engine.add_memory(giulia, QUESTION)
        second = engine.add_memory(giulia, ANSWER)
        assert replies_to(engine, second.id) == first.id
        assert ANSWER in found(engine, giulia, "8 May 2023 instrument")


def test_no_day_before_year_one() -> None:
    year_one = dt.datetime(1, 1, 1, tzinfo=UTC)
    said = "yesterday, 99 weeks ago, 3 years ago, 2 months ago, last month, last Friday"
    assert days_words(year_one, said) == "1 January 1"
    assert days_words(dt.datetime(2, 3, 1, tzinfo=UTC), "a year ago, 2 years ago") == "1 March 2 1"


# -- two writers at once (PostgreSQL: SQLite's writers take turns) -----------------------------


def test_an_answer_kept_while_its_memory_is_erased_is_rebuilt(
    postgresql_url: str, giulia: Identity, clock: Clock
) -> None:
    """A writer keeps an answer to a memory, and has not committed, when another erases a fact
    whose words that memory holds: the erasure waits for it, then rebuilds the answer."""
    with MemoryEngine(postgresql_url, clock=clock) as engine:
        said = engine.add_memory(giulia, "Giulia: my bank PIN is kept under the blue teapot").id
        engine.remember(giulia, "pin-place", "Giulia keeps her bank PIN under the blue teapot")
        clock.advance(seconds=20)
        with engine.db.connect() as conn, conn.begin():
            _versions.lock_person(conn, giulia.account, giulia.user)
            answer = _memories.add(conn, giulia, "Assistant: Noted.", clock.now, Words()).id
            erasing = threading.Thread(
                target=engine.forget, args=(giulia, "pin-place"), kwargs={"erase": True}
            )
            erasing.start()
            erasing.join(1.0)
            assert erasing.is_alive()  # waiting for the answer's writer
        erasing.join(10)
        left = {m.id for m in engine.export_user("acme", "giulia").memories}
        assert left == {answer}
        assert replies_to(engine, answer) is None
        assert indexed(engine, answer).isdisjoint({"pin", "teapot", "blue", "bank"})
        assert said not in left


def test_a_memory_kept_while_the_one_before_goes_answers_nothing(
    postgresql_url: str, giulia: Identity, clock: Clock
) -> None:
    """The memory before is being forgotten, not yet committed, when another is kept: keeping
    it waits, then answers nothing, with no error."""
    with MemoryEngine(postgresql_url, clock=clock) as engine:
        before = engine.add_memory(giulia, QUESTION)
        clock.advance(seconds=20)
        kept: list[int] = []
        with engine.db.connect() as conn, conn.begin():
            _versions.lock_person(conn, giulia.account, giulia.user)
            _erasure.forget_memory(conn, before, clock.now, Words())
            keeping = threading.Thread(
                target=lambda: kept.append(engine.add_memory(giulia, ANSWER).id)
            )
            keeping.start()
            keeping.join(1.0)
            assert keeping.is_alive()  # waiting for the forgetting writer
        keeping.join(10)
        assert kept and replies_to(engine, kept[0]) is None
        assert "instrument" not in indexed(engine, kept[0])
        assert found(engine, giulia, "clarinet") == [ANSWER]
