"""Schema revisions: what they build is what the models declare, upgrades keep every row, and an
engine opens only a database whose schema it works with."""

from __future__ import annotations

import datetime as dt
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Connection, Engine

from korely_memory import Identity, MemoryEngine, Operation, Scope
from korely_memory._db._database import create, resolve_url
from korely_memory._db._migrations import (
    HEAD,
    REVISIONS,
    VERSION_TABLE,
    SchemaVersionError,
    _alembic,
    prepare,
    schema_transaction,
    state,
)
from korely_memory._db._schema import Base
from korely_memory._store._vectors import text_hash

from .helpers import statements

# Each test starts from a database with nothing in it: these test how tables are made.
pytestmark = pytest.mark.new_database

MARCO = Identity("acme", "marco", "support-copilot")


@pytest.fixture
def db(db_url: str) -> Iterator[Engine]:
    """The test database, with no memory opened on it yet."""
    engine = create(resolve_url(db_url))
    yield engine
    engine.dispose()


def migrate(db: Engine, target: str) -> None:
    with schema_transaction(db) as conn:
        _alembic.upgrade(conn, target)


def record(db: Engine, revision: str) -> None:
    with db.begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = :r"), {"r": revision})


def fill(url: str, giulia: Identity) -> None:
    """What an application writes: facts and their versions, a proposal, account facts, a
    forgotten fact, memories, read marks with changes waiting, administrators, an erasure."""
    with MemoryEngine(url, auto_upgrade=False) as engine:
        engine.grant_admin("acme", "anna")
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.remember(giulia, "diet", "Giulia is vegetarian")
        engine.get_context(giulia, "Where does Giulia live?", reader="bot")
        engine.correct(giulia, "home-city", "Giulia lives in Milan")
        engine.forget(giulia, "diet", erase=True)
        engine.remember(giulia, "office", "Acme's office is in Turin", scope=Scope.ACCOUNT)
        engine.remember(MARCO, "hours", "Acme opens at nine", scope=Scope.ACCOUNT)
        engine.confirm(Identity("acme", "anna", "support-copilot"), engine.proposals("acme")[-1].id)
        memory = engine.add_memory(giulia, "Giulia asked about her order of running shoes")
        engine.remember(giulia, "shoe-size", "Giulia wears 38", source_memory_id=memory.id)
        engine.add_memory(MARCO, "Marco asked for an invoice")
        engine.erase_user("acme", "someone-else")


