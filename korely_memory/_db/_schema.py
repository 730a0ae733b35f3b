"""The tables, as SQLAlchemy declarations. No method here touches the database.

A fact is one row per version. The row that is true now has
``ended_recorded_at IS NULL``; two partial unique indexes let the database,
not only the code, refuse a second true row for a key in one namespace.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import CompileError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.schema import CreateColumn, CreateTable

NAME = 255

# SQLite only auto-increments an INTEGER PRIMARY KEY.
Id = BigInteger().with_variant(Integer(), "sqlite")


def parse_sqlite_utc(value: str) -> dt.datetime:
    """A moment SQLite holds as UTC text without an offset, as an aware datetime.

    A block reads thousands of these: naming the offset in the text is one C
    call, several times cheaper than ``replace(tzinfo=...)`` afterwards.
    """
    try:
        return dt.datetime.fromisoformat(value + "+00:00")
    except ValueError:  # text that carries an offset of its own
        return dt.datetime.fromisoformat(value).astimezone(dt.timezone.utc)


def as_utc(moment: dt.datetime) -> dt.datetime:
    """An aware UTC datetime from what a driver returned (naive means UTC)."""
    if moment.tzinfo is dt.timezone.utc:
        return moment
    if moment.tzinfo is None:
        return moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc)


def moment_reader(dialect: Dialect) -> Callable[[Any], dt.datetime]:
    """How a moment read as driver SQL (bypassing the column type) becomes an aware datetime."""
    return parse_sqlite_utc if dialect.name == "sqlite" else as_utc


def moment_writer(dialect: Dialect) -> Callable[[dt.datetime], Any]:
    """How a moment becomes a driver parameter of SQL run as it is (bypassing the column type),
    in the form the column stores: text on SQLite."""
    process = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    assert process is not None  # a TypeDecorator with process_bind_param always has one
    return process


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Stores UTC and always returns aware datetimes: SQLite drops the time zone."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        value = as_utc(value)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        return None if value is None else as_utc(value)

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)

        def process(value: str | None) -> dt.datetime | None:
            return None if value is None else parse_sqlite_utc(value)

        return process


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
        }
    )


# -- words ----------------------------------------------------------------------------------
#
# Each column of text (Text, JSON, bytes), and each other that may hold a person's words, says what
# it holds of them in its ``info``: erasure takes from these marks the tables and columns whose
# words go (``_store._erasure``), and its proof the columns it scans. A text column that says
# nothing fails ``tests/test_erasure.py``.


class Holds(enum.Enum):
    """What a column holds of a person's words (``info["holds"]``)."""

    SAID = "said"
    """Their words, or what is made of them (index terms, embeddings and their digests): they go
    with the person, and with the version or memory that holds them."""
    LABEL = "label"
    """Words they name something by (a fact's key, an item's labels): they go with the person; a
    version whose words are erased keeps its key, so that history shows it existed."""
    NOTHING = "nothing"
    """None: ids, paths into a value, what the engine itself writes."""


SAID = {"holds": Holds.SAID}
"""``info`` of a column holding a person's words (``Holds.SAID``)."""
LABEL = {"holds": Holds.LABEL}
"""``info`` of a column holding the words a person names something by (``Holds.LABEL``)."""
NO_WORDS = {"holds": Holds.NOTHING}
"""``info`` of a text column holding no words of a person (``Holds.NOTHING``)."""


# -- keys ---------------------------------------------------------------------------------
#
# Every table that holds a person's data carries ``account`` in its primary key and in every
# foreign key between them: a database that distributes rows by account (Citus, PostgreSQL's
# hash partitioning) keeps an account's rows together and checks each key on one node.

ROWID = {"rowid_id": True}
"""``info`` of a table of numbered rows (facts, memories, erasures): SQLite numbers its rowid."""


