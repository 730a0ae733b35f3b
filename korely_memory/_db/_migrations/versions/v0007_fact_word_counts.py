"""Facts scored in the database: how often a fact says each word, and how many words it has.

``korely_fact_terms.tf`` (how often the fact says the word), ``korely_facts.words`` (its length
in words) and ``korely_fact_counts.words`` (the lengths of a namespace's true user facts and
proposals, added up) are what BM25 needs, so that ``search`` ranks facts with a statement over the
word index instead of reading and scoring every fact. The index also holds every distinct word of
a fact now (it held the first 256).

``korely_fact_counts.version`` changes with every write to what a namespace's blocks show, and
``expiring`` counts its true facts that expire; a row whose owner_key is ``/account`` holds both for
the account's facts: a process reuses a block it made while they are unchanged and nothing expires.

Upgrading counts the words of every fact kept, with the stemmer of the language the database
records: a step in Python. SQL printed for a reviewer (``korely db upgrade --sql``) adds the
columns and records the setting ``uncounted``: the first engine to open the database counts them
then, in one write transaction. On SQLite
the facts table is copied (batch mode), so that it is declared as a new database declares it.
Revision 0007.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_BATCH = 1000
_ACCOUNT = "account"
_ACCOUNT_SPACE = "/account"  # _schema.ACCOUNT_SPACE


def _column(name: str, default: str, *, big: bool = False) -> sa.Column[int]:
    kind = sa.BigInteger() if big else sa.Integer()
    return sa.Column(name, kind, server_default=default, nullable=False)


def upgrade() -> None:
    added = [
        ("korely_facts", {"sqlite_autoincrement": True}, [_column("words", "0")]),
        ("korely_fact_terms", {"sqlite_with_rowid": False}, [_column("tf", "1")]),
        (
            "korely_fact_counts",
            {},
            [_column("words", "0"), _column("version", "0", big=True), _column("expiring", "0")],
        ),
    ]
    online_sqlite = not context.is_offline_mode() and op.get_context().dialect.name == "sqlite"
    for table, kwargs, columns in added:
        if online_sqlite:  # copied, so the table reads as a new database declares it
            with op.batch_alter_table(table, recreate="always", table_kwargs=kwargs) as batch:
                for column in columns:
                    batch.add_column(column)
        else:
            for column in columns:
                op.add_column(table, column)
    # Rows of the account's facts: their versions and how many of them expire.
    op.execute(
        "INSERT INTO korely_fact_counts (account, agent, owner_key, n, words, version, expiring)"
        f" SELECT account, agent, '{_ACCOUNT_SPACE}', 0, 0, 0, count(valid_until)"
        " FROM korely_facts WHERE ended_recorded_at IS NULL AND scope = 'account'"
        " GROUP BY account, agent"
    )
    op.execute(
        "UPDATE korely_fact_counts SET expiring = (SELECT count(f.valid_until)"
        " FROM korely_facts f WHERE f.account = korely_fact_counts.account"
        " AND f.agent = korely_fact_counts.agent"
        " AND f.owner_key = korely_fact_counts.owner_key"
        " AND f.ended_recorded_at IS NULL AND (f.scope IS NULL OR f.scope <> 'account'))"
        f" WHERE owner_key <> '{_ACCOUNT_SPACE}'"
    )
    if context.is_offline_mode():
        # The count needs the stemmer: the first engine to open the database does it.
        op.execute(f"INSERT INTO korely_settings (name, value) VALUES ('{UNCOUNTED}', '0007')")
    else:
        count_words(op.get_bind())


UNCOUNTED = "uncounted"
"""The setting SQL printed for a reviewer leaves: the facts' words are still to be counted."""


def count_words(conn: sa.Connection) -> None:
    """Every fact's words counted again, and the index of the true ones rebuilt with them."""
    from korely_memory._text._words import Words, findable

    language = conn.execute(
        sa.text("SELECT value FROM korely_settings WHERE name = 'language'")
    ).scalar_one_or_none()
    words = Words(language or None) if language is not None else Words()
    facts = sa.table(
        "korely_facts",
        sa.column("id"),
        sa.column("account"),
        sa.column("agent"),
        sa.column("owner_key"),
        sa.column("key"),
        sa.column("content"),
        sa.column("scope"),
        sa.column("ended_recorded_at"),
        sa.column("words"),
    )
    terms = sa.table(
        "korely_fact_terms",
        sa.column("account"),
        sa.column("agent"),
        sa.column("space"),
        sa.column("term"),
        sa.column("fact_id"),
        sa.column("tf"),
    )
    conn.execute(terms.delete())
    last = 0
    while True:
        rows = conn.execute(
            sa.select(facts).where(facts.c.id > last).order_by(facts.c.id).limit(_BATCH)
        ).all()
        if not rows:
            break
        lengths: list[dict[str, int]] = []
        postings: list[dict[str, object]] = []
        for r in rows:
            said = words(findable(r.key, r.content)) if r.content else []
            lengths.append({"fid": r.id, "n": len(said)})
            if r.ended_recorded_at is None:
                space = _ACCOUNT_SPACE if r.scope == _ACCOUNT else r.owner_key
                counted: dict[str, int] = {}
                for w in said:
                    counted[w] = counted.get(w, 0) + 1
                postings.extend(
                    {
                        "account": r.account,
                        "agent": r.agent,
                        "space": space,
                        "term": t,
                        "fact_id": r.id,
                        "tf": n,
                    }
                    for t, n in counted.items()
                )
        conn.execute(
            facts.update().where(facts.c.id == sa.bindparam("fid")).values(words=sa.bindparam("n")),
            lengths,
        )
        if postings:
            conn.execute(terms.insert(), postings)
        last = rows[-1].id
    conn.execute(
        sa.text(
            "UPDATE korely_fact_counts SET words = (SELECT coalesce(sum(f.words), 0)"
            " FROM korely_facts f WHERE f.account = korely_fact_counts.account"
            " AND f.agent = korely_fact_counts.agent"
            " AND f.owner_key = korely_fact_counts.owner_key"
            " AND f.ended_recorded_at IS NULL AND (f.scope IS NULL OR f.scope <> 'account'))"
        )
    )


def downgrade() -> None:
    op.execute(f"DELETE FROM korely_fact_counts WHERE owner_key = '{_ACCOUNT_SPACE}'")
    with op.batch_alter_table("korely_fact_counts") as batch:
        batch.drop_column("expiring")
        batch.drop_column("version")
        batch.drop_column("words")
    with op.batch_alter_table(
        "korely_fact_terms", table_kwargs={"sqlite_with_rowid": False}
    ) as batch:
        batch.drop_column("tf")
    with op.batch_alter_table("korely_facts", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("words")
