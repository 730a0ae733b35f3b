"""Erasing a person: every fact, version, memory and mark about them, physically, in one transaction.

Confirmed account facts they stated are the account's and stay, with the
person's name replaced by a pseudonym. A row in ``korely_erasures`` records
that an erasure happened, naming the person only by that pseudonym.
"""

from __future__ import annotations

import datetime as dt
import secrets

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import index
from .facts import ACCOUNT
from .models import admins, erasures, facts, marks, memories
from .types import ErasureReport, TrimReport

MARK_LIFETIME = dt.timedelta(days=90)


def erase(conn: Connection, account: str, user: str, now: dt.datetime) -> ErasureReport:
    pseudonym = f"erased-{secrets.token_hex(8)}"
    personal = sa.select(facts.c.id).where(
        facts.c.account == account,
        facts.c.owner == user,
        sa.or_(facts.c.scope.is_(None), facts.c.scope != ACCOUNT),
    )
    theirs = sa.select(memories.c.id).where(memories.c.account == account, memories.c.owner == user)

    n_marks = conn.execute(
        marks.delete().where(
            marks.c.account == account,
            sa.or_(marks.c.subject == user, marks.c.reader == user, marks.c.fact_id.in_(personal)),
        )
    ).rowcount
    # Account facts may point into the versions about to go.
    conn.execute(
        facts.update().where(facts.c.replaced_by_id.in_(personal)).values(replaced_by_id=None)
    )
    conn.execute(
        facts.update().where(facts.c.source_memory_id.in_(theirs)).values(source_memory_id=None)
    )
    index.erased(conn, account, user, personal)
    n_facts = conn.execute(
        facts.delete().where(facts.c.id.in_(personal.scalar_subquery()))
    ).rowcount
    n_memories = conn.execute(
        memories.delete().where(memories.c.id.in_(theirs.scalar_subquery()))
    ).rowcount
    kept = conn.execute(
        facts.update()
        .where(facts.c.account == account, facts.c.owner == user)
        .values(owner=pseudonym, owner_key=pseudonym)
    ).rowcount
    conn.execute(
        facts.update()
        .where(facts.c.account == account, facts.c.confirmed_by == user)
        .values(confirmed_by=pseudonym)
    )
    n_admin = conn.execute(
        admins.delete().where(admins.c.account == account, admins.c.user == user)
    ).rowcount
    conn.execute(erasures.insert().values(account=account, pseudonym=pseudonym, erased_at=now))
    return ErasureReport(
        pseudonym=pseudonym,
        facts=n_facts,
        memories=n_memories,
        marks=n_marks,
        admin_grants=n_admin,
        account_facts_kept=kept,
    )


def trim(conn: Connection, now: dt.datetime) -> TrimReport:
    """Marks go 90 days after their last read, and once the change they waited for was told."""
    told = conn.execute(marks.delete().where(marks.c.told_at.is_not(None))).rowcount
    expired = conn.execute(
        marks.delete().where(marks.c.last_read_at < now - MARK_LIFETIME)
    ).rowcount
    return TrimReport(marks_expired=expired, marks_told=told)


def delete_reader(conn: Connection, account: str, reader: str) -> int:
    return conn.execute(
        marks.delete().where(marks.c.account == account, marks.c.reader == reader)
    ).rowcount
