"""Blocks read without a reader are made once and reused while nothing they show has changed:
whatever writes, in this process or another, the next read shows it; a block that could change
with the clock alone is never reused; an erasure empties what is kept. A reader's read reuses
one only when it would be steady: nothing to tell, nothing to write."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from multiprocessing.pool import Pool

import pytest

from korely_memory import Identity, MemoryEngine, Scope
from korely_memory._read import _read_path
from korely_memory._store import _memories

from .helpers import Clock, statements
from .processes import PROCESSES

NOON = dt.datetime(2026, 3, 10, 12, tzinfo=dt.timezone.utc)
ANNA = Identity("acme", "anna", "support-copilot")
QUERY = "Where does Giulia live?"


@pytest.fixture
def clock() -> Clock:
    return Clock(NOON)


@pytest.fixture
def engine(db_url: str, clock: Clock) -> Iterator[MemoryEngine]:
    with MemoryEngine(db_url, clock=clock) as eng:
        eng.grant_admin("acme", "anna")
        yield eng


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[Pool]:
    """A process of its own for the module's writes from another process: each opens an engine
    there and closes it, so that no block or connection of the process outlives its test.
    Forked once, not once a test (the fork and the import of this module there cost more than
    the write)."""
    with PROCESSES.Pool(1) as pool:
        yield pool


def made_again(engine: MemoryEngine, read: Callable[[], object]) -> bool:
    """Whether ``read`` made its block (the block's statement ran) or reused one (only the
    look-up of the versions ran)."""
    with statements(engine.db) as sent:
        read()
    assert sent, "a read always looks"
    return len(sent) > 1 or "korely_facts" in sent[0]


def test_a_block_is_reused_while_nothing_changes(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    first = engine.get_context(giulia, QUERY)
    with statements(engine.db) as sent:
        again = engine.get_context(giulia, QUERY)
    assert again == first
    assert len(sent) == 1 and "korely_fact_counts" in sent[0] and "korely_facts " not in sent[0]
    # Another budget or identity is another block (another query: see below).
    assert made_again(engine, lambda: engine.get_context(giulia, QUERY, token_budget=300))
    assert made_again(engine, lambda: engine.get_context(ANNA, QUERY))
    # A moment in the past or a conversation never reuse one; a reader, once steady (below).
    assert made_again(engine, lambda: engine.get_context(giulia, QUERY, reader="bot"))
    assert made_again(engine, lambda: engine.get_context(giulia, QUERY, as_of=NOON))
    assert made_again(engine, lambda: engine.get_context(giulia, QUERY, conversation="c-1"))


def account_fact(engine: MemoryEngine, key: str, content: str, **also: object) -> None:
    """An account fact, stated and confirmed by an administrator."""
    engine.remember(ANNA, key, content, scope=Scope.ACCOUNT, **also)  # type: ignore[arg-type]
    engine.confirm(ANNA, next(p.id for p in engine.proposals("acme") if p.key == key))


def test_another_query_reads_only_the_memories_of_a_person_whose_facts_all_fit(
    engine: MemoryEngine, giulia: Identity
) -> None:
    for i in range(30):
        engine.remember(giulia, f"pref-{i}", f"Giulia prefers option {i} for topic {i % 7}")
    engine.add_memory(giulia, "Giulia asked which option fits topic 3")
    engine.get_context(giulia, QUERY)
    for query in ("topic 3", "option 12", None):
        with statements(engine.db) as sent:
            block = engine.get_context(giulia, query)
        assert "korely_facts " not in " ".join(sent)  # the facts are those read before
        assert any("korely_memor" in s for s in sent)  # its memories are read for the query
        with MemoryEngine(engine.url) as fresh:
            assert block == fresh.get_context(giulia, query)
    # Many queries on the facts read before, each with facts of equal relevance to order by
    # recency and more facts than the budget shows: each block is as a fresh engine makes it.
    for i in range(30, 60):
        engine.remember(giulia, f"note-{i}", f"Giulia noted topic {i % 4} on a long card {i}")
    engine.get_context(giulia, QUERY)
    with MemoryEngine(engine.url) as fresh:
        for query in ("topic 1", "card", "long topic 2 card", "option 7", "nothing here"):
            with statements(engine.db) as sent:
                block = engine.get_context(giulia, query)
            assert "korely_facts " not in " ".join(sent)
            assert block.omitted and block == fresh.get_context(giulia, query)
    # A person with more facts than a page holds has them chosen by the query: read again.
    for i in range(400):
        engine.remember(ANNA, f"pref-{i}", f"Anna prefers option {i} for topic {i % 7}")
    engine.get_context(ANNA, QUERY)
    assert made_again(engine, lambda: engine.get_context(ANNA, "topic 3"))


WRITES: dict[str, Callable[[MemoryEngine, Identity], object]] = {
    "remember": lambda e, g: e.remember(g, "diet", "Giulia is vegetarian"),
    "correct": lambda e, g: e.correct(g, "home-city", "Giulia lives in Milan"),
    "forget": lambda e, g: e.forget(g, "home-city"),
    "erase": lambda e, g: e.forget(g, "home-city", erase=True),
    "account fact": lambda e, g: account_fact(e, "office", "Acme's office is in Turin"),
    "proposal": lambda e, g: e.remember(g, "hours", "Acme opens at nine", scope=Scope.ACCOUNT),
    "confirm": lambda e, g: e.confirm(ANNA, e.proposals("acme")[0].id),
    "memory": lambda e, g: e.add_memory(g, "Giulia asked where Rome's office is"),
    "forget memory": lambda e, g: e.forget_memory(g, e.search_memories(g, "office")[0].id),
    "erase user": lambda e, g: e.erase_user("acme", "giulia"),
    "import": lambda e, g: e.import_user(EXPORTED[0]),  # type: ignore[arg-type]
}
EXPORTED: list[dict[str, object]] = []


def before_writing(engine: MemoryEngine, giulia: Identity, write: str) -> None:
    """What each of ``WRITES`` changes: a fact, a proposal, a memory; for an import, the person
    erased, to be restored from their export."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(giulia, "hours", "Acme opens at eight", scope=Scope.ACCOUNT)  # a proposal
    engine.add_memory(giulia, "Giulia asked about the office hours")
    if write == "import":
        EXPORTED[:] = [engine.export_user("acme", "giulia").to_dict()]
        engine.erase_user("acme", "giulia")


