"""Fact versions on a connection: who sees what, and how a version replaces another.

Every function here runs inside a transaction the engine opened; none commits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .identity import Identity, Scope
from .models import facts, marks
from .types import Fact

ACCOUNT = Scope.ACCOUNT.value
PROPOSED = Scope.ACCOUNT_PROPOSED.value
REJECTED = Scope.ACCOUNT_REJECTED.value

# Written exactly as in the partial indexes' predicates, so SQLite can use them.
IS_TRUE = sa.text("korely_facts.ended_recorded_at IS NULL")
IS_PERSONAL = sa.text("(korely_facts.scope IS NULL OR korely_facts.scope <> 'account')")
IS_ACCOUNT = sa.text("korely_facts.scope = 'account'")


def owner_key(user: str | None) -> str:
    return user or ""


def _personal(who: Identity) -> list[Any]:
    return [facts.c.account == who.account, facts.c.agent == who.agent, facts.c.owner_key == owner_key(who.user)]


def _account(who: Identity) -> list[Any]:
    return [facts.c.account == who.account, facts.c.agent == who.agent]


def own_current(conn: Connection, who: Identity, key: str) -> Fact | None:
    """The true fact under ``key`` in the identity's own namespace (user or proposal)."""
    row = conn.execute(
        sa.select(facts).where(*_personal(who), facts.c.key == key, IS_TRUE, IS_PERSONAL)
    ).first()
    return Fact.from_row(row) if row else None


def account_current(conn: Connection, who: Identity, key: str) -> Fact | None:
    """The confirmed account fact under ``key`` for the identity's account and agent."""
    row = conn.execute(sa.select(facts).where(*_account(who), facts.c.key == key, IS_TRUE, IS_ACCOUNT)).first()
    return Fact.from_row(row) if row else None


def count_own(conn: Connection, who: Identity) -> int:
    return conn.execute(
        sa.select(sa.func.count()).select_from(facts).where(*_personal(who), IS_TRUE, IS_PERSONAL)
    ).scalar_one()


def by_id(conn: Connection, fact_id: int) -> Fact | None:
    row = conn.execute(sa.select(facts).where(facts.c.id == fact_id)).first()
    return Fact.from_row(row) if row else None


def chain_end(conn: Connection, fact: Fact) -> Fact | None:
    """Follow ``replaced_by_id`` to the version true now, if the chain ends in one."""
    seen = {fact.id}
    while fact.replaced_by_id is not None and fact.replaced_by_id not in seen:
        nxt = by_id(conn, fact.replaced_by_id)
        if nxt is None:
            return None
        seen.add(nxt.id)
        fact = nxt
    return fact if fact.is_current else None


def insert_version(
    conn: Connection,
    *,
    account: str,
    owner: str | None,
    agent: str,
    key: str,
    content: str,
    scope: str,
    valid_from: dt.datetime,
    now: dt.datetime,
    created_at: dt.datetime,
    source_memory_id: int | None = None,
    confirmed_by: str | None = None,
    confirmed_at: dt.datetime | None = None,
) -> int:
    new_id: int = conn.execute(
        facts.insert()
        .values(
            account=account,
            owner=owner,
            owner_key=owner_key(owner),
            agent=agent,
            key=key,
            content=content,
            scope=scope,
            valid_from=valid_from,
            recorded_at=now,
            source_memory_id=source_memory_id,
            confirmed_by=confirmed_by,
            confirmed_at=confirmed_at,
            created_at=created_at,
            modified_at=now,
        )
        .returning(facts.c.id)
    ).scalar_one()
    return new_id


def end_version(
    conn: Connection, fact_id: int, *, cause: str, now: dt.datetime, invalid_at: dt.datetime, **also: Any
) -> None:
    conn.execute(
        facts.update()
        .where(facts.c.id == fact_id)
        .values(invalid_at=invalid_at, ended_recorded_at=now, end_cause=cause, **also)
    )
    # Readers that were handed this fact now have something to be told.
    conn.execute(marks.update().where(marks.c.fact_id == fact_id, marks.c.ended_at.is_(None)).values(ended_at=now))


def replace(
    conn: Connection,
    old: Fact | None,
    *,
    cause: str,
    now: dt.datetime,
    valid_from: dt.datetime,
    **new: Any,
) -> int:
    """End ``old`` (if any) and make a new version true; the old one points to it."""
    if old is not None:
        # Ended first: the partial unique index allows one true row per key.
        end_version(conn, old.id, cause=cause, now=now, invalid_at=valid_from)
    new_id = insert_version(
        conn, now=now, valid_from=valid_from, created_at=old.created_at if old else now, **new
    )
    if old is not None:
        conn.execute(facts.update().where(facts.c.id == old.id).values(replaced_by_id=new_id))
    return new_id


def visible(conn: Connection, who: Identity) -> list[Fact]:
    """Every fact true now that ``who`` sees: its own, then confirmed account facts it does not shadow."""
    rows = conn.execute(
        sa.union_all(
            sa.select(facts).where(*_personal(who), IS_TRUE, IS_PERSONAL),
            sa.select(facts).where(*_account(who), IS_TRUE, IS_ACCOUNT),
        )
    ).all()
    return shadow([Fact.from_row(r) for r in rows])


def shadow(found: Iterable[Fact]) -> list[Fact]:
    """One fact per key: the user's own wins over the account's, then the latest version."""
    best: dict[str, Fact] = {}
    for fact in found:
        held = best.get(fact.key)
        if held is None or _rank(fact) > _rank(held):
            best[fact.key] = fact
    return list(best.values())


def _rank(fact: Fact) -> tuple[int, dt.datetime, int]:
    return (0 if fact.effective_scope is Scope.ACCOUNT else 1, fact.recorded_at, fact.id)


def every_version(conn: Connection, who: Identity, key: str | None = None) -> list[Fact]:
    """Every version ``who`` may see in history: its own namespace and the confirmed account facts."""
    where = [
        facts.c.account == who.account,
        facts.c.agent == who.agent,
        facts.c.content != "",
        sa.or_(facts.c.owner_key == owner_key(who.user), facts.c.scope == ACCOUNT),
    ]
    if key is not None:
        where.append(facts.c.key == key)
    rows = conn.execute(sa.select(facts).where(*where).order_by(facts.c.recorded_at, facts.c.id)).all()
    return [Fact.from_row(r) for r in rows]


def as_of(
    versions: Sequence[Fact], *, at: dt.datetime | None, known: dt.datetime | None, who: Identity
) -> list[Fact]:
    """What was true in the world at ``at``, as the store knew it at ``known`` (either may be None)."""
    chosen = []
    for f in versions:
        if known is not None and f.recorded_at > known:
            continue
        if not _reached(f, who, known):
            continue
        # What the store held at ``known`` (None: now): an ending learned later had not happened yet.
        ended_then = f.ended_recorded_at is not None and (known is None or f.ended_recorded_at <= known)
        if at is None:
            if ended_then:
                continue
        elif f.valid_from > at or (ended_then and f.invalid_at is not None and f.invalid_at <= at):
            continue
        chosen.append(f)
    return shadow(chosen)


def _reached(f: Fact, who: Identity, known: dt.datetime | None) -> bool:
    """Whether ``f`` reached ``who`` at ``known``: a review only counts from when it happened."""
    reviewed = f.confirmed_at is not None and (known is None or f.confirmed_at <= known)
    mine = f.owner == who.user
    if f.effective_scope is Scope.ACCOUNT_REJECTED:
        return mine and not reviewed
    if f.effective_scope is Scope.ACCOUNT:
        return reviewed or mine
    return mine