def keyed_by_account(table: str, *, referred: bool = True) -> tuple[Any, ...]:
    """The key of a table of numbered rows: ``(account, id)``.

    SQLite numbers only a column that is its rowid (``INTEGER PRIMARY KEY``): there ``id``
    alone is the key (``_rowid_column``, ``_rowid_key``), and the foreign keys that name
    ``(id, account)`` of a ``referred`` table find it by a unique index that only SQLite has.
    """
    key = PrimaryKeyConstraint("account", "id")
    if not referred:
        return (key,)
    found = Index(f"uq_{table}_id_account", "id", "account", unique=True)
    return key, found.ddl_if(dialect="sqlite")


def referring(column: str, table: str, *, ondelete: str | None = None) -> ForeignKeyConstraint:
    """A foreign key from ``column`` and the row's account to ``table``'s ``(id, account)``.

    Without ``ondelete``, the engine clears the link before the row it names goes: a database
    that distributes by account refuses ``SET NULL`` on a key that holds the account.
    """
    return ForeignKeyConstraint(
        [column, "account"], [f"{table}.id", f"{table}.account"], ondelete=ondelete
    )


@compiles(CreateColumn, "sqlite")
def _rowid_column(create: CreateColumn, compiler: Any, **kw: Any) -> str | None:
    column = create.element
    if column.name == "id" and column.table.info.get("rowid_id"):
        return "id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT"
    made: str | None = compiler.visit_create_column(create, **kw)
    return made


@compiles(CreateTable, "sqlite")
def _rowid_key(create: CreateTable, compiler: Any, **kw: Any) -> str:
    """A table of numbered rows on SQLite: ``id`` is its rowid, and the key
    (``_rowid_column``): the table's own key is left out."""
    made = str(compiler.visit_create_table(create, **kw))
    if not create.element.info.get("rowid_id"):
        return made
    key = f", \n\tCONSTRAINT pk_{create.element.name} PRIMARY KEY (account, id)"
    if key not in made:  # SQLAlchemy wrote it otherwise: never a table with two keys
        raise CompileError(f"{create.element.name}: no key (account, id) to leave out in {made}")
    return made.replace(key, "", 1)


ACCOUNT_SPACE = "/account"
"""Where confirmed account facts live in the word index and the write locks: '/' is never in a name,
so no user can be called this."""


def true_row(alias: str | None = None) -> str:
    """SQL that holds for the version true now of its key."""
    c = f"{alias}." if alias else ""
    return f"{c}ended_recorded_at IS NULL"


def personal_row(alias: str | None = None) -> str:
    """SQL for a user fact or a proposal, true or not: the namespace (account, agent, owner)."""
    c = f"{alias}." if alias else ""
    return f"({c}scope IS NULL OR {c}scope <> 'account')"


def account_row(alias: str | None = None) -> str:
    """SQL for a confirmed account fact, true or not: the namespace (account, agent)."""
    c = f"{alias}." if alias else ""
    return f"{c}scope = 'account'"


def true_personal_row(alias: str | None = None) -> str:
    """SQL for a true user fact or proposal."""
    return f"{true_row(alias)} AND {personal_row(alias)}"


def true_account_row(alias: str | None = None) -> str:
    """SQL for a true confirmed account fact."""
    return f"{true_row(alias)} AND {account_row(alias)}"


# Queries that should use a partial index state its predicate with these same functions:
# SQLite uses a partial index only when the query's WHERE holds the index's terms as written.
_PENDING = "ended_at IS NOT NULL AND told_at IS NULL"
_EXPIRING = f"valid_until IS NOT NULL AND {true_row()}"
_HELD = "hold_token IS NOT NULL"