def write_elsewhere(url: str, write: str, who: Identity, exported: list[dict[str, object]]) -> None:
    """``write``, from a process of its own (whose caches are not this one's)."""
    EXPORTED[:] = exported
    with MemoryEngine(url, clock=Clock(NOON)) as engine:
        WRITES[write](engine, who)


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("where", ["this process", "another process"])
def test_every_write_to_what_a_block_shows_is_read_next(
    engine: MemoryEngine, elsewhere: Pool, giulia: Identity, write: str, where: str
) -> None:
    before_writing(engine, giulia, write)
    before = engine.get_context(giulia, QUERY)
    assert engine.get_context(giulia, QUERY) is before  # reused
    if where == "another process":
        url = engine.url.render_as_string(hide_password=False)
        elsewhere.apply(write_elsewhere, (url, write, giulia, EXPORTED))
    else:
        WRITES[write](engine, giulia)
    after = engine.get_context(giulia, QUERY)
    with MemoryEngine(engine.url) as fresh:  # a process that never kept a block
        assert after == fresh.get_context(giulia, QUERY)
    assert after != before


def forget_source(url: str, memory_id: int) -> None:
    with MemoryEngine(url, clock=Clock(NOON)) as engine:
        engine.forget_memory(ANNA, memory_id)


def test_an_account_fact_s_memory_forgotten_elsewhere_is_read_next_by_everyone(
    engine: MemoryEngine, elsewhere: Pool, giulia: Identity
) -> None:
    """An account fact read from a memory loses its link when the memory goes: the blocks of
    every person of the account show it, and are made again."""
    memory = engine.add_memory(ANNA, "The office opens at nine")
    account_fact(engine, "office-hours", "The office opens at nine", source_memory_id=memory.id)
    everyone = (giulia, Identity("acme", None, giulia.agent))
    before = [engine.get_context(who, "office") for who in everyone]
    assert [b.facts[0].source_memory_id for b in before] == [memory.id, memory.id]
    elsewhere.apply(forget_source, (engine.url.render_as_string(hide_password=False), memory.id))
    after = [engine.get_context(who, "office") for who in everyone]
    assert [b.facts[0].source_memory_id for b in after] == [None, None]


