"""Erasure and forgetting: what leaves the database, the files, and the process, and what stays."""

from __future__ import annotations

import datetime as dt
import gc
import operator
import sqlite3
import time
from itertools import compress, repeat
from pathlib import Path

import pytest
import sqlalchemy as sa

from korely_memory import (
    Fact,
    Identity,
    Memory,
    MemoryEngine,
    NotFound,
    Operation,
    PermissionDenied,
)
from korely_memory._db import _database, _migrations
from korely_memory._db._schema import NO_WORDS, SAID, Base, items, vectors
from korely_memory._store import _erasure
from korely_memory._store._vectors import text_hash
from korely_memory._text import _cache
from korely_memory._text._words import fact_text

from .helpers import hold_the_mark_lock

ADMIN = Identity("acme", "anna", "support-copilot")
SECRET = "zqdiabetesword"


def file_bytes(url: str) -> bytes:
    path = Path(sa.make_url(url).database or "")
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


# -- what holds words: the schema says, every erasure follows ---------------------------


def test_every_column_of_text_says_what_it_holds_and_every_erasure_reaches_each_table() -> None:
    assert _erasure.uncovered() == []
    assert set(_erasure.words_columns()) == {
        "korely_facts",
        "korely_fact_terms",
        "korely_memories",
        "korely_memory_terms",
        "korely_notes",
        "korely_items",
        "korely_pending",
        "korely_vectors",
    }


def test_a_column_of_text_that_does_not_say_what_it_holds_is_refused() -> None:
    meta = sa.MetaData()
    for table in Base.metadata.sorted_tables:
        table.to_metadata(meta)
    sa.Table(
        "korely_new",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("note", sa.Text),
    )
    sa.Table(
        "korely_blobs",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("data", sa.JSON),
    )
    assert sorted(_erasure.uncovered(meta)) == [
        f"{column}: a column of text says not what it holds of a person "
        "(info=SAID, LABEL or NO_WORDS)"
        for column in ("korely_blobs.data", "korely_new.note")
    ]


def test_a_table_of_words_that_an_erasure_does_not_reach_is_refused() -> None:
    meta = sa.MetaData()
    for table in Base.metadata.sorted_tables:
        table.to_metadata(meta)
    sa.Table(
        "korely_drafts",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("draft", sa.Text, info=SAID),
        sa.Column("shape", sa.Text, info=NO_WORDS),
    )
    assert _erasure.words_columns(meta)["korely_drafts"] == ["draft"]
    assert _erasure.uncovered(meta) == [
        f"{name}: no step erases korely_drafts, which holds words"
        for name in ("erase", "erase_key", "forget_memory")
    ]


def test_forgetting_a_fact_with_erase_deletes_the_vectors_of_its_words(
    db_url: str, giulia: Identity
) -> None:
    with MemoryEngine(
        db_url, embed=lambda texts: [[1.0, len(t)] for t in texts], embed_model="m"
    ) as engine:
        fact = engine.remember(giulia, "health", f"Giulia has {SECRET}")
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.search(giulia, "health")
        # As a store's search ranks its items: by the fact's words alone.
        engine.items.relevance("health", [fact.content], account="acme")
        assert text_hash(fact.content) in vector_hashes(engine)
        assert len(vector_hashes(engine)) == 3  # of each fact, and of the words alone
        engine.forget(giulia, "health", erase=True)
        rome = engine.get_facts(giulia)[0]
        assert vector_hashes(engine) == {text_hash(fact_text(rome))}


def vector_hashes(engine: MemoryEngine) -> set[str]:
    with engine.db.connect() as conn:
        return set(conn.execute(sa.select(vectors.c.text_hash)).scalars())


# -- forgetting with erase=True --------------------------------------------------------