def rows_of(db: Engine) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of the memory, in primary-key order; but the versions of what
    blocks show, numbers drawn anew by each write (any number a process has not seen will do)."""
    with db.connect() as conn:
        return {
            t.name: [
                tuple(None if c.name == "version" else v for c, v in zip(t.c, r, strict=True))
                for r in conn.execute(sa.select(t).order_by(*t.primary_key))
            ]
            for t in Base.metadata.sorted_tables
        }


def schema_of(conn: Connection) -> list[tuple[object, ...]]:
    """The memory's tables as the database describes them: columns, keys, indexes and their
    predicates, AUTOINCREMENT."""
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE tbl_name LIKE 'korely%' ORDER BY type, name"
        )
        return [(kind, name, table, _declared(sql)) for kind, name, table, sql in rows]
    # PostgreSQL adds a column after the others, wherever the models declare it: the order of
    # columns matters only on SQLite (what precedes a long text is read without its overflow
    # pages), where a revision copies the table to put the column in its place.
    queries = [
        "SELECT table_name, column_name, data_type, character_maximum_length,"
        " is_nullable, column_default FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, column_name",
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = current_schema()::regnamespace ORDER BY 1, 2",
        "SELECT tablename, indexname, indexdef FROM pg_indexes"
        " WHERE schemaname = current_schema() ORDER BY 1, 2",
    ]
    return [tuple(r) for q in queries for r in conn.exec_driver_sql(q)]


def _declared(sql: str | None) -> object:
    """A table as SQLite keeps its declaration, less what a copy in batch mode changes and
    nothing means: the name quoted, the table constraints in another order."""
    if sql is None or not sql.startswith("CREATE TABLE"):
        return sql
    head, *lines = sql.replace('CREATE TABLE "', "CREATE TABLE ", 1).splitlines()
    head = head.replace('" (', " (", 1)
    items = [line.rstrip(", ") for line in lines]
    columns = [i for i in items if not i.lstrip().startswith("CONSTRAINT")]
    return (head, columns, sorted(i for i in items if i.lstrip().startswith("CONSTRAINT")))


def drop_everything(db: Engine) -> None:
    with db.begin() as conn:
        Base.metadata.drop_all(conn)
        conn.exec_driver_sql(f"DROP TABLE {VERSION_TABLE}")


# -- the revisions and the models --------------------------------------------------------


def test_the_revisions_listed_are_alembic_s_chain() -> None:
    assert _alembic.revisions() == list(REVISIONS)
    assert REVISIONS[-1] == HEAD


def test_the_revisions_build_what_the_models_declare(db: Engine) -> None:
    migrate(db, HEAD)
    with db.connect() as conn:
        assert _alembic.differences(conn) == []
        assert state(conn) == HEAD


def test_the_comparison_sees_a_revision_missing(db: Engine) -> None:
    """The check above could fail: at each earlier revision, what the later ones add is missing."""
    adds = {
        "0002": [("add_index", "ix_korely_memories_owner_only")],
        "0003": [("add_column", "valid_until"), ("add_index", "ix_korely_facts_expiring")],
        "0004": [
            ("add_index", "ix_korely_notes_created"),
            ("add_index", "ix_korely_notes_owner_only"),
            ("add_table", "korely_notes"),
        ],
        "0005": [
            ("add_index", "ix_korely_items_expires"),
            ("add_index", "ix_korely_items_owner_only"),
            ("add_index", "ix_korely_items_recent"),
            ("add_index", "uq_korely_items_fact"),
            ("add_table", "korely_items"),
        ],
        "0006": [
            ("add_column", "replies_to"),
            ("add_fk", "fk_korely_memories_replies_to_korely_memories"),
            ("add_index", "ix_korely_memories_replies_to"),
        ],
        "0007": [
            ("add_column", "expiring"),
            ("add_column", "tf"),
            ("add_column", "version"),
            ("add_column", "words"),
            ("add_column", "words"),
        ],
        "0008": [
            ("add_column", "account"),  # korely_vectors
            *((change, fk) for fk in _WIDENED for change in ("add_fk", "remove_fk")),
            ("add_index", "ix_korely_vectors_text"),
            ("remove_index", "ix_korely_vectors_text"),
            *(
                [("add_index", f"uq_{t}_id_account") for t in ("korely_facts", "korely_memories")]
                if db.dialect.name == "sqlite"
                else []
            ),
        ],
        "0009": [
            ("add_index", "ix_korely_pending_owner"),
            ("add_index", "ix_korely_pending_owner_only"),
            ("add_table", "korely_pending"),
        ],
        "0010": [("add_column", "drawn_against")],
    }
    assert sorted(adds) == list(REVISIONS[1:])
    for at, revision in enumerate(REVISIONS[:-1]):
        # From the revision before: the one step more that a migration from nothing would run
        # after the same steps (dropping the tables to start again ran them all again).
        migrate(db, revision)
        with db.connect() as conn:
            found = sorted((d[0], d[-1].name) for d in _alembic.differences(conn))
        expected = [a for later in REVISIONS[at + 1 :] for a in adds[later]]
        if revision < "0006":  # the key 0008 widens is not there yet: 0006 adds it
            replies = "fk_korely_memories_replies_to_korely_memories"
            expected.remove(("add_fk", replies))
            expected.remove(("remove_fk", replies))
        if revision < "0009":  # the table 0010 adds a column to is not there yet: 0009 adds it
            expected.remove(("add_column", "drawn_against"))
        assert found == sorted(expected), revision


_WIDENED = [
    "fk_korely_fact_terms_fact_id_korely_facts",
    "fk_korely_facts_replaced_by_id_korely_facts",
    "fk_korely_facts_source_memory_id_korely_memories",
    "fk_korely_marks_fact_id_korely_facts",
    "fk_korely_memories_replies_to_korely_memories",
    "fk_korely_memory_terms_memory_id_korely_memories",
]


def test_every_key_and_link_between_tables_holds_the_account(db: Engine) -> None:
    """What a database distributed by account requires (the comparison above sees no primary
    key): each table's key holds ``account`` (on SQLite, the rowid ``id`` with a unique index on
    ``(id, account)``), and so does every foreign key, none of which sets a key column NULL."""
    migrate(db, HEAD)
    with db.connect() as conn:
        found = sa.inspect(conn)
        tables = [t for t in found.get_table_names() if t.startswith("korely_")]
        keys = {t: found.get_pk_constraint(t)["constrained_columns"] for t in tables}
        links = [fk for t in tables for fk in found.get_foreign_keys(t)]
        unique = {i["name"] for t in tables for i in found.get_indexes(t) if i["unique"]}
    assert sorted(fk["name"] for fk in links) == _WIDENED
    for fk in links:
        assert "account" in fk["constrained_columns"] and "account" in fk["referred_columns"]
        assert fk["options"].get("ondelete") in (None, "CASCADE"), fk
    shared = {"korely_settings", "korely_alembic_version"}
    if db.dialect.name == "sqlite":
        assert {"uq_korely_facts_id_account", "uq_korely_memories_id_account"} <= unique
        numbered = {"korely_facts", "korely_memories", "korely_erasures", "korely_pending"}
        assert all(keys[t] == ["id"] for t in numbered)
        shared |= numbered
    assert all("account" in key for t, key in keys.items() if t not in shared), keys
    for numbered_by_account in ("korely_facts", "korely_pending"):
        assert keys.get(numbered_by_account) == ["account", "id"] or db.dialect.name == "sqlite"


def test_a_new_database_is_the_schema_the_revisions_build(db_url: str, db: Engine) -> None:
    """The engine creates a new database from the models; the revisions must build the same
    tables, down to partial-index predicates and SQLite's AUTOINCREMENT."""
    MemoryEngine(db_url).close()
    with db.connect() as conn:
        created = schema_of(conn)
    drop_everything(db)
    migrate(db, HEAD)
    with db.connect() as conn:
        migrated = schema_of(conn)
    assert migrated == created
    assert any("WHERE" in str(row).upper() for row in created)