class FactRow(Base):
    __tablename__ = "korely_facts"

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    account: Mapped[str] = mapped_column(String(NAME))
    owner: Mapped[str | None] = mapped_column(String(NAME))
    # owner, or '' for memory with no end user: '' is never a valid name, and a
    # unique index treats NULLs as distinct.
    owner_key: Mapped[str] = mapped_column(String(NAME))
    agent: Mapped[str] = mapped_column(String(NAME))
    key: Mapped[str] = mapped_column(String(100), info=LABEL)
    # Emptied when the version's words are removed (forgotten with erase=True, or memory forgotten).
    content: Mapped[str] = mapped_column(Text, info=SAID)
    scope: Mapped[str | None] = mapped_column(String(20))
    valid_from: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    invalid_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    recorded_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    ended_recorded_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    end_cause: Mapped[str | None] = mapped_column(String(20))
    # The links below are cleared by the engine before the row they name is deleted: a database
    # that distributes by account refuses SET NULL on a key that holds the account.
    replaced_by_id: Mapped[int | None] = mapped_column(Id)
    source_memory_id: Mapped[int | None] = mapped_column(Id)
    confirmed_by: Mapped[str | None] = mapped_column(String(NAME))
    confirmed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    modified_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    # When it stops being true, as recorded with it (revision 0003): no read of a moment at or
    # after it shows it, though the row is true (``ended_recorded_at IS NULL``) until a write
    # under its key, or ``trim``, ends it as expired.
    valid_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # How many words its text (key and content) has, as the index counts them, for BM25's length
    # (revision 0007); 0 once its words are removed.
    words: Mapped[int] = mapped_column(Integer, server_default="0")

    __table_args__ = (
        *keyed_by_account("korely_facts"),
        referring("replaced_by_id", "korely_facts"),
        referring("source_memory_id", "korely_memories"),
        Index(
            "uq_korely_facts_true_personal",
            "account",
            "agent",
            "owner_key",
            "key",
            unique=True,
            sqlite_where=text(true_personal_row()),
            postgresql_where=text(true_personal_row()),
        ),
        Index(
            "uq_korely_facts_true_account",
            "account",
            "agent",
            "key",
            unique=True,
            sqlite_where=text(true_account_row()),
            postgresql_where=text(true_account_row()),
        ),
        # The newest true facts first, without reading the others (a block takes only what fits).
        Index(
            "ix_korely_facts_true_recent",
            "account",
            "agent",
            "owner_key",
            "modified_at",
            "id",
            sqlite_where=text(true_personal_row()),
            postgresql_where=text(true_personal_row()),
        ),
        Index(
            "ix_korely_facts_true_account_recent",
            "account",
            "agent",
            "modified_at",
            "id",
            sqlite_where=text(true_account_row()),
            postgresql_where=text(true_account_row()),
        ),
        # True facts that expire: how many of a namespace's have, without reading the others.
        Index(
            "ix_korely_facts_expiring",
            "account",
            "agent",
            "owner_key",
            "valid_until",
            sqlite_where=text(_EXPIRING),
            postgresql_where=text(_EXPIRING),
        ),
        Index("ix_korely_facts_owner", "account", "agent", "owner_key", "key"),
        Index("ix_korely_facts_account_key", "account", "agent", "key"),
        Index("ix_korely_facts_owner_only", "account", "owner_key"),
        Index("ix_korely_facts_replaced_by", "replaced_by_id"),
        Index("ix_korely_facts_source_memory", "source_memory_id"),
        # Ids are never reused, so an id read before a delete never names another row.
        {"sqlite_autoincrement": True, "info": ROWID},
    )


class FactTermRow(Base):
    """A word of a true fact, so a block finds the facts that match its query by index.

    ``space`` is the fact's owner key, or ``ACCOUNT_SPACE`` for a confirmed
    account fact. Ended versions have no rows here.
    """

    __tablename__ = "korely_fact_terms"

    account: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    agent: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    space: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    term: Mapped[str] = mapped_column(String(64), primary_key=True, info=SAID)
    fact_id: Mapped[int] = mapped_column(Id, primary_key=True)
    # How often the fact says the word, for BM25 (revision 0007).
    tf: Mapped[int] = mapped_column(Integer, server_default="1")

    __table_args__ = (
        referring("fact_id", "korely_facts", ondelete="CASCADE"),
        Index("ix_korely_fact_terms_fact", "fact_id"),
        {"sqlite_with_rowid": False},
    )


