"""Baseline: the memory's tables as the first release creates them.

Revision ID: 0001
Revises:
Generated from ``korely_memory/_schema.py`` as it then was; frozen since, as every revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "korely_admins",
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("account", "user", name=op.f("pk_korely_admins")),
    )
    op.create_table(
        "korely_erasures",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("pseudonym", sa.String(length=64), nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_korely_erasures")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "korely_fact_counts",
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=False),
        sa.Column("owner_key", sa.String(length=255), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "account", "agent", "owner_key", name=op.f("pk_korely_fact_counts")
        ),
    )
    op.create_table(
        "korely_memories",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=True),
        sa.Column("owner_key", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("words", sa.Integer(), nullable=False),
        sa.Column("chars", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_korely_memories")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_korely_memories_owner",
        "korely_memories",
        ["account", "agent", "owner_key", "created_at"],
        unique=False,
    )
    op.create_table(
        "korely_settings",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_korely_settings")),
    )
    op.create_table(
        "korely_vectors",
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("text_hash", sa.String(length=64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("model", "text_hash", name=op.f("pk_korely_vectors")),
    )
    op.create_index("ix_korely_vectors_text", "korely_vectors", ["text_hash"], unique=False)
    op.create_table(
        "korely_facts",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=True),
        sa.Column("owner_key", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("scope", sa.String(length=20), nullable=True),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("invalid_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_recorded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_cause", sa.String(length=20), nullable=True),
        sa.Column(
            "replaced_by_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column(
            "source_memory_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("confirmed_by", sa.String(length=255), nullable=True),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("modified_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["replaced_by_id"],
            ["korely_facts.id"],
            name=op.f("fk_korely_facts_replaced_by_id_korely_facts"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["source_memory_id"],
            ["korely_memories.id"],
            name=op.f("fk_korely_facts_source_memory_id_korely_memories"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_korely_facts")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_korely_facts_account_key", "korely_facts", ["account", "agent", "key"], unique=False
    )
    op.create_index(
        "ix_korely_facts_owner",
        "korely_facts",
        ["account", "agent", "owner_key", "key"],
        unique=False,
    )
    op.create_index(
        "ix_korely_facts_owner_only", "korely_facts", ["account", "owner_key"], unique=False
    )
    op.create_index("ix_korely_facts_replaced_by", "korely_facts", ["replaced_by_id"], unique=False)
    op.create_index(
        "ix_korely_facts_source_memory", "korely_facts", ["source_memory_id"], unique=False
    )
    op.create_index(
        "ix_korely_facts_true_account_recent",
        "korely_facts",
        ["account", "agent", "modified_at", "id"],
        unique=False,
        sqlite_where=sa.text("ended_recorded_at IS NULL AND scope = 'account'"),
        postgresql_where=sa.text("ended_recorded_at IS NULL AND scope = 'account'"),
    )
    op.create_index(
        "ix_korely_facts_true_recent",
        "korely_facts",
        ["account", "agent", "owner_key", "modified_at", "id"],
        unique=False,
        sqlite_where=sa.text("ended_recorded_at IS NULL AND (scope IS NULL OR scope <> 'account')"),
        postgresql_where=sa.text(
            "ended_recorded_at IS NULL AND (scope IS NULL OR scope <> 'account')"
        ),
    )
    op.create_index(
        "uq_korely_facts_true_account",
        "korely_facts",
        ["account", "agent", "key"],
        unique=True,
        sqlite_where=sa.text("ended_recorded_at IS NULL AND scope = 'account'"),
        postgresql_where=sa.text("ended_recorded_at IS NULL AND scope = 'account'"),
    )
    op.create_index(
        "uq_korely_facts_true_personal",
        "korely_facts",
        ["account", "agent", "owner_key", "key"],
        unique=True,
        sqlite_where=sa.text("ended_recorded_at IS NULL AND (scope IS NULL OR scope <> 'account')"),
        postgresql_where=sa.text(
            "ended_recorded_at IS NULL AND (scope IS NULL OR scope <> 'account')"
        ),
    )
    op.create_table(
        "korely_memory_terms",
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=False),
        sa.Column("space", sa.String(length=255), nullable=False),
        sa.Column("term", sa.String(length=64), nullable=False),
        sa.Column(
            "memory_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("tf", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["korely_memories.id"],
            name=op.f("fk_korely_memory_terms_memory_id_korely_memories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "account", "agent", "space", "term", "memory_id", name=op.f("pk_korely_memory_terms")
        ),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_korely_memory_terms_memory", "korely_memory_terms", ["memory_id"], unique=False
    )
    op.create_table(
        "korely_fact_terms",
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=255), nullable=False),
        sa.Column("space", sa.String(length=255), nullable=False),
        sa.Column("term", sa.String(length=64), nullable=False),
        sa.Column("fact_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.ForeignKeyConstraint(
            ["fact_id"],
            ["korely_facts.id"],
            name=op.f("fk_korely_fact_terms_fact_id_korely_facts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "account", "agent", "space", "term", "fact_id", name=op.f("pk_korely_fact_terms")
        ),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_korely_fact_terms_fact", "korely_fact_terms", ["fact_id"], unique=False)
    op.create_table(
        "korely_marks",
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("reader", sa.String(length=255), nullable=False),
        sa.Column("fact_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("first_read_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_read_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("told_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("hold_token", sa.String(length=32), nullable=True),
        sa.Column("held_until", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["fact_id"],
            ["korely_facts.id"],
            name=op.f("fk_korely_marks_fact_id_korely_facts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("account", "reader", "fact_id", name=op.f("pk_korely_marks")),
    )
    op.create_index("ix_korely_marks_fact", "korely_marks", ["fact_id"], unique=False)
    op.create_index(
        "ix_korely_marks_hold",
        "korely_marks",
        ["hold_token"],
        unique=False,
        sqlite_where=sa.text("hold_token IS NOT NULL"),
        postgresql_where=sa.text("hold_token IS NOT NULL"),
    )
    op.create_index("ix_korely_marks_last_read", "korely_marks", ["last_read_at"], unique=False)
    op.create_index(
        "ix_korely_marks_pending",
        "korely_marks",
        ["account", "reader", "subject"],
        unique=False,
        sqlite_where=sa.text("ended_at IS NOT NULL AND told_at IS NULL"),
        postgresql_where=sa.text("ended_at IS NOT NULL AND told_at IS NULL"),
    )
    op.create_index("ix_korely_marks_subject", "korely_marks", ["account", "subject"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_korely_marks_subject", table_name="korely_marks")
    op.drop_index(
        "ix_korely_marks_pending",
        table_name="korely_marks",
        sqlite_where=sa.text("ended_at IS NOT NULL AND told_at IS NULL"),
        postgresql_where=sa.text("ended_at IS NOT NULL AND told_at IS NULL"),
    )
    op.drop_index("ix_korely_marks_last_read", table_name="korely_marks")
    op.drop_index(
        "ix_korely_marks_hold",
        table_name="korely_marks",
        sqlite_where=sa.text("hold_token IS NOT NULL"),
        postgresql_where=sa.text("hold_token IS NOT NULL"),
    )
    op.drop_index("ix_korely_marks_fact", table_name="korely_marks")
    op.drop_table("korely_marks")
    op.drop_index("ix_korely_fact_terms_fact", table_name="korely_fact_terms")
    op.drop_table("korely_fact_terms")
    op.drop_index("ix_korely_memory_terms_memory", table_name="korely_memory_terms")
    op.drop_table("korely_memory_terms")
    op.drop_index(
        "uq_korely_facts_true_personal",
        table_name="korely_facts",
        sqlite_where=sa.text("ended_recorded_at IS NULL AND (scope IS NULL OR scope <> 'account')"),
        postgresql_where=sa.text(
            "ended_recorded_at IS NULL AND (scope IS NULL OR scope <> 'account')"
        ),
    )
    op.drop_index(
        "uq_korely_facts_true_account",
        table_name="korely_facts",
        sqlite_where=sa.text("ended_recorded_at IS NULL AND scope = 'account'"),
        postgresql_where=sa.text("ended_recorded_at IS NULL AND scope = 'account'"),
    )
    op.drop_index(
        "ix_korely_facts_true_recent",
        table_name="korely_facts",
        sqlite_where=sa.text("ended_recorded_at IS NULL AND (scope IS NULL OR scope <> 'account')"),
        postgresql_where=sa.text(
            "ended_recorded_at IS NULL AND (scope IS NULL OR scope <> 'account')"
        ),
    )
    op.drop_index(
        "ix_korely_facts_true_account_recent",
        table_name="korely_facts",
        sqlite_where=sa.text("ended_recorded_at IS NULL AND scope = 'account'"),
        postgresql_where=sa.text("ended_recorded_at IS NULL AND scope = 'account'"),
    )
    op.drop_index("ix_korely_facts_source_memory", table_name="korely_facts")
    op.drop_index("ix_korely_facts_replaced_by", table_name="korely_facts")
    op.drop_index("ix_korely_facts_owner_only", table_name="korely_facts")
    op.drop_index("ix_korely_facts_owner", table_name="korely_facts")
    op.drop_index("ix_korely_facts_account_key", table_name="korely_facts")
    op.drop_table("korely_facts")
    op.drop_index("ix_korely_vectors_text", table_name="korely_vectors")
    op.drop_table("korely_vectors")
    op.drop_table("korely_settings")
    op.drop_index("ix_korely_memories_owner", table_name="korely_memories")
    op.drop_table("korely_memories")
    op.drop_table("korely_fact_counts")
    op.drop_table("korely_erasures")
    op.drop_table("korely_admins")