def test_forget_with_erase_removes_every_version_s_words(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "health", f"Giulia has {SECRET} type 1")
    engine.get_context(giulia, reader="bot")
    engine.correct(giulia, "health", f"Giulia has {SECRET} type 2")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")

    ended = engine.forget(giulia, "health", erase=True)

    assert ended.erased and ended.end_cause == "erased"
    history = engine.history(giulia, "health")
    assert len(history) == 2 and all(v.erased and v.content == "" for v in history)
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]
    everything = engine.get_facts(giulia, include_invalidated=True)
    assert all(SECRET not in f.content for f in everything)
    past = engine.get_facts(giulia, as_of=history[-1].valid_from)
    assert all(SECRET not in f.content for f in past)
    block = engine.get_context(giulia, reader="bot")
    assert SECRET not in block.text
    today = ended.ended_recorded_at.date().isoformat()  # type: ignore[union-attr]
    assert f"- no longer true: a fact that was erased ({today}, erased)" in block.text
    assert engine.get_facts(giulia, reader="bot")[0].content == "Giulia lives in Rome"


def test_no_fact_this_process_keeps_holds_an_erased_word(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "health", f"Giulia has {SECRET} type 1")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, f"{SECRET}?", reader="bot")  # cached for the next read

    engine.forget(giulia, "health", erase=True)
    engine.get_context(giulia, "Rome")
    gc.collect()

    kept = [o for o in gc.get_objects() if isinstance(o, Fact)]
    assert "home-city" in {f.key for f in kept}  # the caches work on
    assert not [f.key for f in kept if SECRET in f.content]


def _strings_of_the_process() -> tuple[list[str], list[object]]:
    """Every string an object of this process holds, directly or through a container the
    collector does not track (a dict or a tuple of strings); and those containers."""
    gc.collect()
    # Millions of objects: each pass runs in C (map, compress).
    refs = gc.get_referents(*gc.get_objects())
    containers = list(compress(refs, map(isinstance, refs, repeat((dict, tuple, frozenset)))))
    untracked = list(compress(containers, map(operator.not_, map(gc.is_tracked, containers))))
    everything = refs + gc.get_referents(*untracked)
    return list(compress(everything, map(isinstance, everything, repeat(str)))), untracked


def held(*words: str) -> list[str]:
    """Those of ``words`` that this process holds (as they are, or inside a longer string);
    the words themselves are not counted."""
    strings, _ = _strings_of_the_process()
    text = "\0".join(strings)
    return [w for w in words if text.count(w) > sum(map(operator.is_, strings, repeat(w)))]


def holds(word: str) -> bool:
    """Whether this process holds ``word``, as ``held`` finds it, looking at the newest objects
    first and stopping at the first that holds it (a full collection leaves the youngest at the
    end of the list): the caches a test just filled are found without reading every object."""
    gc.collect()
    objects = gc.get_objects()
    for end in range(len(objects), 0, -_CHUNK):
        refs = gc.get_referents(*objects[max(end - _CHUNK, 0) : end])
        containers = list(compress(refs, map(isinstance, refs, repeat((dict, tuple, frozenset)))))
        untracked = list(compress(containers, map(operator.not_, map(gc.is_tracked, containers))))
        for found in (refs, gc.get_referents(*untracked)):
            strings = compress(found, map(isinstance, found, repeat(str)))
            if any(word in s and s is not word for s in strings):
                return True
    return False


_CHUNK = 50_000


def holders_of(*words: str) -> list[str]:
    """The kinds of object that hold one of ``words``, for a failure's message."""
    strings, untracked = _strings_of_the_process()
    hits = [s for s in strings if any(w in s and s is not w for w in words)]
    ids = {id(s) for s in hits}
    holding = [c for c in untracked if any(id(x) in ids for x in gc.get_referents(c))]
    mine = (strings, untracked, hits, holding)
    return [
        type(h).__name__ for h in gc.get_referrers(*hits, *holding) if all(h is not m for m in mine)
    ]


