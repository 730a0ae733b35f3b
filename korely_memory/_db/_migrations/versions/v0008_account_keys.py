"""Keys that carry the account, so that a database may distribute every table by account.

Distributed PostgreSQL (Citus) and PostgreSQL's own partitioning require the primary key and
every unique index of a distributed table to hold the column it is distributed by, and a foreign
key between two such tables to hold it too. This revision makes ``(account, id)`` the key of
``korely_facts``, ``korely_memories`` and ``korely_erasures``, and widens the six foreign keys
that named a bare id to ``(id, account)``: ``replaced_by_id``, ``source_memory_id``,
``replies_to``, the word indexes' ids and the read marks' ``fact_id``. The three links that were
``ON DELETE SET NULL`` have no action now (such a database refuses SET NULL on a key that holds
the account): the engine clears them before the row they name goes.

``korely_vectors`` gains ``account``: each account keeps the vectors of its own texts, which an
erasure in it deletes, and finds no other's. A vector kept before goes to every account that holds
its text (the digests of the facts' and memories' texts are worked out in Python); one whose text
no account holds is not kept. SQL printed for a reviewer (``korely db upgrade --sql``) keeps none:
each is embedded again when a read first needs it.

On SQLite only its rowid is numbered, so ``id`` stays the key there, with a unique index on
``(id, account)`` for the foreign keys; the tables are copied (batch mode) to change their
foreign keys, from their declarations at revision 0007 so that SQL printed for a reviewer copies
them too. On PostgreSQL the keys change in place. Revision 0008.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import hashlib
from typing import Any

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.schema import CreateIndex, CreateTable

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_BATCH = 1000
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_NAME = sa.String(length=255)
_MOMENT = sa.DateTime(timezone=True)
_TRUE = "ended_recorded_at IS NULL"
_PERSONAL = f"{_TRUE} AND (scope IS NULL OR scope <> 'account')"
_ACCOUNT = f"{_TRUE} AND scope = 'account'"

# (table, column, referred table, ON DELETE): the links that name a row by its id.
_LINKS = [
    ("korely_facts", "replaced_by_id", "korely_facts", "SET NULL"),
    ("korely_facts", "source_memory_id", "korely_memories", "SET NULL"),
    ("korely_memories", "replies_to", "korely_memories", "SET NULL"),
    ("korely_fact_terms", "fact_id", "korely_facts", "CASCADE"),
    ("korely_memory_terms", "memory_id", "korely_memories", "CASCADE"),
    ("korely_marks", "fact_id", "korely_facts", "CASCADE"),
]
_NUMBERED = ("korely_facts", "korely_memories", "korely_erasures")
_REFERRED = ("korely_facts", "korely_memories")


def _fk(table: str, column: str, referred: str) -> str:
    return f"fk_{table}_{column}_{referred}"


def _keyed(widened: bool) -> list[str]:
    """What a link names besides the id: the account, once this revision widens it."""
    return ["account"] if widened else []


def _action(ondelete: str, *, widened: bool) -> str | None:
    """A link's ON DELETE: a widened one sets nothing NULL (the engine clears it first)."""
    return None if widened and ondelete == "SET NULL" else ondelete


def _link(table: str, column: str, referred: str, *, widened: bool) -> sa.ForeignKeyConstraint:
    """The foreign key of ``column`` as revision 0007 left it, or as this one makes it."""
    ondelete = {(t, c): d for t, c, _, d in _LINKS}[table, column]
    also = _keyed(widened)
    return sa.ForeignKeyConstraint(
        [column, *also],
        [f"{referred}.{c}" for c in ("id", *also)],
        name=_fk(table, column, referred),
        ondelete=_action(ondelete, widened=widened),
    )


def _numbered_and_owned() -> list[sa.Column[Any]]:
    """The first columns of a fact and of a memory: its id (the rowid) and whose it is."""
    return [
        sa.Column("id", _ID, primary_key=True, autoincrement=True, nullable=False),
        sa.Column("account", _NAME, nullable=False),
        sa.Column("owner", _NAME, nullable=True),
        sa.Column("owner_key", _NAME, nullable=False),
        sa.Column("agent", _NAME, nullable=False),
    ]


