"""Fact versions on a connection: who sees what, and how a version replaces another.

Every function here runs inside a transaction the engine opened; none commits.
``end_versions`` is the one way a version stops being true: it stamps the
rows, takes their words out of the index and tells the readers' marks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db import _database
from .._db._schema import ACCOUNT_SPACE, facts, personal_row, true_account_row, true_personal_row
from .._text._words import Words
from .._values._expiry import expired, is_due, is_expired, is_live, live, seen_at
from .._values._identity import EndCause, Identity, Scope
from .._values._types import FACT_FIELDS, Fact
from . import _marks, _word_index

ACCOUNT = Scope.ACCOUNT.value
FIELDS = list(FACT_FIELDS)
_ROW = [facts.c[f] for f in FIELDS]


def owner_key(user: str | None) -> str:
    """How a namespace names its owner: the user, or '' for memory with no end user."""
    return user or ""


def namespace_of(fact: Fact) -> str:
    """The namespace a version's key lives in: its owner's, or the account's once confirmed."""
    return ACCOUNT_SPACE if fact.effective_scope is Scope.ACCOUNT else owner_key(fact.owner)


def sees(who: Identity, fact: Fact, known: dt.datetime | None = None) -> bool:
    """Whether ``fact`` reaches ``who``: the rule every read of true facts follows.

    A user fact or a proposal reaches its owner; a confirmed account fact
    reaches everyone of its account through its agent definition; a rejected
    proposal reaches nobody. ``known``: as the store knew it then, when a
    review only counts from the moment it happened.
    """
    if fact.account != who.account or fact.agent != who.agent:
        return False
    reviewed = fact.confirmed_at is not None and (known is None or fact.confirmed_at <= known)
    mine = fact.owner == who.user
    if fact.effective_scope is Scope.ACCOUNT_REJECTED:
        return mine and not reviewed
    if fact.effective_scope is Scope.ACCOUNT:
        return reviewed or mine
    return mine


_MINE = (
    facts.c.account == sa.bindparam("account"),
    facts.c.agent == sa.bindparam("agent"),
    facts.c.owner_key == sa.bindparam("owner_key"),
)
_TRUE_PERSONAL = sa.text(true_personal_row("korely_facts"))
_TRUE_ACCOUNT = sa.text(true_account_row("korely_facts"))
# Built once: a write pays for running these, not for building them.
_OWN_CURRENT = sa.select(*_ROW).where(*_MINE, facts.c.key == sa.bindparam("key"), _TRUE_PERSONAL)
_ACCOUNT_CURRENT = sa.select(*_ROW).where(
    *_MINE[:2], facts.c.key == sa.bindparam("key"), _TRUE_ACCOUNT
)
_COUNT_OWN = (
    sa.select(sa.func.count())
    .select_from(facts)
    .where(*_MINE, sa.text(personal_row("korely_facts")), live(facts, sa.bindparam("now")))
)
_BY_ID = sa.select(*_ROW).where(
    facts.c.account == sa.bindparam("account"), facts.c.id == sa.bindparam("fact_id")
)
_VISIBLE = sa.union_all(
    sa.select(*_ROW).where(*_MINE, _TRUE_PERSONAL),
    sa.select(*_ROW).where(*_MINE[:2], _TRUE_ACCOUNT),
)
_INSERT = facts.insert().returning(facts.c.id)


def _names(who: Identity, **also: Any) -> dict[str, Any]:
    return {"account": who.account, "agent": who.agent, "owner_key": owner_key(who.user), **also}


def from_values(values: Sequence[Any]) -> Fact:
    """A Fact from a row in field order; many rows are read per block, so no per-field lookups."""
    return Fact.from_fields(dict(zip(FIELDS, values, strict=True)))


# -- expiry: a property of the read --------------------------------------------------------


