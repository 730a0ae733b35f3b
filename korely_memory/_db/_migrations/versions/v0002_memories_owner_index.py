"""An index of a person's memories under every agent definition.

Erasure and export find a person's memories by (account, owner_key) whatever
the agent; ``ix_korely_memories_owner`` leads with the agent, so they read
every memory of the account. Revision 0002.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_korely_memories_owner_only", "korely_memories", ["account", "owner_key"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_korely_memories_owner_only", table_name="korely_memories")