class FactCountRow(Base):
    """How many true facts one namespace holds (user facts and proposals), so a block can say
    how many it left out without counting them, and how many words they have; and the version of
    what its blocks show. The row of owner_key ``ACCOUNT_SPACE`` counts no fact: it holds the
    version and the expiring facts of the account's facts."""

    __tablename__ = "korely_fact_counts"

    account: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    agent: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    owner_key: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    n: Mapped[int] = mapped_column(Integer)
    # How many words they have in all (``korely_facts.words``), for BM25's average length
    # (revision 0007).
    words: Mapped[int] = mapped_column(Integer, server_default="0")
    # A number drawn anew by every write that changes what a block of this namespace shows (its
    # facts, its memories; in the row whose owner_key is ACCOUNT_SPACE, the account's facts):
    # a process may reuse a block it made while the numbers it read then are unchanged.
    version: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # How many of the true facts counted here have a ``valid_until``: a block that could change
    # with the clock alone is never reused (revision 0007).
    expiring: Mapped[int] = mapped_column(Integer, server_default="0")


class MemoryRow(Base):
    __tablename__ = "korely_memories"

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    account: Mapped[str] = mapped_column(String(NAME))
    owner: Mapped[str | None] = mapped_column(String(NAME))
    owner_key: Mapped[str] = mapped_column(String(NAME))
    agent: Mapped[str] = mapped_column(String(NAME))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    # How many words the index holds of it (for relevance: a long memory's words count for less).
    words: Mapped[int] = mapped_column(Integer, default=0)
    # Its length in characters: a block sizes what it shows without reading the text.
    chars: Mapped[int] = mapped_column(Integer, default=0)
    # The memory of the same namespace kept just before it, which it answers: the index holds
    # the end of that one's words too (revision 0006). Cleared, and the index rebuilt, when
    # that memory goes (by the engine, as ``korely_facts.replaced_by_id``).
    replies_to: Mapped[int | None] = mapped_column(Id)
    # Last: on SQLite, the columns before a long text are read without its overflow pages.
    content: Mapped[str] = mapped_column(Text, info=SAID)

    __table_args__ = (
        *keyed_by_account("korely_memories"),
        referring("replies_to", "korely_memories"),
        Index("ix_korely_memories_owner", "account", "agent", "owner_key", "created_at"),
        # A person's memories under every agent definition: erasure and export (revision 0002).
        Index("ix_korely_memories_owner_only", "account", "owner_key"),
        # The memory that answers one about to go (revision 0006).
        Index("ix_korely_memories_replies_to", "replies_to"),
        {"sqlite_autoincrement": True, "info": ROWID},
    )


class MemoryTermRow(Base):
    """A word of a memory and how often it says it, so a block and a search find memories by
    index and score them without reading their text."""

    __tablename__ = "korely_memory_terms"

    account: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    agent: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    space: Mapped[str] = mapped_column(String(NAME), primary_key=True)  # the owner key
    term: Mapped[str] = mapped_column(String(64), primary_key=True, info=SAID)
    memory_id: Mapped[int] = mapped_column(Id, primary_key=True)
    tf: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        referring("memory_id", "korely_memories", ondelete="CASCADE"),
        Index("ix_korely_memory_terms_memory", "memory_id"),
        {"sqlite_with_rowid": False},
    )


class SettingRow(Base):
    """What the database was set up with, for every engine that opens it: the language its word
    indexes were written in, and the secret its seals are made with (``sealing``)."""

    __tablename__ = "korely_settings"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(NAME))


