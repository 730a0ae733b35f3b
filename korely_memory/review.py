"""Administrators, and their review of account facts.

Writing a fact about the whole account only proposes it; confirming gives it
reach (every user of the account, through the same agent definition) and
rejecting ends it, kept for review. The engine checks who may review; the
functions here run inside its write transaction.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import facts as versions
from . import index
from .errors import InvalidRequest, NotCurrent, NotFound
from .identity import Identity, Scope
from .models import admins, facts
from .types import Fact


def decide(
    conn: Connection, account: str, reviewer: str, fact_id: int, *, confirm: bool, now: dt.datetime
) -> Fact:
    """Confirm or reject proposal ``fact_id`` of ``account``; returns the reviewed fact."""
    fact = versions.by_id(conn, fact_id)
    if fact is None or fact.account != account:
        raise NotFound(f"no fact {fact_id} in account {account!r}")
    subject = Identity(fact.account, fact.owner, fact.agent)
    versions.lock_key(conn, subject, fact.key, shared=True)
    fact = versions.by_id(conn, fact_id)  # read again under the lock
    assert fact is not None
    if not fact.is_current:
        end = versions.chain_end(conn, fact)
        raise NotCurrent(f"fact {fact_id} has ended ({fact.end_cause})", end.id if end else None)
    if fact.effective_scope is Scope.ACCOUNT and confirm:
        return fact
    if fact.effective_scope is not Scope.ACCOUNT_PROPOSED:
        raise InvalidRequest(
            "fact_id", f"fact {fact_id} is a {fact.effective_scope.value} fact, not a proposal"
        )
    if confirm:
        replaced = versions.account_current(conn, subject, fact.key)
        if replaced is not None:
            cause = "read_from_memory" if fact.source_memory_id is not None else "stated"
            versions.end_version(
                conn, replaced.id, cause=cause, now=now, invalid_at=now, replaced_by_id=fact.id
            )
        conn.execute(
            facts.update()
            .where(facts.c.id == fact_id)
            .values(scope=Scope.ACCOUNT.value, confirmed_by=reviewer, confirmed_at=now)
        )
        index.confirmed(
            conn,
            fact_id,
            account=fact.account,
            agent=fact.agent,
            owner_key=versions.owner_key(fact.owner),
        )
    else:
        versions.end_version(
            conn,
            fact_id,
            cause="rejected",
            now=now,
            invalid_at=now,
            scope=Scope.ACCOUNT_REJECTED.value,
            confirmed_by=reviewer,
            confirmed_at=now,
        )
    reviewed = versions.by_id(conn, fact_id)
    assert reviewed is not None
    return reviewed


def queue(conn: Connection, account: str, agent: str | None) -> list[Fact]:
    """Proposals waiting for an administrator, oldest first."""
    where: list[sa.ColumnElement[bool]] = [
        facts.c.account == account,
        facts.c.scope == versions.PROPOSED,
    ]
    if agent is not None:
        where.append(facts.c.agent == agent)
    rows = conn.execute(
        sa.select(facts).where(versions.IS_TRUE, *where).order_by(facts.c.recorded_at, facts.c.id)
    )
    return [Fact.from_row(r) for r in rows]


def listed(conn: Connection, account: str, user: str) -> bool:
    found = conn.execute(
        sa.select(admins.c.user).where(admins.c.account == account, admins.c.user == user)
    )
    return found.first() is not None


def grant(conn: Connection, account: str, user: str) -> None:
    if not listed(conn, account, user):
        conn.execute(admins.insert().values(account=account, user=user))


def revoke(conn: Connection, account: str, user: str) -> None:
    conn.execute(admins.delete().where(admins.c.account == account, admins.c.user == user))