def end_expired(conn: Connection, found: Iterable[Fact], now: dt.datetime) -> list[int]:
    """End, as expired, the versions of ``found`` whose ``valid_until`` came by ``now``: each at
    its ``valid_until`` (never before it was recorded). Returns their ids."""
    ended: list[int] = []
    for fact in found:
        if is_expired(fact, now):
            assert fact.valid_until is not None
            ended += end_versions(
                conn,
                the_version(fact.account, fact.id),
                cause=EndCause.EXPIRED,
                now=fact.valid_until,
                invalid_at=fact.valid_until,
            )
    return ended


_EXPIRED = sa.select(*_ROW).where(expired(facts, sa.bindparam("now")))


def end_all_expired(conn: Connection, now: dt.datetime) -> int:
    """End every version whose ``valid_until`` came by ``now`` (``trim``); returns how many."""
    found = [from_values(r) for r in conn.execute(_EXPIRED, {"now": now})]
    return len(end_expired(conn, found, now))


# -- locks --------------------------------------------------------------------------------


def lock_key(conn: Connection, who: Identity, key: str, *, shared: bool = False) -> None:
    """Serialise writers of ``key`` in the identity's namespace, then (``shared``) the account's.

    Always in that order, so two writers never wait on each other in a circle.
    """
    _database.lock(conn, "key", who.account, who.agent, owner_key(who.user), key)
    if shared:
        _database.lock(conn, "key", who.account, who.agent, ACCOUNT_SPACE, key)


def lock_person(conn: Connection, account: str, *users: str | None, erasing: bool = False) -> None:
    """Serialise a person's erasure against everything written about them (or under their name).

    Writers share the lock; erasure takes it alone, so no write about the
    person commits while their words are being deleted. Taken first.
    """
    names = [u for u in users if u]
    _database.lock_all(conn, [("person", account, u) for u in names], shared=not erasing)


def lock_ceiling(conn: Connection, who: Identity) -> None:
    """Serialise the writers of one namespace that count its facts against a ceiling."""
    _database.lock(conn, "ceiling", who.account, who.agent, owner_key(who.user))


# -- reading versions ---------------------------------------------------------------------


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


def count_own(conn: Connection, who: Identity, now: dt.datetime) -> int:
    """How many true facts the identity's own namespace holds at ``now``."""
    n: int = conn.execute(_COUNT_OWN, _names(who, now=now)).scalar_one()
    return n


def the_version(account: str, fact_id: int) -> sa.ColumnElement[bool]:
    """The version with this id, named with its account: every statement about one person names
    the account, so that a database distributed by account reads it on one node."""
    return sa.and_(facts.c.account == account, facts.c.id == fact_id)


def by_id(conn: Connection, account: str, fact_id: int) -> Fact | None:
    """The version of ``account`` with this id, whoever it belongs to."""
    row = conn.execute(_BY_ID, {"account": account, "fact_id": fact_id}).first()
    return from_values(row) if row else None


def in_any_account(conn: Connection, fact_id: int) -> Fact | None:
    """The version with this id, whichever account holds it: for the command line, which names a
    proposal by its id alone (a database distributed by account asks every node)."""
    row = conn.execute(sa.select(*_ROW).where(facts.c.id == fact_id)).first()
    return from_values(row) if row else None


def by_ids(conn: Connection, account: str, fact_ids: Sequence[int]) -> list[Fact]:
    """The versions of ``account`` with these ids that exist, in id order."""
    if not fact_ids:
        return []
    rows = conn.execute(
        sa.select(*_ROW)
        .where(facts.c.account == account, facts.c.id.in_(sorted(set(fact_ids))))
        .order_by(facts.c.id)
    )
    return [from_values(r) for r in rows]


def chain_end(conn: Connection, fact: Fact, now: dt.datetime) -> Fact | None:
    """Follow ``replaced_by_id`` to the version true now, if the chain ends in one."""
    seen = {fact.id}
    while fact.replaced_by_id is not None and fact.replaced_by_id not in seen:
        nxt = by_id(conn, fact.account, fact.replaced_by_id)
        if nxt is None:
            return None
        seen.add(nxt.id)
        fact = nxt
    return fact if is_live(fact, now) else None