class VectorRow(Base):
    """An embedding of a text, by the model that made it: computed once, not by every process.

    Keyed by a hash of the text, so it holds no words; erasure deletes the vectors of the
    texts it deletes.
    """

    __tablename__ = "korely_vectors"

    # Kept per account (revision 0008): one account's texts say nothing of another's, not even by
    # how fast a vector comes, and the vectors of an account live where its facts do.
    account: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    model: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    # A digest of the words, and what the model made of them: said, as the words are.
    text_hash: Mapped[str] = mapped_column(String(64), primary_key=True, info=SAID)
    vector: Mapped[bytes] = mapped_column(LargeBinary, info=SAID)

    __table_args__ = (Index("ix_korely_vectors_text", "account", "text_hash"),)


class MarkRow(Base):
    """One fact handed to one reader. Holds no text of the fact."""

    __tablename__ = "korely_marks"

    account: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    reader: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    fact_id: Mapped[int] = mapped_column(Id, primary_key=True)
    # The user the fact is about ('' for account facts and agent-team memory).
    subject: Mapped[str] = mapped_column(String(NAME))
    first_read_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    # Kept to the hour, so a steady read with nothing pending writes nothing.
    last_read_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    # Set in the transaction that ends the fact: what a reader has to be told is
    # found through a small partial index instead of a join over every mark.
    ended_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    told_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # A read with a hold shows the change without spending it: until held_until, no other read
    # of this reader shows it; acknowledging the read's receipt (its token) sets told_at.
    hold_token: Mapped[str | None] = mapped_column(String(32))
    held_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        referring("fact_id", "korely_facts", ondelete="CASCADE"),
        Index("ix_korely_marks_fact", "fact_id"),
        Index("ix_korely_marks_subject", "account", "subject"),
        Index("ix_korely_marks_last_read", "last_read_at"),
        Index(
            "ix_korely_marks_pending",
            "account",
            "reader",
            "subject",
            sqlite_where=text(_PENDING),
            postgresql_where=text(_PENDING),
        ),
        Index(
            "ix_korely_marks_hold",
            "hold_token",
            sqlite_where=text(_HELD),
            postgresql_where=text(_HELD),
        ),
    )


class NoteRow(Base):
    """What one conversation was shown in one turn: the text of the note attached to a message.

    ``items`` is JSON: the ids of the versions and memories the note showed (``facts``,
    ``memories``, and ``changes`` as ``[was, now]``), and each of its lines with the ids it
    shows (``lines``), so that a line can be redacted when its words are erased. Revision 0004.
    """

    __tablename__ = "korely_notes"

    account: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    owner_key: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    agent: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    conversation: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    anchor: Mapped[str | None] = mapped_column(String(NAME))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    items: Mapped[str] = mapped_column(Text, info=NO_WORDS)
    # Last: on SQLite, the columns before a long text are read without its overflow pages.
    text: Mapped[str] = mapped_column(Text, info=SAID)

    __table_args__ = (
        # A person's notes under every agent definition: erasure and export.
        Index("ix_korely_notes_owner_only", "account", "owner_key"),
        Index("ix_korely_notes_created", "created_at"),
    )