# -- upgrading -------------------------------------------------------------------------


def test_an_upgrade_across_a_revision_keeps_every_row(
    db_url: str, db: Engine, giulia: Identity
) -> None:
    # What the engine writes, taken back to the baseline by the revisions' own downgrades.
    fill(db_url, giulia)
    before = rows_of(db)
    assert sum(len(rows) for rows in before.values()) > 30
    with schema_transaction(db) as conn:
        command.downgrade(_alembic.config(conn), "0001")
        assert state(conn) == "0001"

    with pytest.raises(SchemaVersionError, match="korely db upgrade") as refused:
        MemoryEngine(db_url, auto_upgrade=False)
    assert refused.value.found == "0001" and refused.value.code == "schema_version"

    with MemoryEngine(db_url, auto_upgrade=True) as engine:
        assert rows_of(db) == before
        home = engine.history(giulia, "home-city")
        assert [v.content for v in home] == ["Giulia lives in Rome", "Giulia lives in Milan"]
        block = engine.get_context(giulia, "Where does Giulia live?", reader="bot")
        assert "Giulia lives in Rome -> now: Giulia lives in Milan" in block.text
        assert "Acme opens at nine" in block.text
        assert engine.export_user("acme", "giulia").memories
    with db.connect() as conn:
        assert state(conn) == HEAD
        assert _alembic.differences(conn) == []
        indexes = {i["name"] for i in sa.inspect(conn).get_indexes("korely_memories")}
    assert "ix_korely_memories_owner_only" in indexes


def test_revision_0007_counts_the_words_and_expiring_facts_an_engine_counts(
    db_url: str, db: Engine, giulia: Identity
) -> None:
    """Facts with repeated words, that expire, of the account and proposed: counted again by
    the revision as the engine counted them when it wrote them."""
    fill(db_url, giulia)
    later = dt.datetime(2999, 1, 1, tzinfo=dt.timezone.utc)
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "trip", "Giulia is in Paris, Paris again", valid_until=later)
        engine.remember(
            MARCO, "fair", "Acme is at the fair", scope=Scope.ACCOUNT, valid_until=later
        )
        engine.confirm(Identity("acme", "anna", "support-copilot"), engine.proposals("acme")[-1].id)
        engine.remember(MARCO, "desk", "Marco's desk, the desk by the door", scope=Scope.ACCOUNT)
    before = rows_of(db)
    expiring = {r[2]: r[-1] for r in before["korely_fact_counts"]}
    assert expiring == {"/account": 1, "giulia": 1, "marco": 0}
    assert max(r[-1] for r in before["korely_fact_terms"]) == 3  # "desk", said three times
    with schema_transaction(db) as conn:
        command.downgrade(_alembic.config(conn), "0006")
    with MemoryEngine(db_url, auto_upgrade=True) as engine:
        assert rows_of(db) == before
        assert engine.search(giulia, "Paris").facts[0].key == "trip"