def visible(conn: Connection, who: Identity, now: dt.datetime) -> list[Fact]:
    """Every fact true at ``now`` that ``who`` sees: its own, then confirmed account facts it
    does not shadow (an expired fact of its own shadows nothing)."""
    rows = conn.execute(_VISIBLE, _names(who))
    return shadow(f for r in rows if is_live(f := from_values(r), now))


def shadow(found: Iterable[Fact]) -> list[Fact]:
    """One fact per key: the user's own wins over the account's, then the latest version.

    ``found``: live facts (``is_live``), so that one of the user's that expired hides nothing.
    The rule in SQL, for a statement that leaves the hidden account facts out: ``shadowed``.
    """
    best: dict[str, Fact] = {}
    for fact in found:
        held = best.get(fact.key)
        if held is None or _precedence(fact) > _precedence(held):
            best[fact.key] = fact
    return list(best.values())


def _precedence(fact: Fact) -> tuple[int, dt.datetime, int]:
    return (0 if fact.effective_scope is Scope.ACCOUNT else 1, fact.recorded_at, fact.id)


def shadowed(shared: Any, *, account: Any, owner: Any, now: Any) -> sa.Exists:
    """SQL of ``shadow``'s rule, for the account fact a row of ``shared`` holds: the user
    ``owner`` (its owner key) of ``account`` has a live fact of their own under its key, which
    hides it. One of theirs that expired by ``now`` hides nothing."""
    own = facts.alias("own")
    return sa.exists().where(
        own.c.account == account,
        own.c.agent == shared.c.agent,
        own.c.owner_key == owner,
        own.c.key == shared.c.key,
        # A literal, as in the partial index's predicate, so SQLite can use the index.
        sa.text(personal_row("own")),
        live(own, now),
    )


def every_version(
    conn: Connection, who: Identity, key: str | None = None, *, now: dt.datetime
) -> list[Fact]:
    """Every version in ``who``'s history as a read at ``now`` sees it: its own namespace's and
    the confirmed account facts', oldest first. Versions whose words were removed are there,
    with no words; those that expired by ``now`` read as ended."""
    where = [
        facts.c.account == who.account,
        facts.c.agent == who.agent,
        sa.or_(facts.c.owner_key == owner_key(who.user), facts.c.scope == ACCOUNT),
    ]
    if key is not None:
        where.append(facts.c.key == key)
    rows = conn.execute(
        sa.select(*_ROW).where(*where).order_by(facts.c.recorded_at, facts.c.id)
    ).all()
    return [seen_at(from_values(r), now) for r in rows]


def as_of(
    versions: Sequence[Fact], *, at: dt.datetime | None, known: dt.datetime | None, who: Identity
) -> list[Fact]:
    """What was true in the world at ``at``, as the store knew it at ``known`` (either may be
    None)."""
    chosen = []
    for f in versions:
        if known is not None and f.recorded_at > known:
            continue
        if not sees(who, f, known):
            continue
        # What the store held at ``known`` (None: now): an ending learned later had not happened.
        ended_then = f.ended_recorded_at is not None and (
            known is None or f.ended_recorded_at <= known
        )
        # An expiry is known from the moment the version was recorded.
        if at is None:
            if ended_then or (known is not None and is_due(f.valid_until, known)):
                continue
        elif (
            f.valid_from > at
            or (ended_then and f.invalid_at is not None and f.invalid_at <= at)
            or is_due(f.valid_until, at)
        ):
            continue
        chosen.append(f)
    return shadow(chosen)


# -- writing versions -----------------------------------------------------------------------


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
    valid_until: dt.datetime | None = None,
    words: Words,
    confirmed_by: str | None = None,
    confirmed_at: dt.datetime | None = None,
) -> int:
    """Make a new version true (no other may be true under its key); returns its id."""
    counted = _word_index.terms_of(key, content, words)
    length = sum(counted.values())
    values = {
        "account": account,
        "owner": owner,
        "owner_key": owner_key(owner),
        "agent": agent,
        "key": key,
        "content": content,
        "scope": scope,
        "valid_from": valid_from,
        "valid_until": valid_until,
        "recorded_at": now,
        "source_memory_id": source_memory_id,
        "confirmed_by": confirmed_by,
        "confirmed_at": confirmed_at,
        "created_at": created_at,
        "modified_at": now,
        "words": length,
    }
    new_id: int = conn.execute(_INSERT, values).scalar_one()
    indexed = _word_index.Indexed(
        new_id, account, agent, owner_key(owner), scope, length, valid_until is not None
    )
    _word_index.added(conn, indexed, counted)
    return new_id


