"""Memories found with the one they answer: ``korely_memories.replies_to``.

A memory kept shortly after another of the same namespace answers it: its word index holds the
end of that one's words too, and ``replies_to`` names it, so that the index is rebuilt without
them when it goes (its words are then nowhere). Memories kept before this revision answer none.
On SQLite the table is copied (batch mode), the column before the text, so that it is declared
as a new database declares it; on PostgreSQL it comes last, where the order does not matter.
Revision 0006.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_FK = "fk_korely_memories_replies_to_korely_memories"
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _as_of_0005() -> sa.Table:
    """``korely_memories`` as revisions 0001 and 0002 made it: what SQLite copies from, without
    reading the database (so that the SQL printed for a reviewer copies it too)."""
    return sa.Table(
        "korely_memories",
        sa.MetaData(),
        sa.Column("id", _ID, primary_key=True, autoincrement=True, nullable=False),
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=True),
        sa.Column("owner_key", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("words", sa.Integer(), nullable=False),
        sa.Column("chars", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_korely_memories"),
        sa.Index("ix_korely_memories_owner", "account", "agent", "owner_key", "created_at"),
        sa.Index("ix_korely_memories_owner_only", "account", "owner_key"),
        sqlite_autoincrement=True,
    )


def upgrade() -> None:
    column = sa.Column("replies_to", _ID, nullable=True)
    if op.get_context().dialect.name == "sqlite":
        with op.batch_alter_table(
            "korely_memories",
            copy_from=_as_of_0005(),
            recreate="always",
            table_kwargs={"sqlite_autoincrement": True},
        ) as batch:
            batch.add_column(column, insert_before="content")  # the long text stays last
            batch.create_foreign_key(
                _FK, "korely_memories", ["replies_to"], ["id"], ondelete="SET NULL"
            )
    else:
        op.add_column("korely_memories", column)
        op.create_foreign_key(
            _FK, "korely_memories", "korely_memories", ["replies_to"], ["id"], ondelete="SET NULL"
        )
    op.create_index("ix_korely_memories_replies_to", "korely_memories", ["replies_to"])


def downgrade() -> None:
    op.drop_index("ix_korely_memories_replies_to", table_name="korely_memories")
    with op.batch_alter_table(
        "korely_memories", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:
        batch.drop_constraint(_FK, type_="foreignkey")
        batch.drop_column("replies_to")
