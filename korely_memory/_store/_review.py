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

from .._db._schema import admins, facts, true_row
from .._values import _expiry
from .._values._errors import AlreadyDecided, InvalidRequest, NotCurrent, NotFound
from .._values._identity import EndCause, Identity, Scope
from .._values._types import Fact
from . import _versions, _word_index


def decide(
    conn: Connection, account: str, reviewer: str, fact_id: int, *, confirm: bool, now: dt.datetime
) -> Fact:
    """Confirm or reject proposal ``fact_id`` of ``account``; returns the reviewed fact."""
    fact = _versions.by_id(conn, account, fact_id)
    if fact is None:
        raise NotFound(f"no fact {fact_id} in account {account!r}")
    subject = Identity(fact.account, fact.owner, fact.agent)
    _versions.lock_person(conn, account, fact.owner)
    _versions.lock_key(conn, subject, fact.key, shared=True)
    fact = _versions.by_id(conn, account, fact_id)  # read again under the locks
    if fact is None:  # its owner was erased meanwhile
        raise NotFound(f"no fact {fact_id} in account {account!r}")
    if _expiry.is_expired(fact, now):  # nothing to review: it is no longer true
        _versions.end_expired(conn, [fact], now)
        fact = _versions.by_id(conn, account, fact_id)
        assert fact is not None
    decided = {Scope.ACCOUNT: "confirmed", Scope.ACCOUNT_REJECTED: "rejected"}
    decision = decided.get(fact.effective_scope)
    if decision is not None and (fact.is_current or fact.end_cause is EndCause.REJECTED):
        by = f" by {fact.confirmed_by}" if fact.confirmed_by else ""
        day = f" on {fact.confirmed_at.date()}" if fact.confirmed_at else ""
        raise AlreadyDecided(f"fact {fact_id} was {decision}{by}{day} already", fact_id, decision)
    if not fact.is_current:
        end = _versions.chain_end(conn, fact, now)
        raise NotCurrent(f"fact {fact_id} has ended ({fact.end_cause})", end.id if end else None)
    if fact.effective_scope is not Scope.ACCOUNT_PROPOSED:
        scope = fact.effective_scope.value
        article = "an" if scope.startswith("a") else "a"  # "an account fact", "a user fact"
        raise InvalidRequest("fact_id", f"fact {fact_id} is {article} {scope} fact, not a proposal")
    now = max(now, fact.recorded_at)
    if confirm:
        replaced = _versions.account_current(conn, subject, fact.key)
        if replaced is not None and _expiry.is_expired(replaced, now):
            _versions.end_expired(conn, [replaced], now)  # it ended then, as expired
            replaced = None
        if replaced is not None:
            cause = EndCause.READ_FROM_MEMORY if fact.source_memory_id else EndCause.STATED
            _versions.end_versions(
                conn,
                _versions.the_version(account, replaced.id),
                cause=cause,
                now=now,
                replaced_by_id=fact.id,
            )
        conn.execute(
            facts.update()
            .where(_versions.the_version(account, fact_id))
            .values(scope=Scope.ACCOUNT.value, confirmed_by=reviewer, confirmed_at=now)
        )
        length = conn.execute(
            sa.select(facts.c.words).where(_versions.the_version(account, fact_id))
        ).scalar_one()
        _word_index.confirmed(
            conn,
            _word_index.Indexed(
                fact.id,
                fact.account,
                fact.agent,
                _versions.owner_key(fact.owner),
                fact.scope,
                length,
                fact.valid_until is not None,
            ),
        )
    else:
        _versions.end_versions(
            conn,
            _versions.the_version(account, fact_id),
            cause=EndCause.REJECTED,
            now=now,
            scope=Scope.ACCOUNT_REJECTED.value,
            confirmed_by=reviewer,
            confirmed_at=now,
        )
    reviewed = _versions.by_id(conn, account, fact_id)
    assert reviewed is not None
    return reviewed


def queue(conn: Connection, account: str, agent: str | None, now: dt.datetime) -> list[Fact]:
    """Proposals waiting for an administrator at ``now`` (not expired), oldest first."""
    where: list[sa.ColumnElement[bool] | sa.TextClause] = [
        facts.c.account == account,
        facts.c.scope == Scope.ACCOUNT_PROPOSED.value,
        sa.text(true_row("korely_facts")),
    ]
    if agent is not None:
        where.append(facts.c.agent == agent)
    rows = conn.execute(sa.select(facts).where(*where).order_by(facts.c.recorded_at, facts.c.id))
    return [f for r in rows if _expiry.is_live(f := Fact.from_row(r), now)]


def listed(conn: Connection, account: str, user: str) -> bool:
    """Whether ``user`` is on the list of administrators of ``account``."""
    found = conn.execute(
        sa.select(admins.c.user).where(admins.c.account == account, admins.c.user == user)
    )
    return found.first() is not None


def grant(conn: Connection, account: str, user: str) -> None:
    """Put ``user`` on the list of administrators of ``account``."""
    if not listed(conn, account, user):
        conn.execute(admins.insert().values(account=account, user=user))


def revoke(conn: Connection, account: str, user: str) -> None:
    """Take ``user`` off the list of administrators of ``account``."""
    conn.execute(admins.delete().where(admins.c.account == account, admins.c.user == user))