def end_versions(
    conn: Connection,
    where: sa.ColumnElement[bool],
    *,
    cause: EndCause,
    now: dt.datetime,
    invalid_at: dt.datetime | None = None,
    writer: tuple[str, str] | None = None,
    **also: Any,
) -> list[int]:
    """End the true versions ``where`` selects; returns their ids. Ended ones are left as they are.

    The one way a version stops being true. A version never ends before it was
    recorded, whatever the clock of the process says: a clock that stepped back
    (or another machine's that runs behind) cannot reorder a key's history.
    Its words leave the index, and every reader handed it has a change to be
    told (``writer``, the (account, reader) that made the change, excepted).
    ``also`` sets more columns of the ended rows.
    """
    moment = sa.literal(now, type_=facts.c.recorded_at.type)
    ended_at = sa.case((facts.c.recorded_at > moment, facts.c.recorded_at), else_=moment)
    invalid = invalid_at if invalid_at is not None else now
    rows = conn.execute(
        facts.update()
        .where(where, facts.c.ended_recorded_at.is_(None))
        .values(
            ended_recorded_at=ended_at,
            invalid_at=invalid,
            end_cause=cause.value,
            **also,
        )
        .returning(
            facts.c.id,
            facts.c.account,
            facts.c.agent,
            facts.c.owner_key,
            facts.c.scope,
            facts.c.words,
            # The value, not "valid_until IS NOT NULL": SQLite 3.40's RETURNING answers 1 for
            # that on a NULL.
            facts.c.valid_until,
        )
    ).all()
    ended = [
        _word_index.Indexed(
            r.id, r.account, r.agent, r.owner_key, r.scope, r.words, r.valid_until is not None
        )
        for r in rows
    ]
    _word_index.ended(conn, ended)
    for account in sorted({v.account for v in ended}):  # one for a person: trim's may be more
        of_account = [v.id for v in ended if v.account == account]
        _marks.versions_ended(conn, account, of_account, now, writer)
    return sorted(v.id for v in ended)


def replace(
    conn: Connection,
    old: Fact | None,
    *,
    cause: EndCause,
    now: dt.datetime,
    valid_from: dt.datetime | None,
    writer: tuple[str, str] | None = None,
    **new: Any,
) -> int:
    """End ``old`` (if any) and make a new version true; the old one points to it.

    The new version is never recorded before the old one was.
    """
    if old is not None:
        now = max(now, old.recorded_at)
        # Ended first: the partial unique index allows one true row per key.
        end_versions(
            conn,
            the_version(old.account, old.id),
            cause=cause,
            now=now,
            invalid_at=valid_from or now,
            writer=writer,
        )
    new_id = insert_version(
        conn,
        now=now,
        valid_from=valid_from or now,
        created_at=old.created_at if old else now,
        **new,
    )
    if old is not None:
        conn.execute(
            facts.update().where(the_version(old.account, old.id)).values(replaced_by_id=new_id)
        )
    return new_id


def same_key(fact: Fact) -> sa.ColumnElement[bool]:
    """Every version under ``fact``'s key in its namespace, ended ones too."""
    where = [facts.c.account == fact.account, facts.c.agent == fact.agent, facts.c.key == fact.key]
    if fact.effective_scope is Scope.ACCOUNT:
        return sa.and_(*where, facts.c.scope == ACCOUNT)
    personal = sa.text(personal_row("korely_facts"))
    return sa.and_(*where, facts.c.owner_key == owner_key(fact.owner), personal)


def versions_where(conn: Connection, selected: sa.ColumnElement[bool]) -> list[Fact]:
    """The versions ``selected`` selects."""
    return [Fact.from_row(r) for r in conn.execute(sa.select(facts).where(selected))]