@pytest.mark.parametrize("erasing", ["erase_user", "forget"])
def test_no_cache_of_the_process_keeps_an_erased_word(
    engine: MemoryEngine, giulia: Identity, db_url: str, erasing: str
) -> None:
    # Made here, so that no line of this file (which the process keeps) holds the words.
    stored, stemmed = "".join(["ZQ", "MELANOMAS"]), "".join(["zq", "melanoma"])
    engine.remember(giulia, "health", f"Giulia has {stored} in remission")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    release = hold_the_mark_lock(db_url, giulia)
    try:  # this read's marks give way: the versions it handed over are owed to the next read
        assert engine.get_context(giulia, f"{stored}?", reader="bot").gave_way
    finally:
        release()
    engine.get_context(giulia, "Rome", reader="other-bot")
    assert holds(stored)  # the caches work
    assert engine._owed  # and the read that gave way left versions owed to the next

    if erasing == "erase_user":
        engine.erase_user("acme", "giulia")
    else:
        engine.forget(giulia, "health", erase=True)

    assert held(stemmed, stored) == [], holders_of(stemmed, stored)
    if erasing == "erase_user":  # nor anything about the person, for a reader's next read
        owed = [f for kept in engine._owed.values() for f in kept.values()]
        assert [f.owner for f in owed if f.owner == "giulia"] == []


