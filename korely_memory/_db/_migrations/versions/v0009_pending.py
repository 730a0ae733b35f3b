"""Captured facts held for the person's approval: ``korely_pending``.

``MemoryEngine.capture(..., hold_for_owner=True)`` keeps each change it draws about a person's own
facts here instead of writing it; ``approve`` writes it as the person's own statement, ``decline``
drops it. Keyed as revision 0008 keys the numbered tables: ``(account, id)`` on PostgreSQL; on
SQLite ``id`` is the rowid, the only column SQLite numbers, and the key. No foreign key refers to
it. Revision 0009.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_NAME = sa.String(length=255)


def upgrade() -> None:
    keyed = [] if op.get_context().dialect.name == "sqlite" else ["account"]
    op.create_table(
        "korely_pending",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("account", _NAME, nullable=False),
        sa.Column("owner_key", _NAME, nullable=False),
        sa.Column("agent", _NAME, nullable=False),
        sa.Column("operation", sa.String(length=20), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("captured_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reader", _NAME, nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(*keyed, "id", name="pk_korely_pending"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_korely_pending_owner", "korely_pending", ["account", "agent", "owner_key", "key"]
    )
    op.create_index("ix_korely_pending_owner_only", "korely_pending", ["account", "owner_key"])


def downgrade() -> None:
    op.drop_index("ix_korely_pending_owner_only", table_name="korely_pending")
    op.drop_index("ix_korely_pending_owner", table_name="korely_pending")
    op.drop_table("korely_pending")