def test_revision_0008_numbers_on_from_where_the_database_was(
    db_url: str, db: Engine, giulia: Identity
) -> None:
    """SQLite copies the tables whose keys change: a fact or memory recorded after the upgrade
    takes no id of one deleted before it (a kept id read before a delete never names another)."""
    someone = Identity("acme", "someone", "support-copilot")
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.add_memory(giulia, "Giulia asked about trams")
        last_fact = engine.remember(someone, "home-city", "Someone lives in Turin").id
        last_memory = engine.add_memory(someone, "Someone asked about trains").id
        engine.erase_user("acme", "someone")  # the highest ids go
    with schema_transaction(db) as conn:  # and the tables are copied back and forth
        command.downgrade(_alembic.config(conn), "0007")
    with MemoryEngine(db_url, auto_upgrade=True) as engine:
        assert engine.remember(giulia, "diet", "Giulia is vegan").id > last_fact
        assert engine.add_memory(giulia, "Giulia asked about buses").id > last_memory
        assert [f.key for f in engine.get_facts(giulia)] == ["diet", "home-city"]


class _Toy:
    """An embedder of two dimensions: enough for vectors to be kept."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [float(len(text)), 1.0]


def test_revision_0008_keeps_each_vector_under_the_accounts_that_hold_its_text(
    db_url: str, db: Engine
) -> None:
    """Vectors were shared by every account with the same text: each goes to the accounts that
    hold its text, a fact's or a memory's, and one whose text nobody holds any more goes."""
    acme, globex = Identity("acme", "giulia", "bot"), Identity("globex", "bob", "bot")
    with MemoryEngine(db_url, embed=_Toy(), embed_model="toy") as engine:
        for who in (acme, globex):
            engine.remember(who, "home-city", "Lives in Rome")
        engine.remember(acme, "diet", "Giulia is vegan")
        engine.add_memory(globex, "Bob asked about trains")
        for who in (acme, globex):
            engine.search(who, "Rome vegan trains")
        with engine.db.connect() as conn:
            before = {tuple(r) for r in conn.exec_driver_sql(VECTORS)}
    home = text_hash("home city Lives in Rome")
    assert {("acme", home), ("globex", home), ("acme", text_hash("diet Giulia is vegan"))} <= before
    with schema_transaction(db) as conn:
        command.downgrade(_alembic.config(conn), "0007")
        shared = conn.exec_driver_sql("SELECT text_hash FROM korely_vectors").scalars().all()
        conn.execute(
            sa.text("INSERT INTO korely_vectors VALUES ('toy', :h, :v)"),
            {"h": text_hash("a text nobody holds"), "v": b"\0" * 16},
        )
    assert sorted(shared) == sorted({h for _, h in before})  # home-city's once, for both
    with MemoryEngine(db_url, auto_upgrade=True) as engine, engine.db.connect() as conn:
        assert {tuple(r) for r in conn.exec_driver_sql(VECTORS)} == before


VECTORS = "SELECT account, text_hash FROM korely_vectors"


def test_revision_0010_draws_each_held_change_against_what_its_key_holds(
    db_url: str, db: Engine, giulia: Identity
) -> None:
    """A change held before 0010 is drawn against the person's true version under its key (a
    ``remember``: against nothing), as a capture now draws it."""
    drawn = [
        Operation("replace", "home-city", "Giulia lives in Milan"),
        Operation("record", "pet", "Giulia has a cat"),
    ]
    with MemoryEngine(db_url) as engine:
        rome = engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.remember(MARCO, "home-city", "Marco lives in Turin")
        excerpt = [("user", "I moved to Milan and have a cat.")]
        engine.capture(giulia, excerpt, extractor=lambda m, f: drawn, hold_for_owner=True)
        captured = {p.key: p.drawn_against for p in engine.pending(giulia)}
    assert captured == {"home-city": rome.id, "pet": None}
    with schema_transaction(db) as conn:
        command.downgrade(_alembic.config(conn), "0009")
    with MemoryEngine(db_url, auto_upgrade=True) as engine:
        assert {p.key: p.drawn_against for p in engine.pending(giulia)} == captured


def test_an_older_database_is_upgraded_at_start_on_sqlite_only_by_default(
    db_url: str, db: Engine
) -> None:
    migrate(db, "0001")
    if db.dialect.name == "sqlite":
        MemoryEngine(db_url).close()
        with db.connect() as conn:
            assert state(conn) == HEAD
    else:
        with pytest.raises(SchemaVersionError, match="run `korely db upgrade`"):
            MemoryEngine(db_url)
        with db.connect() as conn:
            assert state(conn) == "0001"


def test_a_newer_database_is_refused(db_url: str, db: Engine) -> None:
    MemoryEngine(db_url).close()
    record(db, "0999")
    for upgrading in (True, False):
        with pytest.raises(SchemaVersionError, match="newer korely-memory") as refused:
            MemoryEngine(db_url, auto_upgrade=upgrading)
        assert refused.value.found == "0999"
    with db.connect() as conn:
        assert state(conn) == "0999"


def test_tables_without_a_revision_are_refused_until_stamped(db_url: str, db: Engine) -> None:
    with db.begin() as conn:
        Base.metadata.create_all(conn)
    with pytest.raises(SchemaVersionError, match="korely db stamp") as refused:
        MemoryEngine(db_url, auto_upgrade=True)
    assert refused.value.found == "unversioned"
    with schema_transaction(db) as conn:
        _alembic.stamp(conn, HEAD)
    MemoryEngine(db_url).close()


def test_an_application_s_own_tables_do_not_make_a_database_unversioned(
    db_url: str, db: Engine, giulia: Identity
) -> None:
    with db.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32))")
        conn.exec_driver_sql("INSERT INTO alembic_version VALUES ('app-head')")
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
    with db.connect() as conn:
        assert state(conn) == HEAD
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == (
            "app-head"
        )


def test_auto_upgrade_must_be_a_bool(db_url: str) -> None:
    with pytest.raises(ValueError, match="auto_upgrade"):
        MemoryEngine(db_url, auto_upgrade="yes")  # type: ignore[arg-type]


# -- at start ------------------------------------------------------------------------


def test_a_start_on_a_current_database_is_one_query(db_url: str, db: Engine) -> None:
    MemoryEngine(db_url).close()
    with statements(db) as sent:
        prepare(db, auto_upgrade=False)
    framing = ("BEGIN", "COMMIT", "ROLLBACK", "SET")
    said = [s for s in sent if not s.lstrip().upper().startswith(framing)]
    assert len(said) == 1 and VERSION_TABLE in said[0]


def test_many_engines_starting_at_once_create_the_schema_once(
    db_url: str, db: Engine, giulia: Identity
) -> None:
    started = threading.Barrier(6)
    failures: list[BaseException] = []

    def start() -> None:
        try:
            started.wait()
            with MemoryEngine(db_url) as engine:
                engine.remember(giulia, "home-city", "Giulia lives in Rome")
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    with db.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").all() == [(HEAD,)]


# -- SQLite batch mode -----------------------------------------------------------------------

BATCH_REVISION = """
import sqlalchemy as sa
from alembic import op


