"""A held change records the version it was drawn against: ``korely_pending.drawn_against``.

``approve`` writes a held change only while the key holds that version still (None: the key held
nothing), so that approving a change captured before someone else wrote the key refuses
(``NotCurrent``) instead of overwriting what was written since. A change held before this revision
is taken as drawn against the version its key holds now (a ``remember``: against nothing).
Revision 0010.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# The person's own true version under the held change's key, as ``_versions.own_current`` finds
# it: this identity's namespace, not an account fact, not ended.
_HOLDS_NOW = """
UPDATE korely_pending SET drawn_against = (
    SELECT max(f.id) FROM korely_facts f
    WHERE f.account = korely_pending.account AND f.agent = korely_pending.agent
      AND f.owner_key = korely_pending.owner_key AND f.key = korely_pending.key
      AND f.ended_recorded_at IS NULL AND (f.scope IS NULL OR f.scope <> 'account')
)
WHERE operation <> 'remember'
"""


def upgrade() -> None:
    column = sa.Column("drawn_against", _ID, nullable=True)
    # Copied on SQLite, so the table reads as a new database declares it; SQL printed for a
    # reviewer (no database to copy from) adds the column in place, which SQLite allows too.
    if context.is_offline_mode() or op.get_context().dialect.name != "sqlite":
        op.add_column("korely_pending", column)
    else:
        with op.batch_alter_table(
            "korely_pending", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ) as batch:
            batch.add_column(column)
    op.execute(_HOLDS_NOW)


def downgrade() -> None:
    with op.batch_alter_table(
        "korely_pending", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:
        batch.drop_column("drawn_against")
