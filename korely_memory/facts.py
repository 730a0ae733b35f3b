"""Fact versions on a connection: who sees what, and how a version replaces another.

Every function here runs inside a transaction the engine opened; none commits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import database, index
from .identity import Identity, Scope
from .models import facts, marks
from .types import FACT_FIELDS, Fact

ACCOUNT = Scope.ACCOUNT.value
PROPOSED = Scope.ACCOUNT_PROPOSED.value

# Written exactly as in the partial indexes' predicates, so SQLite can use them.
IS_TRUE = sa.text("korely_facts.ended_recorded_at IS NULL")
IS_PERSONAL = sa.text("(korely_facts.scope IS NULL OR korely_facts.scope <> 'account')")
IS_ACCOUNT = sa.text("korely_facts.scope = 'account'")


def owner_key(user: str | None) -> str:
    return user or ""


FIELDS = list(FACT_FIELDS)
_ROW = [facts.c[f] for f in FIELDS]
_MINE = (
    facts.c.account == sa.bindparam("account"),
    facts.c.agent == sa.bindparam("agent"),
    facts.c.owner_key == sa.bindparam("owner_key"),
)
# Built once: a write pays for running these, not for building them.
_OWN_CURRENT = sa.select(*_ROW).where(
    *_MINE, facts.c.key == sa.bindparam("key"), IS_TRUE, IS_PERSONAL
)
_ACCOUNT_CURRENT = sa.select(*_ROW).where(
    *_MINE[:2], facts.c.key == sa.bindparam("key"), IS_TRUE, IS_ACCOUNT
)
_COUNT_OWN = sa.select(sa.func.count()).select_from(facts).where(*_MINE, IS_TRUE, IS_PERSONAL)
_BY_ID = sa.select(*_ROW).where(facts.c.id == sa.bindparam("fact_id"))


def _names(who: Identity, **also: Any) -> dict[str, Any]:
    return {"account": who.account, "agent": who.agent, "owner_key": owner_key(who.user), **also}


def own_current(conn: Connection, who: Identity, key: str) -> Fact | None:
    """The true fact under ``key`` in the identity's own namespace (user or proposal)."""
    row = conn.execute(_OWN_CURRENT, _names(who, key=key)).first()
    return from_values(row) if row else None


def account_current(conn: Connection, who: Identity, key: str) -> Fact | None:
    """The confirmed account fact under ``key`` for the identity's account and agent."""
    row = conn.execute(
        _ACCOUNT_CURRENT, {"account": who.account, "agent": who.agent, "key": key}
    ).first()
    return from_values(row) if row else None


def count_own(conn: Connection, who: Identity) -> int:
    n: int = conn.execute(_COUNT_OWN, _names(who)).scalar_one()
    return n


def by_id(conn: Connection, fact_id: int) -> Fact | None:
    row = conn.execute(_BY_ID, {"fact_id": fact_id}).first()
    return from_values(row) if row else None


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
    values = {
        "account": account,
        "owner": owner,
        "owner_key": owner_key(owner),
        "agent": agent,
        "key": key,
        "content": content,
        "scope": scope,
        "valid_from": valid_from,
        "recorded_at": now,
        "source_memory_id": source_memory_id,
        "confirmed_by": confirmed_by,
        "confirmed_at": confirmed_at,
        "created_at": created_at,
        "modified_at": now,
    }
    new_id: int = conn.execute(_INSERT, values).scalar_one()
    index.added(
        conn,
        new_id,
        account=account,
        agent=agent,
        owner_key=owner_key(owner),
        scope=scope,
        key=key,
        content=content,
    )
    return new_id


_INSERT = facts.insert().returning(facts.c.id)
_END_MARKS = (
    marks.update()
    .where(marks.c.fact_id == sa.bindparam("ended_id"), marks.c.ended_at.is_(None))
    .values(ended_at=sa.bindparam("ended", type_=marks.c.ended_at.type))
)


def end_version(
    conn: Connection,
    fact_id: int,
    *,
    cause: str,
    now: dt.datetime,
    invalid_at: dt.datetime,
    **also: Any,
) -> None:
    """End a true version; one already ended is left as it is."""
    ended = conn.execute(
        facts.update()
        .where(facts.c.id == fact_id, facts.c.ended_recorded_at.is_(None))
        .values(invalid_at=invalid_at, ended_recorded_at=now, end_cause=cause, **also)
        .returning(facts.c.id, facts.c.account, facts.c.agent, facts.c.owner_key, facts.c.scope)
    ).all()
    index.ended(conn, ended)
    # Readers that were handed this fact now have something to be told.
    conn.execute(_END_MARKS, {"ended_id": fact_id, "ended": now})


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


_VISIBLE = sa.union_all(
    sa.select(*_ROW).where(*_MINE, IS_TRUE, IS_PERSONAL),
    sa.select(*_ROW).where(*_MINE[:2], IS_TRUE, IS_ACCOUNT),
)


def from_values(values: Sequence[Any]) -> Fact:
    """A Fact from a row in field order; many rows are read per block, so no per-field lookups."""
    return Fact.from_fields(dict(zip(FIELDS, values)))


def visible(conn: Connection, who: Identity) -> list[Fact]:
    """Every fact true now that ``who`` sees: its own, then confirmed account facts it does not shadow."""
    rows = conn.execute(_VISIBLE, _names(who))
    return shadow([from_values(r) for r in rows])


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
    rows = conn.execute(
        sa.select(facts).where(*where).order_by(facts.c.recorded_at, facts.c.id)
    ).all()
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
        ended_then = f.ended_recorded_at is not None and (
            known is None or f.ended_recorded_at <= known
        )
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


def lock_key(conn: Connection, who: Identity, key: str, *, shared: bool = False) -> None:
    """Serialise writers of ``key`` in the identity's namespace, then (``shared``) the account's.

    Always in that order, so two writers never wait on each other in a circle.
    """
    database.namespace_lock(conn, who.account, who.agent, who.user, key)
    if shared:
        database.namespace_lock(conn, who.account, who.agent, "\x00account", key)