revision = "{after}"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table(
        "korely_facts", recreate="always", table_kwargs={{"sqlite_autoincrement": True}}
    ) as batch:
        batch.add_column(sa.Column("note", sa.String(20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("korely_facts", recreate="always") as batch:
        batch.drop_column("note")
"""


def test_a_batch_revision_on_sqlite_keeps_the_rows_that_refer_to_a_copied_table(
    sqlite_url: str, tmp_path: Path, giulia: Identity
) -> None:
    """Batch mode copies a table and drops the old one: with foreign keys on, the drop would
    cascade to every mark and word of the facts."""
    scripts = tmp_path / "scripts"
    shutil.copytree(Path(_alembic.__file__).parent, scripts)
    after = f"{int(HEAD) + 1:04d}"
    (scripts / "versions" / f"v{after}_batch.py").write_text(
        BATCH_REVISION.format(head=HEAD, after=after)
    )
    fill(sqlite_url, giulia)
    db = create(resolve_url(sqlite_url))
    with db.connect() as conn:
        before = {
            t: conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar()
            for t in ("korely_marks", "korely_fact_terms", "korely_facts")
        }
    assert all(before.values())

    with schema_transaction(db) as conn:
        _alembic.upgrade(conn, after, scripts=str(scripts))

    with db.connect() as conn:
        after = {t: conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar() for t in before}
        made = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'korely_facts'"
        ).scalars()
        sql = "\n".join(s for s in made if s)
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    db.dispose()
    assert after == before
    assert "AUTOINCREMENT" in sql and "note" in sql
    assert "WHERE ended_recorded_at IS NULL" in sql  # the partial indexes came along