class ItemRow(Base):
    """An item of a LangGraph store: a JSON value kept beside the fact that shows it.

    ``namespace`` is the item's labels joined by '.', which no label holds. The fact under
    ``fact_key`` in the namespace (account, agent, owner) holds the item's words; ``fact_id`` is
    the version true now (a new version recorded elsewhere writes its words into ``value``, at
    the path ``text_at`` holds). ``expires_at`` is when the item expires unless read or
    written again (``ttl`` minutes after the last). ``embed`` is what the put said to embed
    (JSON: null for the store's default, false, or a list of paths). Revision 0005.
    """

    __tablename__ = "korely_items"

    account: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    agent: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    namespace: Mapped[str] = mapped_column(Text, primary_key=True, info=LABEL)
    key: Mapped[str] = mapped_column(Text, primary_key=True, info=LABEL)
    owner_key: Mapped[str] = mapped_column(String(NAME))
    fact_key: Mapped[str] = mapped_column(String(100), info=LABEL)
    fact_id: Mapped[int] = mapped_column(Id)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    ttl: Mapped[float | None] = mapped_column(Float)
    embed: Mapped[str] = mapped_column(Text, info=NO_WORDS)
    text_at: Mapped[str | None] = mapped_column(Text, info=NO_WORDS)
    # Last: on SQLite, the columns before a long text are read without its overflow pages.
    value: Mapped[str] = mapped_column(Text, info=SAID)

    __table_args__ = (
        # One item per fact: two items never show the same words.
        Index("uq_korely_items_fact", "account", "agent", "owner_key", "fact_key", unique=True),
        # A person's items under every agent definition: erasure.
        Index("ix_korely_items_owner_only", "account", "owner_key"),
        # The last written first: a page of a search reads no more rows than it shows.
        Index("ix_korely_items_recent", "account", "agent", "updated_at"),
        # Items whose time to live may run out: the sweep.
        Index("ix_korely_items_expires", "expires_at"),
    )


class AdminRow(Base):
    __tablename__ = "korely_admins"

    account: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    user: Mapped[str] = mapped_column(String(NAME), primary_key=True)


class ErasureRow(Base):
    """That an erasure happened, naming the user only by a pseudonym."""

    __tablename__ = "korely_erasures"

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    account: Mapped[str] = mapped_column(String(NAME))
    pseudonym: Mapped[str] = mapped_column(String(64))
    erased_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        *keyed_by_account("korely_erasures", referred=False),
        {"sqlite_autoincrement": True, "info": ROWID},
    )


class PendingRow(Base):
    """A change to a person's own fact that a capture drew, held for their approval (revision
    0009): ``operation`` is ``remember``, ``correct`` or ``forget`` (``content`` None). Nothing
    reads it but the person's approval, export and erasure."""

    __tablename__ = "korely_pending"

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    account: Mapped[str] = mapped_column(String(NAME))
    # The user, or '' for memory with no end user (as ``korely_facts.owner_key``).
    owner_key: Mapped[str] = mapped_column(String(NAME))
    agent: Mapped[str] = mapped_column(String(NAME))
    operation: Mapped[str] = mapped_column(String(20))
    key: Mapped[str] = mapped_column(String(100), info=LABEL)
    captured_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    # The reader name of the agent that captured it.
    reader: Mapped[str | None] = mapped_column(String(NAME))
    # On SQLite, the columns before a long text are read without its overflow pages.
    content: Mapped[str | None] = mapped_column(Text, info=SAID)
    # The version the change was drawn against: the person's own true fact under the key when it
    # was captured (None: none). ``approve`` writes it only while that version holds (0010).
    drawn_against: Mapped[int | None] = mapped_column(Id)

    __table_args__ = (
        *keyed_by_account("korely_pending", referred=False),
        # One identity's, oldest first; the same change held already.
        Index("ix_korely_pending_owner", "account", "agent", "owner_key", "key"),
        # A person's under every agent definition: erasure and export.
        Index("ix_korely_pending_owner_only", "account", "owner_key"),
        {"sqlite_autoincrement": True, "info": ROWID},
    )


# The tables themselves, for Core statements on the hot path.
facts = cast(Table, FactRow.__table__)
memories = cast(Table, MemoryRow.__table__)
marks = cast(Table, MarkRow.__table__)
admins = cast(Table, AdminRow.__table__)
erasures = cast(Table, ErasureRow.__table__)
notes = cast(Table, NoteRow.__table__)
items = cast(Table, ItemRow.__table__)
fact_terms = cast(Table, FactTermRow.__table__)
fact_counts = cast(Table, FactCountRow.__table__)
memory_terms = cast(Table, MemoryTermRow.__table__)
settings = cast(Table, SettingRow.__table__)
vectors = cast(Table, VectorRow.__table__)
pending = cast(Table, PendingRow.__table__)
