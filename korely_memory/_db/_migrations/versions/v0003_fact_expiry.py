"""Facts that expire: ``korely_facts.valid_until`` and an index of the true facts that have one.

A fact recorded with ``valid_until`` stops being true then: reads of a later moment leave it
out, with no job running. The index finds a namespace's true facts that expire, so a block
counts those that have without reading the others. On SQLite the table is copied (batch mode),
so that it is declared as a new database declares it. Revision 0003.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_EXPIRING = "valid_until IS NOT NULL AND ended_recorded_at IS NULL"


def upgrade() -> None:
    column = sa.Column("valid_until", sa.DateTime(timezone=True), nullable=True)
    # Copied on SQLite, so the table reads as a new database declares it; SQL printed for a
    # reviewer (no database to copy from) adds the column in place, which SQLite allows too.
    if context.is_offline_mode() or op.get_context().dialect.name != "sqlite":
        op.add_column("korely_facts", column)
    else:
        with op.batch_alter_table(
            "korely_facts", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ) as batch:
            batch.add_column(column)
    op.create_index(
        "ix_korely_facts_expiring",
        "korely_facts",
        ["account", "agent", "owner_key", "valid_until"],
        unique=False,
        sqlite_where=sa.text(_EXPIRING),
        postgresql_where=sa.text(_EXPIRING),
    )


def downgrade() -> None:
    op.drop_index("ix_korely_facts_expiring", table_name="korely_facts")
    with op.batch_alter_table("korely_facts", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("valid_until")
