"""The items of LangGraph stores: ``korely_items``, a JSON value kept beside the fact that shows it.

``langchain_korely.KorelyStore`` keeps each item's value, times and time to live here; the
item's words are a fact's, recorded as any other. Revision 0005.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "korely_items",
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("owner_key", sa.String(length=255), nullable=False),
        sa.Column("fact_key", sa.String(length=100), nullable=False),
        sa.Column("fact_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl", sa.Float(), nullable=True),
        sa.Column("embed", sa.Text(), nullable=False),
        sa.Column("text_at", sa.Text(), nullable=True),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("account", "agent", "namespace", "key", name="pk_korely_items"),
    )
    op.create_index(
        "uq_korely_items_fact",
        "korely_items",
        ["account", "agent", "owner_key", "fact_key"],
        unique=True,
    )
    op.create_index(
        "ix_korely_items_owner_only", "korely_items", ["account", "owner_key"], unique=False
    )
    op.create_index(
        "ix_korely_items_recent", "korely_items", ["account", "agent", "updated_at"], unique=False
    )
    op.create_index("ix_korely_items_expires", "korely_items", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_korely_items_expires", table_name="korely_items")
    op.drop_index("ix_korely_items_recent", table_name="korely_items")
    op.drop_index("ix_korely_items_owner_only", table_name="korely_items")
    op.drop_index("uq_korely_items_fact", table_name="korely_items")
    op.drop_table("korely_items")