def _declared(*, widened: bool) -> dict[str, sa.Table]:
    """The SQLite tables whose foreign keys change, before (as revision 0007 left them) or after
    this revision (``widened``); indexes included: a copy makes only those it is told of."""
    meta = sa.MetaData()
    facts = sa.Table(
        "korely_facts",
        meta,
        *_numbered_and_owned(),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("scope", sa.String(length=20), nullable=True),
        sa.Column("valid_from", _MOMENT, nullable=False),
        sa.Column("invalid_at", _MOMENT, nullable=True),
        sa.Column("recorded_at", _MOMENT, nullable=False),
        sa.Column("ended_recorded_at", _MOMENT, nullable=True),
        sa.Column("end_cause", sa.String(length=20), nullable=True),
        sa.Column("replaced_by_id", _ID, nullable=True),
        sa.Column("source_memory_id", _ID, nullable=True),
        sa.Column("confirmed_by", _NAME, nullable=True),
        sa.Column("confirmed_at", _MOMENT, nullable=True),
        sa.Column("created_at", _MOMENT, nullable=False),
        sa.Column("modified_at", _MOMENT, nullable=False),
        sa.Column("valid_until", _MOMENT, nullable=True),
        sa.Column("words", sa.Integer(), server_default="0", nullable=False),
        _link("korely_facts", "replaced_by_id", "korely_facts", widened=widened),
        _link("korely_facts", "source_memory_id", "korely_memories", widened=widened),
        sa.PrimaryKeyConstraint("id", name="pk_korely_facts"),
        sqlite_autoincrement=True,
    )
    for name, columns, where in [
        ("uq_korely_facts_true_personal", ["account", "agent", "owner_key", "key"], _PERSONAL),
        ("uq_korely_facts_true_account", ["account", "agent", "key"], _ACCOUNT),
        (
            "ix_korely_facts_true_recent",
            ["account", "agent", "owner_key", "modified_at", "id"],
            _PERSONAL,
        ),
        (
            "ix_korely_facts_true_account_recent",
            ["account", "agent", "modified_at", "id"],
            _ACCOUNT,
        ),
        (
            "ix_korely_facts_expiring",
            ["account", "agent", "owner_key", "valid_until"],
            f"valid_until IS NOT NULL AND {_TRUE}",
        ),
        ("ix_korely_facts_owner", ["account", "agent", "owner_key", "key"], None),
        ("ix_korely_facts_account_key", ["account", "agent", "key"], None),
        ("ix_korely_facts_owner_only", ["account", "owner_key"], None),
        ("ix_korely_facts_replaced_by", ["replaced_by_id"], None),
        ("ix_korely_facts_source_memory", ["source_memory_id"], None),
    ]:
        sa.Index(
            name,
            *(facts.c[c] for c in columns),
            unique=name.startswith("uq_"),
            sqlite_where=None if where is None else sa.text(where),
        )
    memories = sa.Table(
        "korely_memories",
        meta,
        *_numbered_and_owned(),
        sa.Column("created_at", _MOMENT, nullable=False),
        sa.Column("words", sa.Integer(), nullable=False),
        sa.Column("chars", sa.Integer(), nullable=False),
        sa.Column("replies_to", _ID, nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        _link("korely_memories", "replies_to", "korely_memories", widened=widened),
        sa.PrimaryKeyConstraint("id", name="pk_korely_memories"),
        sa.Index("ix_korely_memories_owner", "account", "agent", "owner_key", "created_at"),
        sa.Index("ix_korely_memories_owner_only", "account", "owner_key"),
        sa.Index("ix_korely_memories_replies_to", "replies_to"),
        sqlite_autoincrement=True,
    )
    if widened:
        for table in (facts, memories):
            sa.Index(f"uq_{table.name}_id_account", table.c.id, table.c.account, unique=True)
    return {"korely_facts": facts, "korely_memories": memories, **_terms_and_marks(meta, widened)}


def _terms_and_marks(meta: sa.MetaData, widened: bool) -> dict[str, sa.Table]:
    def terms(table: str, column: str, referred: str, tf: sa.Column[int]) -> sa.Table:
        return sa.Table(
            table,
            meta,
            sa.Column("account", _NAME, nullable=False),
            sa.Column("agent", _NAME, nullable=False),
            sa.Column("space", _NAME, nullable=False),
            sa.Column("term", sa.String(length=64), nullable=False),
            sa.Column(column, _ID, nullable=False),
            tf,
            _link(table, column, referred, widened=widened),
            sa.PrimaryKeyConstraint(
                "account", "agent", "space", "term", column, name=f"pk_{table}"
            ),
            sa.Index(f"ix_{table}_{column.split('_')[0]}", column),
            sqlite_with_rowid=False,
        )

    marks = sa.Table(
        "korely_marks",
        meta,
        sa.Column("account", _NAME, nullable=False),
        sa.Column("reader", _NAME, nullable=False),
        sa.Column("fact_id", _ID, nullable=False),
        sa.Column("subject", _NAME, nullable=False),
        sa.Column("first_read_at", _MOMENT, nullable=False),
        sa.Column("last_read_at", _MOMENT, nullable=False),
        sa.Column("ended_at", _MOMENT, nullable=True),
        sa.Column("told_at", _MOMENT, nullable=True),
        sa.Column("hold_token", sa.String(length=32), nullable=True),
        sa.Column("held_until", _MOMENT, nullable=True),
        _link("korely_marks", "fact_id", "korely_facts", widened=widened),
        sa.PrimaryKeyConstraint("account", "reader", "fact_id", name="pk_korely_marks"),
        sa.Index("ix_korely_marks_fact", "fact_id"),
        sa.Index("ix_korely_marks_subject", "account", "subject"),
        sa.Index("ix_korely_marks_last_read", "last_read_at"),
        sa.Index(
            "ix_korely_marks_pending",
            "account",
            "reader",
            "subject",
            sqlite_where=sa.text("ended_at IS NOT NULL AND told_at IS NULL"),
        ),
        sa.Index(
            "ix_korely_marks_hold", "hold_token", sqlite_where=sa.text("hold_token IS NOT NULL")
        ),
    )
    return {
        "korely_fact_terms": terms(
            "korely_fact_terms",
            "fact_id",
            "korely_facts",
            sa.Column("tf", sa.Integer(), server_default="1", nullable=False),
        ),
        "korely_memory_terms": terms(
            "korely_memory_terms",
            "memory_id",
            "korely_memories",
            sa.Column("tf", sa.Integer(), nullable=False),
        ),
        "korely_marks": marks,
    }


def upgrade() -> None:
    if op.get_context().dialect.name == "sqlite":
        _links_on_sqlite(widened=True)
    else:
        _keys_on_postgresql(widened=True)
    _vectors_per_account()


def _links_on_sqlite(*, widened: bool) -> None:
    """Copy each table whose foreign keys change to its declaration after (or before) this
    revision: the columns are the same, only the keys differ.

    Copied as SQLite's documentation says a table is changed (a new table, the rows, the old one
    dropped, the new one renamed) rather than in Alembic's batch mode, which cannot copy a foreign
    key of two columns to the table itself. The numbering goes on from where it was: ids are never
    used twice, even those of rows deleted.
    """
    dialect = op.get_context().dialect
    for name, table in _declared(widened=widened).items():
        temp = f"_{name}_0008"
        create = str(CreateTable(table).compile(dialect=dialect))
        op.execute(create.replace(f"CREATE TABLE {name} (", f"CREATE TABLE {temp} (", 1))
        columns = ", ".join(dialect.identifier_preparer.quote(c.name) for c in table.c)
        op.execute(f"INSERT INTO {temp} ({columns}) SELECT {columns} FROM {name}")
        if name in _NUMBERED:
            op.execute(
                f"UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq"
                f" FROM sqlite_sequence WHERE name = '{name}'), 0)) WHERE name = '{temp}'"
            )
        op.execute(f"DROP TABLE {name}")
        op.execute(f"ALTER TABLE {temp} RENAME TO {name}")
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            op.execute(str(CreateIndex(index).compile(dialect=dialect)))


def _keys_on_postgresql(*, widened: bool) -> None:
    """Change the keys in place: the account in each numbered table's and each link's
    (``widened``), or out of them again."""
    also = _keyed(widened)
    for table, column, referred, _ in _LINKS:
        op.drop_constraint(_fk(table, column, referred), table, type_="foreignkey")
    for table in _NUMBERED:
        op.drop_constraint(f"pk_{table}", table, type_="primary")
        op.create_primary_key(f"pk_{table}", table, [*also, "id"])
    for table, column, referred, ondelete in _LINKS:
        op.create_foreign_key(
            _fk(table, column, referred),
            table,
            referred,
            [column, *also],
            ["id", *also],
            ondelete=_action(ondelete, widened=widened),
        )


def _vectors_anew(*, per_account: bool) -> str:
    """Set ``korely_vectors`` aside and make it again, keyed by account too (``per_account``) or
    not; returns the name of the old one, to copy from and drop."""
    aside = "korely_vectors_0007" if per_account else "korely_vectors_0008"
    op.drop_index("ix_korely_vectors_text", table_name="korely_vectors")
    op.rename_table("korely_vectors", aside)
    if op.get_context().dialect.name != "sqlite":  # its name is the index's, one per schema
        op.drop_constraint("pk_korely_vectors", aside, type_="primary")
    also = _keyed(per_account)
    op.create_table(
        "korely_vectors",
        *(sa.Column(c, _NAME, nullable=False) for c in also),
        sa.Column("model", _NAME, nullable=False),
        sa.Column("text_hash", sa.String(length=64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint(*also, "model", "text_hash", name="pk_korely_vectors"),
    )
    return aside


def _vectors_per_account() -> None:
    aside = _vectors_anew(per_account=True)
    if not context.is_offline_mode():  # SQL printed for a reviewer cannot digest texts
        _keep_vectors_of_their_texts(op.get_bind())
    op.drop_table(aside)
    op.create_index("ix_korely_vectors_text", "korely_vectors", ["account", "text_hash"])


def _keep_vectors_of_their_texts(conn: sa.Connection) -> None:
    """Each vector kept before, under every account that holds its text (by the digest of a
    fact's findable text or content, or of a memory's): an account gets only the vectors of its
    own texts, and one that holds none of a vector's texts gets nothing of it."""
    keep = sa.text(
        "INSERT INTO korely_vectors (account, model, text_hash, vector)"
        " SELECT CAST(:account AS VARCHAR(255)), model, text_hash, vector"
        " FROM korely_vectors_0007 v"
        " WHERE text_hash IN :hashes AND NOT EXISTS (SELECT 1 FROM korely_vectors k"
        " WHERE k.account = CAST(:account AS VARCHAR(255))"
        " AND k.model = v.model AND k.text_hash = v.text_hash)"
    ).bindparams(sa.bindparam("hashes", expanding=True))
    for table, key in (("korely_facts", "key"), ("korely_memories", "NULL")):
        page = sa.text(
            f"SELECT id, account, {key}, content FROM {table}"
            f" WHERE id > :last AND content <> '' ORDER BY id LIMIT {_BATCH}"
        )
        last = 0
        while rows := conn.execute(page, {"last": last}).all():
            texts: dict[str, set[str]] = {}
            for _, account, fact_key, content in rows:
                said = texts.setdefault(account, set())
                said.add(_digest(content))
                if fact_key is not None:  # as ``_words.findable`` makes it
                    said.add(_digest(f"{fact_key.replace('-', ' ')} {content}"))
            for account, hashes in sorted(texts.items()):
                conn.execute(keep, {"account": account, "hashes": sorted(hashes)})
            last = rows[-1][0]


def _digest(text: str) -> str:
    """The key a text's vector is kept under (``_vectors.text_hash``)."""
    return hashlib.sha256(text.encode()).hexdigest()


def downgrade() -> None:
    aside = _vectors_anew(per_account=False)
    op.execute(
        "INSERT INTO korely_vectors (model, text_hash, vector)"
        " SELECT model, text_hash, vector FROM korely_vectors_0008 v"
        " WHERE account = (SELECT min(account) FROM korely_vectors_0008 w"
        " WHERE w.model = v.model AND w.text_hash = v.text_hash)"
    )
    op.drop_table(aside)
    op.create_index("ix_korely_vectors_text", "korely_vectors", ["text_hash"])
    if op.get_context().dialect.name == "sqlite":
        _links_on_sqlite(widened=False)
    else:
        _keys_on_postgresql(widened=False)