def test_a_block_that_can_expire_is_made_every_time(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(giulia, "trip", "Giulia is in Paris this week", valid_until=NOON + HOUR)
    assert "Paris" in engine.get_context(giulia, QUERY).text
    assert made_again(engine, lambda: engine.get_context(giulia, QUERY))
    clock.advance(hours=2)  # no write: the clock alone ends the trip
    assert "Paris" not in engine.get_context(giulia, QUERY).text
    # An account fact that expires does the same for every person of the account.
    account_fact(engine, "fair", "Acme is at the Turin fair", valid_until=clock.now + HOUR)
    engine.trim()  # ends the trip: only the fair expires now
    assert "Turin fair" in engine.get_context(giulia, QUERY).text
    assert made_again(engine, lambda: engine.get_context(giulia, QUERY))
    clock.advance(hours=2)
    assert "Turin fair" not in engine.get_context(giulia, QUERY).text
    engine.trim()  # nothing expires any more: blocks are reused again
    engine.get_context(giulia, QUERY)
    assert not made_again(engine, lambda: engine.get_context(giulia, QUERY))


def test_a_write_between_a_block_s_facts_and_its_memories_is_read_next(
    engine: MemoryEngine, giulia: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The versions are read with the facts, before the memories: a memory kept by another
    engine while the block is made, after its memories were read, is in the next block."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.add_memory(giulia, "Giulia asked where she could live")
    matching = _memories.matching
    wrote: list[int] = []

    def between(*args: object, **kwargs: object) -> object:
        found = matching(*args, **kwargs)  # type: ignore[arg-type]
        if not wrote:
            with MemoryEngine(engine.url) as other:
                wrote.append(other.add_memory(giulia, "Giulia wants to live by the sea").id)
        return found

    monkeypatch.setattr(_memories, "matching", between)
    assert "by the sea" not in engine.get_context(giulia, QUERY).text
    monkeypatch.setattr(_memories, "matching", matching)
    assert wrote
    assert "by the sea" in engine.get_context(giulia, QUERY).text


def test_threads_reading_while_another_engine_writes_end_on_the_last_write(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """Readers of one engine keep and reuse blocks while another engine corrects a fact 40
    times; every block a reader gets holds one of the versions written, and once the writer is
    done every read shows the last."""
    engine.remember(giulia, "home-city", "Giulia lives in city 0")
    done = threading.Event()
    seen: list[str] = []

    def read() -> None:
        while not done.is_set():
            for query in (QUERY, "city", None):
                block = engine.get_context(giulia, query)
                seen.append(next(f.content for f in block.facts if f.key == "home-city"))

    readers = [threading.Thread(target=read) for _ in range(4)]
    for t in readers:
        t.start()
    with MemoryEngine(engine.url) as writer:
        for n in range(1, 41):
            writer.correct(giulia, "home-city", f"Giulia lives in city {n}")
    done.set()
    for t in readers:
        t.join()
    assert set(seen) <= {f"Giulia lives in city {n}" for n in range(41)} and len(seen) > 12
    for query in (QUERY, "city", None):
        block = engine.get_context(giulia, query)
        assert [f.content for f in block.facts] == ["Giulia lives in city 40"]


def test_an_erasure_empties_the_blocks_kept(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(ANNA, "home-city", "Anna lives in Genoa")
    engine.get_context(giulia, QUERY)
    engine.get_context(ANNA, QUERY)
    engine.erase_user("acme", "anna")
    assert not engine._blocks._blocks._items  # nothing of anyone's is kept
    assert not engine._blocks._facts._items
    assert "Rome" in engine.get_context(giulia, QUERY).text


HOUR = dt.timedelta(hours=1)


# -- a reader's steady read ---------------------------------------------------------------

BOT = "bot"


def reused_by_reader(
    engine: MemoryEngine, who: Identity, query: str | None = QUERY, token_budget: int = 800
) -> bool:
    """Whether a read under ``BOT`` handed back a kept block: one statement, which reads
    neither the facts nor the reader's pending marks' facts, and writes nothing."""
    with statements(engine.db) as sent:
        engine.get_context(who, query, reader=BOT, token_budget=token_budget)
    return len(sent) == 1 and "korely_facts" not in sent[0]


def test_a_reader_s_steady_read_reuses_the_block_and_equals_one_made_afresh(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    account_fact(engine, "office", "Acme's office is in Turin")
    engine.add_memory(giulia, "Giulia asked where the office is")
    first = engine.get_context(giulia, QUERY, reader=BOT)  # hands the facts over: marks them
    assert {f.key for f in first.facts} == {"home-city", "office"}
    with statements(engine.db) as sent:
        again = engine.get_context(giulia, QUERY, reader=BOT)
    assert len(sent) == 1 and "korely_marks" in sent[0] and "korely_facts " not in sent[0]
    assert again is first
    with MemoryEngine(engine.url, clock=Clock(NOON)) as fresh:  # keeps nothing
        assert fresh.get_context(giulia, QUERY, reader=BOT) == again
        # Held, a block that tells nothing holds nothing and carries no receipt.
        held = fresh.get_context(giulia, QUERY, reader=BOT, hold=True)
    assert engine.get_context(giulia, QUERY, reader=BOT, hold=True) is first == held
    assert held.receipt is None
    # A block kept by a read without a reader serves a reader with a mark of each of its
    # facts; one without (another person's facts) is made, handed over, then reused.
    office = engine.get_context(giulia, "office")
    assert reused_by_reader(engine, giulia, "office")
    assert engine.get_context(giulia, "office", reader=BOT) is office
    engine.remember(ANNA, "home-city", "Anna lives in Genoa")
    engine.get_context(ANNA, QUERY)
    assert not reused_by_reader(engine, ANNA)
    assert reused_by_reader(engine, ANNA)


TOLD = {"correct": "Giulia lives in Milan", "forget": "no longer true", "erase": "was erased"}


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("where", ["this process", "another process"])
def test_every_write_ends_a_reader_s_reuse_and_its_change_is_told_once(
    engine: MemoryEngine, elsewhere: Pool, giulia: Identity, write: str, where: str
) -> None:
    before_writing(engine, giulia, write)
    before = engine.get_context(giulia, QUERY, reader=BOT)
    assert reused_by_reader(engine, giulia)
    if where == "another process":
        url = engine.url.render_as_string(hide_password=False)
        elsewhere.apply(write_elsewhere, (url, write, giulia, EXPORTED))
    else:
        WRITES[write](engine, giulia)
    with statements(engine.db) as sent:
        after = engine.get_context(giulia, QUERY, reader=BOT)
    assert any("korely_facts" in s for s in sent)  # made again
    assert after != before
    if write in TOLD:  # the version the reader was handed ended: told, once
        assert [c.was.key for c in after.changed] == ["home-city"]
        assert TOLD[write] in after.text
        assert engine.get_context(giulia, QUERY, reader=BOT).changed == ()
    # Steady again, and the same as a block made afresh.
    steady = engine.get_context(giulia, QUERY, reader=BOT)
    assert reused_by_reader(engine, giulia)
    with MemoryEngine(engine.url, clock=Clock(NOON)) as fresh:
        assert fresh.get_context(giulia, QUERY, reader=BOT) == steady


def test_a_change_waiting_from_another_agent_s_facts_is_told_despite_a_kept_block(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """One reader name reads a person's memory under two agents: a fact of the other agent's
    that it was handed changes. The first agent's versions did not move; the change is still
    told by the first agent's next read, as a read made afresh tells it."""
    other = Identity(giulia.account, giulia.user, "billing-bot")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(other, "card", "Giulia pays by card")
    engine.get_context(giulia, QUERY, reader=BOT)
    assert reused_by_reader(engine, giulia)
    engine.get_context(other, "card", reader=BOT)
    engine.correct(other, "card", "Giulia pays by bank transfer")
    told = engine.get_context(giulia, QUERY, reader=BOT)
    assert [c.was.content for c in told.changed] == ["Giulia pays by card"]
    assert engine.get_context(other, "card", reader=BOT).changed == ()  # told once
    engine.get_context(giulia, QUERY, reader=BOT)
    assert reused_by_reader(engine, giulia)


def test_a_reader_s_marks_read_in_an_earlier_hour_are_refreshed_then_reused(
    engine: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, QUERY, reader=BOT)
    assert reused_by_reader(engine, giulia)
    clock.advance(hours=1)
    with statements(engine.db) as sent:  # moves the marks' last read to this hour
        engine.get_context(giulia, QUERY, reader=BOT)
    assert any(s.startswith("UPDATE korely_marks SET last_read_at") for s in sent)
    assert reused_by_reader(engine, giulia)


def test_marks_deleted_or_held_elsewhere_end_a_reader_s_reuse(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, QUERY, reader=BOT)
    with MemoryEngine(engine.url, clock=Clock(NOON)) as other:
        assert other.delete_reader("acme", BOT) == 1  # the reader's marks go
    assert not reused_by_reader(engine, giulia)  # hands the facts over again
    assert reused_by_reader(engine, giulia)
    # A change another read holds: this read makes its block, without the change.
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    with MemoryEngine(engine.url, clock=Clock(NOON)) as other:
        held = other.get_context(giulia, QUERY, reader=BOT, hold=True)
    assert [c.was.content for c in held.changed] == ["Giulia lives in Rome"]
    steady = engine.get_context(giulia, QUERY, reader=BOT)
    assert steady.changed == ()
    assert not reused_by_reader(engine, giulia)  # the held change waits: made every time
    engine.acknowledge(held.receipt)  # type: ignore[arg-type]
    engine.get_context(giulia, QUERY, reader=BOT)
    assert reused_by_reader(engine, giulia)


def test_a_reader_s_steady_read_on_the_database_s_own_clock(db_url: str, giulia: Identity) -> None:
    """Without a clock given, PostgreSQL's steady read takes the hour from the server in the
    same statement; SQLite from this process."""
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        first = engine.get_context(giulia, QUERY, reader=BOT)
        assert reused_by_reader(engine, giulia)
        assert engine.get_context(giulia, QUERY, reader=BOT) is first


def test_a_held_read_with_a_change_to_tell_is_made_and_holds_it(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, QUERY, reader=BOT, hold=True)
    assert engine.get_context(giulia, QUERY, reader=BOT, hold=True).receipt is None  # kept
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    held = engine.get_context(giulia, QUERY, reader=BOT, hold=True)
    assert [c.was.content for c in held.changed] == ["Giulia lives in Rome"]
    assert held.receipt is not None
    again = engine.get_context(giulia, QUERY, reader=BOT, hold=True)  # held: not told again
    assert again.changed == () and again.receipt is None
    assert engine.acknowledge(held.receipt) == 1
    engine.get_context(giulia, QUERY, reader=BOT, hold=True)
    assert reused_by_reader(engine, giulia)


@pytest.mark.parametrize("reader", [BOT, None])
def test_an_erasure_while_a_block_is_made_keeps_nothing_of_it(
    engine: MemoryEngine, giulia: Identity, monkeypatch: pytest.MonkeyPatch, reader: str | None
) -> None:
    """The person is erased (by another thread) after a read took their facts and before it
    kept its block: the erasure emptied the caches, and the read keeps nothing it read before."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    if reader is not None:  # the reader's marks are written: its next read is steady
        engine.get_context(giulia, QUERY, reader=reader)
        engine._blocks = _read_path.BlockCache()
    keep = _read_path.BlockCache.keep

    def erased_first(*args: object, **kwargs: object) -> None:
        engine.erase_user("acme", "giulia")
        keep(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_read_path.BlockCache, "keep", erased_first)
    assert "Rome" in engine.get_context(giulia, QUERY, reader=reader).text  # read before
    monkeypatch.undo()
    assert not engine._blocks._blocks._items and not engine._blocks._facts._items


def test_a_correction_while_a_reader_s_marks_are_written_is_told_next(
    engine: MemoryEngine, giulia: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another engine corrects a fact after a reader's read took it from its snapshot and
    before the read wrote its marks and kept its block: the kept block carries the versions of
    the snapshot, so the next read is made again and tells the change, once."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    write_marks = type(engine)._write_marks
    corrected: list[bool] = []

    def corrected_first(self: MemoryEngine, *args: object, **kwargs: object) -> object:
        if not corrected:
            corrected.append(True)
            with MemoryEngine(engine.url, clock=Clock(NOON)) as other:
                other.correct(giulia, "home-city", "Giulia lives in Milan")
        return write_marks(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(type(engine), "_write_marks", corrected_first)
    first = engine.get_context(giulia, QUERY, reader=BOT)
    monkeypatch.undo()
    assert corrected and "Rome" in first.text
    told = engine.get_context(giulia, QUERY, reader=BOT)
    assert [(c.was.content, c.now and c.now.content) for c in told.changed] == [
        ("Giulia lives in Rome", "Giulia lives in Milan")
    ]
    steady = engine.get_context(giulia, QUERY, reader=BOT)
    assert steady.changed == () and "Milan" in steady.text
    assert reused_by_reader(engine, giulia)


def test_a_reader_s_steady_read_of_300_facts_shows_150_and_is_one_statement(
    engine: MemoryEngine, giulia: Identity
) -> None:
    for i in range(300):
        engine.remember(giulia, f"contact-{i}", f"Giulia's contact {i} lives in city {i % 17}")
    first = engine.get_context(giulia, "city 3", reader=BOT, token_budget=4000)
    assert len(first.facts) > 100 and first.omitted
    assert reused_by_reader(engine, giulia, "city 3", token_budget=4000)
    with MemoryEngine(engine.url, clock=Clock(NOON)) as fresh:
        assert fresh.get_context(giulia, "city 3", reader=BOT, token_budget=4000) == first
    # Another engine deletes the reader's marks, then marks a few of the facts again: the read
    # is made, and hands the rest over again.
    with MemoryEngine(engine.url, clock=Clock(NOON)) as other:
        other.delete_reader("acme", BOT)
        other.get_context(giulia, "contact 7", reader=BOT, token_budget=100)
    assert not reused_by_reader(engine, giulia, "city 3", token_budget=4000)
    assert reused_by_reader(engine, giulia, "city 3", token_budget=4000)
