"""The notes of conversations: ``korely_notes``, what each turn of a conversation was shown.

A read with ``conversation=`` shows only what the conversation has not been shown, as a note
attached to one of its messages; the engine keeps each note so that an adapter can put it back
where it was, byte for byte, and so that erasure finds the words it holds. Revision 0004.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "korely_notes",
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("owner_key", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=False),
        sa.Column("conversation", sa.String(length=255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("anchor", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("items", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("account", "owner_key", "agent", "conversation", "seq"),
    )
    op.create_index(
        "ix_korely_notes_owner_only", "korely_notes", ["account", "owner_key"], unique=False
    )
    op.create_index("ix_korely_notes_created", "korely_notes", ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_korely_notes_created", table_name="korely_notes")
    op.drop_index("ix_korely_notes_owner_only", table_name="korely_notes")
    op.drop_table("korely_notes")