def test_forget_with_erase_leaves_no_word_in_the_sqlite_file(
    sqlite_url: str, giulia: Identity
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        engine.remember(giulia, "health", f"Giulia has {SECRET}")
        engine.get_context(giulia, f"{SECRET}?", reader="bot")
        held = [Operation("replace", "health", f"Giulia has {SECRET} type 2")]
        engine.capture(giulia, [("user", "...")], extractor=lambda m, f: held, hold_for_owner=True)
        assert SECRET.encode() in file_bytes(sqlite_url)
        engine.forget(giulia, "health", erase=True)
        assert SECRET.encode() not in file_bytes(sqlite_url)


def test_a_non_administrator_may_not_erase_an_account_fact(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    proposal = engine.remember(ADMIN, "loyalty", "Acme runs a loyalty program", scope="account")
    engine.confirm(ADMIN, proposal.id)
    with pytest.raises(PermissionDenied):
        engine.forget(giulia, "loyalty", erase=True)
    assert engine.forget(ADMIN, "loyalty", erase=True).erased


# -- erasure: the files ------------------------------------------------------------------


def test_erasure_says_when_a_reader_kept_the_log_from_being_emptied(
    tmp_path: Path, giulia: Identity
) -> None:
    url = f"sqlite:///{tmp_path}/korely.db"
    with MemoryEngine(url, write_wait=0.3) as engine:
        engine.remember(giulia, "health", f"Giulia has {SECRET}")
        backup = sqlite3.connect(tmp_path / "korely.db")
        backup.execute("BEGIN")
        backup.execute("SELECT count(*) FROM korely_facts").fetchall()  # holds a snapshot
        try:
            report = engine.erase_user("acme", "giulia")
            assert report.facts == 1 and not report.scrubbed
        finally:
            backup.rollback()
            backup.close()
        assert engine.scrub()
        assert SECRET.encode() not in file_bytes(url)


def test_erasure_empties_the_log_at_once_when_nobody_holds_it(
    sqlite_url: str, giulia: Identity
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        engine.remember(giulia, "health", f"Giulia has {SECRET}")
        assert engine.erase_user("acme", "giulia").scrubbed
        assert SECRET.encode() not in file_bytes(sqlite_url)


def test_postgresql_erasure_is_logical_until_scrubbed(
    postgresql_url: str, giulia: Identity
) -> None:
    """Deleted rows stay in heap and index pages until VACUUM FULL rewrites the tables."""
    with MemoryEngine(postgresql_url) as engine:
        engine.remember(giulia, "health", f"Giulia has {SECRET}")
        engine.add_memory(giulia, f"Giulia spoke of {SECRET}")
        held = [Operation("record", "diet", f"Giulia avoids {SECRET}")]
        engine.capture(giulia, [("user", "...")], extractor=lambda m, f: held, hold_for_owner=True)
        with engine.db.connect() as conn:
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
            conn.commit()
        report = engine.erase_user("acme", "giulia")
        assert not report.scrubbed and report.pending == 1
        assert pages_holding(engine, SECRET) != []  # dead tuples: logical erasure only
        with engine.db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM korely_facts")
        assert pages_holding(engine, SECRET) != []  # a plain VACUUM leaves the bytes
        # Another session's older transaction (a test beside this one) may keep the rows copied:
        # scrub then says so, and a later one, once it ended, removes them.
        deadline = time.monotonic() + 60
        while not engine.scrub():
            assert time.monotonic() < deadline, "an older transaction outlasted every scrub"
        assert pages_holding(engine, SECRET) == []


def test_postgresql_scrub_says_false_while_an_older_transaction_may_see_the_rows(
    postgresql_url: str, giulia: Identity
) -> None:
    with MemoryEngine(postgresql_url, write_wait=0.2) as engine:
        engine.remember(giulia, "health", f"Giulia has {SECRET}")
        snapshot = engine.db.connect().execution_options(isolation_level="REPEATABLE READ")
        with snapshot as reader:
            reader.exec_driver_sql("SELECT 1").all()  # a snapshot, no lock VACUUM waits for
            engine.erase_user("acme", "giulia")
            assert not engine.scrub()
        deadline = time.monotonic() + 60
        while not engine.scrub():
            assert time.monotonic() < deadline


def test_postgresql_scrub_says_false_while_an_older_transaction_runs_between_statements(
    postgresql_url: str, giulia: Identity
) -> None:
    """A transaction that wrote and waits between statements holds no snapshot, but VACUUM keeps
    every row deleted after it began: scrub may not say the bytes are gone."""
    with MemoryEngine(postgresql_url, write_wait=0.2) as engine:
        engine.remember(giulia, "health", f"Giulia has {SECRET}")
        with engine.db.connect() as conn:
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
            conn.commit()
        other = sa.create_engine(postgresql_url)  # another program's session: READ COMMITTED
        try:
            with other.connect() as older:
                older.exec_driver_sql("SELECT txid_current()").scalar()  # a number, then idle
                engine.erase_user("acme", "giulia")
                assert not engine.scrub()
                assert pages_holding(engine, SECRET) != []
        finally:
            other.dispose()
        deadline = time.monotonic() + 60
        while not engine.scrub():
            assert time.monotonic() < deadline
        assert pages_holding(engine, SECRET) == []


GUEST = "korely_scrub_guest"
# A role of the server, left for later runs (tests beside this one may be using it).
CREATE_GUEST = (
    f"DO $$ BEGIN CREATE ROLE {GUEST}; "
    "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
)


@pytest.mark.parametrize("owner", [False, True], ids=["not-the-owner", "the-owner"])
def test_postgresql_scrub_says_false_for_what_its_role_may_not_rewrite_or_see(
    postgresql_url: str, giulia: Identity, owner: bool
) -> None:
    """VACUUM skips a table its role does not own, with only a warning; a role without
    pg_read_all_stats sees no other role's snapshot. Neither may let scrub say True."""
    tables = list(Base.metadata.sorted_tables)
    with MemoryEngine(postgresql_url) as engine:
        engine.remember(giulia, "health", f"Giulia has {SECRET}")
        engine.erase_user("acme", "giulia")
        with engine.db.connect() as conn:
            schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
            conn.exec_driver_sql(CREATE_GUEST)
            conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO {GUEST}')
            for table in tables if owner else []:
                conn.exec_driver_sql(f'ALTER TABLE "{table.name}" OWNER TO {GUEST}')
            conn.commit()
        guest = sa.create_engine(postgresql_url, isolation_level="AUTOCOMMIT")
        sa.event.listen(guest, "connect", lambda dbapi, _: dbapi.execute(f"SET ROLE {GUEST}"))
        try:
            # The engine's own idle connection is another role's session to the guest.
            assert _database.scrub(guest, guest.url, tables, wait=0.2) is False
        finally:
            guest.dispose()
            with engine.db.connect() as conn:
                for table in tables if owner else []:
                    conn.exec_driver_sql(f'ALTER TABLE "{table.name}" OWNER TO CURRENT_USER')
                conn.exec_driver_sql(f'REVOKE USAGE ON SCHEMA "{schema}" FROM {GUEST}')
                conn.commit()
        # Its own role owns the tables and sees every session: True once no transaction of
        # another test older than its mark is still running.
        deadline = time.monotonic() + 60
        while not engine.scrub():
            assert time.monotonic() < deadline


def pages_holding(engine: MemoryEngine, needle: str) -> list[str]:
    """Every relation of the memory (table or index, or partition of one: ``korely db create
    --partitions``) with a page whose raw bytes hold ``needle``; the test's schema holds nothing
    else."""
    found = []
    with engine.db.connect() as conn:
        relations = conn.execute(
            sa.text(
                "SELECT c.relname, c.relpages FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i')"
            )
        ).all()
        for relation, _ in relations:
            blocks = conn.execute(
                sa.text("SELECT pg_relation_size(:r) / current_setting('block_size')::int"),
                {"r": relation},
            ).scalar_one()
            for block in range(blocks):
                page = conn.execute(
                    sa.text("SELECT public.get_raw_page(:r, :b)"), {"r": relation, "b": block}
                ).scalar_one()
                if needle.encode() in bytes(page):
                    found.append(f"{relation}:{block}")
    return found


# -- forgetting a memory --------------------------------------------------------------


def test_forgetting_a_memory_deletes_the_item_whose_words_were_read_from_it(
    engine: MemoryEngine, giulia: Identity
) -> None:
    fact = engine.items.put(
        giulia, ("memories", "giulia"), "trip", {"text": "Goes to Paris"}, text="Goes to Paris"
    )
    said = engine.capture(
        giulia,
        [("user", f"I go to {SECRET} instead")],
        extractor=lambda m, f: [Operation("replace", fact.key, f"Goes to {SECRET}")],
    )
    assert said.memory is not None
    assert SECRET in str(engine.items.get("acme", giulia.agent, [(("memories", "giulia"), "trip")]))
    engine.forget_memory(giulia, said.memory.id)
    with engine.db.connect() as conn:
        assert conn.execute(sa.select(items)).all() == []


def test_forgetting_a_memory_leaves_the_item_a_later_version_not_read_from_it_holds(
    engine: MemoryEngine, giulia: Identity
) -> None:
    namespace = ("memories", "giulia")
    fact = engine.items.put(
        giulia, namespace, "trip", {"text": "Goes to Paris"}, text="Goes to Paris"
    )
    said = engine.capture(
        giulia,
        [("user", f"I go to {SECRET} instead")],
        extractor=lambda m, f: [Operation("replace", fact.key, f"Goes to {SECRET}")],
    )
    assert said.memory is not None
    engine.items.put(giulia, namespace, "trip", {"text": "Goes to Berlin"}, text="Goes to Berlin")
    engine.forget_memory(giulia, said.memory.id)
    (item,) = engine.items.get("acme", giulia.agent, [(namespace, "trip")])
    assert item is not None and item.value == {"text": "Goes to Berlin"}
    assert [f.content for f in engine.get_facts(giulia)] == ["Goes to Berlin"]


def test_forgetting_a_memory_leaves_confirmed_account_facts_standing(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    memory = engine.add_memory(giulia, "Giulia said the account runs a loyalty program")
    proposal = engine.remember(
        giulia,
        "loyalty",
        "Acme runs a loyalty program",
        scope="account",
        source_memory_id=memory.id,
    )
    engine.confirm(ADMIN, proposal.id)
    engine.remember(giulia, "pet", "Giulia has a cat", source_memory_id=memory.id)

    engine.forget_memory(giulia, memory.id)

    (loyalty,) = [f for f in engine.get_facts(ADMIN) if f.key == "loyalty"]
    assert loyalty.content == "Acme runs a loyalty program" and loyalty.is_current
    assert loyalty.source_memory_id is None
    assert [f.key for f in engine.get_facts(giulia)] == ["loyalty"]  # the cat went with it


# -- ids are never reused ------------------------------------------------------------


def test_ids_are_never_reused(engine: MemoryEngine, giulia: Identity) -> None:
    first = engine.add_memory(giulia, "a note")
    engine.forget_memory(giulia, first.id)
    assert engine.add_memory(giulia, "another note").id > first.id

    engine.grant_admin("acme", "anna")
    proposal = engine.remember(giulia, "hours", "Open 9-17", scope="account")
    engine.erase_user("acme", "giulia")
    marco = Identity("acme", "marco", "support-copilot")
    newer = engine.remember(marco, "hours", "Open 8-18", scope="account")
    assert newer.id > proposal.id
    with pytest.raises(NotFound):  # the erased person's proposal is gone, not another's
        engine.confirm(ADMIN, proposal.id)


# -- caches ----------------------------------------------------------------------------


def test_caches_stay_within_their_bytes_with_long_memories(sqlite_url: str) -> None:
    with MemoryEngine(sqlite_url) as engine:
        for round_ in range(60):
            who = Identity("acme", f"user-{round_}", "support")
            for i in range(5):
                engine.add_memory(who, f"round {round_} note {i} " + f"word{round_}x{i} " * 1200)
            engine.get_context(who, f"note word{round_}x1", token_budget=8000)
        caches = list(_cache._ALL)
        assert caches and all(c.bytes <= c.max_bytes for c in caches)
        assert sum(c.bytes for c in caches) <= sum(c.max_bytes for c in caches)
        engine.erase_user("acme", "user-1")
        assert all(len(c) == 0 for c in caches)


# -- time ------------------------------------------------------------------------------


def test_a_clock_that_steps_back_never_reorders_history(db_url: str, giulia: Identity) -> None:
    moments = iter(
        [
            dt.datetime(2026, 11, 10, 12, tzinfo=dt.timezone.utc),
            dt.datetime(2026, 11, 10, 11, tzinfo=dt.timezone.utc),  # the clock stepped back
            dt.datetime(2026, 11, 10, 10, tzinfo=dt.timezone.utc),
        ]
    )
    with MemoryEngine(db_url, clock=lambda: next(moments)) as engine:
        rome = engine.remember(giulia, "home-city", "Giulia lives in Rome")
        milan = engine.correct(giulia, "home-city", "Giulia lives in Milan")
        ended = engine.forget(giulia, "home-city")
    history = [
        (v.content, v.recorded_at, v.ended_recorded_at) for v in engine_history(db_url, giulia)
    ]
    assert [h[0] for h in history] == ["Giulia lives in Rome", "Giulia lives in Milan"]
    for _, recorded, ended_at in history:
        assert ended_at is not None and ended_at >= recorded
    assert milan.recorded_at >= rome.recorded_at and ended.id == milan.id
    with MemoryEngine(db_url) as engine:
        for moment in (rome.recorded_at, milan.recorded_at):
            known = engine.get_facts(giulia, known_as_of=moment)
            assert len(known) <= 1


def engine_history(url: str, giulia: Identity) -> list[object]:
    with MemoryEngine(url) as engine:
        return engine.history(giulia, "home-city")  # type: ignore[return-value]


# -- erasing a fact erases the conversation excerpts that hold its words ------------------


def health(messages: object, facts: object) -> list[Operation]:
    """An extractor that reads a health condition from what the user said."""
    said = " ".join(text for _, text in messages)  # type: ignore[attr-defined]
    if "diabetes" in said and "forget" not in said:
        return [Operation("record", "health", f"Giulia has type 1 diabetes {SECRET}")]
    return []


def test_erasing_a_fact_erases_the_excerpts_that_hold_its_words(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.capture(
        giulia,
        [("user", f"I have type 1 diabetes {SECRET}"), ("assistant", "ok")],
        extractor=health,
    )
    engine.capture(
        giulia,
        [("user", "I live in Rome, and my type 1 diabetes is fine"), ("assistant", "Good.")],
        extractor=lambda m, f: [Operation("record", "home-city", "Giulia lives in Rome")],
    )
    engine.add_memory(giulia, f"user: the {SECRET} type 1 diabetes check is on Monday")
    engine.add_memory(giulia, "user: my mother has diabetes")  # another fact's words
    engine.add_memory(giulia, "user: I plan to visit Rome")
    # Four say it; the last answers "my mother has diabetes" and is found by its words too.
    assert len(engine.search(giulia, "diabetes").memories) == 5

    engine.forget(giulia, "health", erase=True)

    left = [m.content for m in engine.export_user("acme", "giulia").memories]
    assert left == ["user: my mother has diabetes", "user: I plan to visit Rome"]
    assert [m.content for m in engine.search(giulia, "type 1 diabetes").memories] == left
    # The memory that answered an erased one no longer holds its words.
    assert engine.search(giulia, "check Monday").memories == ()
    block = engine.get_context(giulia, "diabetes")
    assert SECRET not in block.text and "type 1" not in block.text
    home = engine.get_facts(giulia)[0]  # read from an excerpt that is gone: still true
    assert home.content == "Giulia lives in Rome" and home.source_memory_id is None
    assert engine.search(Identity("acme", "giulia", "sales"), "diabetes").memories == ()


def test_an_erasure_that_fails_leaves_the_excerpts_in_place(
    engine: MemoryEngine, giulia: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.capture(giulia, [("user", f"I have type 1 diabetes {SECRET}")], extractor=health)

    def broken(*args: object) -> int:
        raise RuntimeError("the disk went away")

    # The last step: the excerpts, the versions' words and the rest went before it.
    monkeypatch.setattr(_erasure, "forget_vectors", broken)
    with pytest.raises(RuntimeError):
        engine.forget(giulia, "health", erase=True)
    assert len(engine.search(giulia, "diabetes").memories) == 1
    assert engine.get_facts(giulia)[0].key == "health"  # one transaction: nothing happened


def test_no_word_of_an_erased_excerpt_stays_in_the_sqlite_file(
    sqlite_url: str, giulia: Identity
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        engine.capture(giulia, [("user", f"I have type 1 diabetes {SECRET}")], extractor=health)
        engine.get_context(giulia, "diabetes")  # its line cached for the next read
        assert SECRET.encode() in file_bytes(sqlite_url)
        engine.forget(giulia, "health", erase=True)
        assert SECRET.encode() not in file_bytes(sqlite_url)
        engine.get_context(giulia, "diabetes")
        gc.collect()
        kept = [o for o in gc.get_objects() if isinstance(o, Memory)]
        assert not [m.id for m in kept if SECRET in m.content]


@pytest.mark.new_database
def test_postgresql_scrub_needs_to_own_every_partition_of_a_table(postgresql_url: str) -> None:
    """On tables partitioned by account (``korely db create --partitions``), VACUUM FULL of a
    table rewrites its partitions, and skips, with only a warning, one its role does not own."""
    made = _database.create(_database.resolve_url(postgresql_url))
    with _migrations.schema_transaction(made) as conn:
        _migrations.create_partitioned(conn, 4)
    tables = list(Base.metadata.sorted_tables)
    try:
        with made.connect() as conn:
            conn.exec_driver_sql(CREATE_GUEST)
            schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
            owned = [t.name for t in tables] + [f"{t.name}_p{i}" for t in tables for i in range(4)]
            for name in owned:
                if conn.exec_driver_sql("SELECT to_regclass(%s)", (name,)).scalar() is not None:
                    conn.exec_driver_sql(f'ALTER TABLE "{name}" OWNER TO {GUEST}')
            conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO {GUEST}')
            conn.exec_driver_sql(f"SET ROLE {GUEST}")
            assert _database._rewritable(conn, tables) is True
            conn.exec_driver_sql("RESET ROLE")
            conn.exec_driver_sql("ALTER TABLE korely_facts_p2 OWNER TO CURRENT_USER")
            conn.exec_driver_sql(f"SET ROLE {GUEST}")
            assert _database._rewritable(conn, tables) is False
            conn.exec_driver_sql("RESET ROLE")
            conn.exec_driver_sql(f'REVOKE USAGE ON SCHEMA "{schema}" FROM {GUEST}')
            conn.rollback()
    finally:
        made.dispose()
