"""Erasure proof: after erase_user, the person's name and words are nowhere.

The person writes distinctive random words in every way the engine keeps text:
facts, corrected and forgotten versions, rejected proposals, memories, facts
read from memories, read marks under readers (one named after them), facts
captured and held for their approval (and another's, captured under a reader
named after them). Then every
column of every table is scanned for their name and words and, on SQLite, the
database file and its write-ahead log, byte by byte.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine, Operation

from .soak import scale, tally


def word(rng: random.Random) -> str:
    return "zq" + "".join(rng.choice(string.ascii_lowercase) for _ in range(14))


def live_their_life(engine: MemoryEngine, rng: random.Random) -> tuple[str, list[str], list[str]]:
    """Write as a person would; returns their name, their words, and the words that must stay."""
    name = f"user-{word(rng)}"
    me = Identity("acme", name, "support")
    other_agent = Identity("acme", name, "sales")
    neighbour = Identity("acme", "marco", "support")
    admin = Identity("acme", "anna", "support")
    engine.grant_admin("acme", "anna")
    engine.grant_admin("acme", name)
    theirs = [word(rng) for _ in range(12)]
    kept = [word(rng) for _ in range(3)]

    engine.remember(me, "home-city", f"Lives in {theirs[0]}")
    engine.get_context(me, reader="bot")
    engine.get_context(me, reader=name)
    engine.correct(me, "home-city", f"Lives in {theirs[1]}")
    engine.remember(other_agent, "plan", f"Uses the {theirs[2]} plan")
    engine.forget(other_agent, "plan")
    rejected = engine.remember(me, "hours", f"Office opens at {theirs[3]}", scope="account")
    engine.reject(admin, rejected.id)
    memory = engine.add_memory(me, f"Said {theirs[4]} and {theirs[5]} in a call")
    engine.remember(me, "pet", f"Has a cat called {theirs[6]}", source_memory_id=memory.id)
    engine.add_memory(other_agent, f"Mentioned {theirs[7]}")
    engine.remember(me, f"k-{theirs[8]}", f"Keeps {theirs[9]}")
    engine.get_context(me, reader="bot")
    # What the account owns stays: a fact they stated and an administrator confirmed.
    shared = engine.remember(
        me, "loyalty", f"The account runs the {kept[0]} program", scope="account"
    )
    engine.confirm(admin, shared.id)
    engine.confirm(
        me, engine.remember(neighbour, "region", f"Region {kept[1]}", scope="account").id
    )
    engine.remember(neighbour, "home-city", f"Lives in {kept[2]}")
    engine.get_context(neighbour, reader=name)
    held = [Operation("record", "pet", f"Has a dog called {theirs[10]}")]
    engine.capture(
        me, [("user", f"My dog {theirs[11]}")], extractor=lambda m, f: held, hold_for_owner=True
    )
    engine.capture(
        neighbour,
        [("user", "I sit by the window")],
        extractor=lambda m, f: [Operation("record", "desk", "Sits by the window")],
        hold_for_owner=True,
        reader=name,
    )
    for _ in range(scale(3, 30)):
        engine.correct(me, "home-city", f"Lives in {theirs[rng.randrange(2)]} {rng.random()}")
    return name, theirs, kept


def rows_naming(engine: MemoryEngine, needles: list[str]) -> list[str]:
    """Every (table, column, needle) where some row's column holds a needle, in any table (a
    partitioned table's partitions too)."""
    found = []
    meta = sa.MetaData()
    meta.reflect(engine.db)
    with engine.db.connect() as conn:
        for table in meta.tables.values():  # in no order: partitions' keys make cycles
            for row in conn.execute(sa.select(table)):
                for column, value in row._mapping.items():
                    text = str(value)
                    found += [f"{table.name}.{column}: {n}" for n in needles if n in text]
    return found


def test_nothing_of_an_erased_user_remains_in_any_table(db_url: str) -> None:
    rng = random.Random()
    with MemoryEngine(db_url) as engine:
        for _ in range(scale(1, 10)):
            name, theirs, kept = live_their_life(engine, rng)
            assert rows_naming(engine, [name, *theirs]) != []
            report = engine.erase_user("acme", name)
            tally("users erased")
            assert report.facts > 0 and report.memories == 2 and report.account_facts_kept == 1
            assert report.pending == 1
            assert rows_naming(engine, [name, *theirs]) == []
            assert len(rows_naming(engine, kept)) >= len(kept)  # the account's facts stay


def test_nothing_of_an_erased_user_remains_in_the_sqlite_file(sqlite_url: str) -> None:
    path = Path(sa.make_url(sqlite_url).database or "")
    rng = random.Random()
    with MemoryEngine(sqlite_url) as engine:
        for _ in range(scale(1, 10)):
            name, theirs, _ = live_their_life(engine, rng)
            engine.erase_user("acme", name)
            tally("users erased")
            files = [p for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
            assert files
            for file in files:
                data = file.read_bytes()
                left = [w for w in [name, *theirs] if w.encode("utf-8") in data]
                assert left == [], f"{file.name} still holds {left}"
