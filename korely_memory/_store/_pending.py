"""Captured facts held for the person's approval: the one module that writes ``korely_pending``.

``capture(..., hold_for_owner=True)`` keeps here each change it draws about a person's own facts
(``hold``) instead of writing it; nothing reads these rows but the person's own list
(``waiting``), their approval or refusal (``take``), their export (``of_person``) and their
erasure (``erase``, ``erase_key``). Every statement names the account and the identity's
namespace, as every statement about one person does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db._schema import pending
from .._values._identity import Identity
from .._values._types import PendingFact
from . import _versions


def _theirs(who: Identity) -> list[sa.ColumnElement[bool]]:
    return [
        pending.c.account == who.account,
        pending.c.agent == who.agent,
        pending.c.owner_key == _versions.owner_key(who.user),
    ]


def _pending(row: Any) -> PendingFact:
    m = row._mapping
    return PendingFact(
        id=m["id"],
        account=m["account"],
        user=m["owner_key"] or None,
        agent=m["agent"],
        operation=m["operation"],
        key=m["key"],
        content=m["content"],
        captured_at=m["captured_at"],
        reader=m["reader"],
        drawn_against=m["drawn_against"],
    )


def hold(
    conn: Connection,
    who: Identity,
    operation: str,
    key: str,
    content: str | None,
    *,
    against: int | None,
    reader: str | None,
    now: dt.datetime,
) -> PendingFact:
    """Hold ``operation`` on ``key`` for ``who``'s approval, drawn against the version
    ``against`` (None: the key held none). The same change already held against the same
    version is returned as it is; any other held under the key is superseded (deleted): the
    newer capture is what the person is asked about. The caller holds the key's lock, so two
    captures never hold the same change twice."""
    theirs = [*_theirs(who), pending.c.key == key]
    same = conn.execute(
        sa.select(pending)
        .where(
            *theirs,
            pending.c.operation == operation,
            pending.c.content.is_(None) if content is None else pending.c.content == content,
            pending.c.drawn_against.is_(None)
            if against is None
            else pending.c.drawn_against == against,
        )
        .order_by(pending.c.id)
        .limit(1)
    ).first()
    if same is not None:
        return _pending(same)
    conn.execute(pending.delete().where(*theirs))
    values = {
        "account": who.account,
        "owner_key": _versions.owner_key(who.user),
        "agent": who.agent,
        "operation": operation,
        "key": key,
        "captured_at": now,
        "reader": reader,
        "content": content,
        "drawn_against": against,
    }
    new_id = conn.execute(pending.insert().values(values).returning(pending.c.id)).scalar_one()
    return PendingFact(
        new_id, who.account, who.user, who.agent, operation, key, content, now, reader, against
    )


def waiting(conn: Connection, who: Identity) -> list[PendingFact]:
    """What ``who`` holds for approval, oldest first."""
    rows = conn.execute(
        sa.select(pending).where(*_theirs(who)).order_by(pending.c.captured_at, pending.c.id)
    )
    return [_pending(r) for r in rows]


def take(conn: Connection, who: Identity, pending_id: int) -> PendingFact | None:
    """Remove ``who``'s held change ``pending_id``, and return it; None when ``who`` holds none by
    that id. On PostgreSQL a second transaction taking the same one waits for the first, and
    then finds it gone: only one of them gets it."""
    row = conn.execute(
        pending.delete().where(*_theirs(who), pending.c.id == pending_id).returning(*pending.c)
    ).first()
    return _pending(row) if row is not None else None


def erase_key(conn: Connection, who: Identity, key: str) -> int:
    """Delete what ``who`` holds for approval under ``key`` (its words are being erased)."""
    return int(conn.execute(pending.delete().where(*_theirs(who), pending.c.key == key)).rowcount)


def erase(conn: Connection, account: str, user: str) -> int:
    """Delete what ``user`` holds for approval, under every agent definition; and a reader of
    their name no longer names what another person holds. Returns how many were deleted."""
    conn.execute(
        pending.update()
        .where(pending.c.account == account, pending.c.reader == user)
        .values(reader=None)
    )
    return int(
        conn.execute(
            pending.delete().where(pending.c.account == account, pending.c.owner_key == user)
        ).rowcount
    )


def of_person(conn: Connection, account: str, user: str) -> list[PendingFact]:
    """What ``user`` holds for approval under every agent definition, by agent, oldest first."""
    rows = conn.execute(
        sa.select(pending)
        .where(pending.c.account == account, pending.c.owner_key == user)
        .order_by(pending.c.agent, pending.c.captured_at, pending.c.id)
    )
    return [_pending(r) for r in rows]


def holds_any(conn: Connection, account: str, user: str) -> bool:
    """Whether ``user`` holds anything for approval in ``account``."""
    found = sa.select(pending.c.id).where(pending.c.account == account, pending.c.owner_key == user)
    return conn.execute(found.limit(1)).first() is not None


def restore(conn: Connection, held: Sequence[PendingFact], versions: dict[int, int]) -> None:
    """Write ``held`` again (``import_user``), under new ids, captured when they were, drawn
    against the versions ``versions`` maps their exported ids to."""
    rows = [
        {
            "account": p.account,
            "owner_key": _versions.owner_key(p.user),
            "agent": p.agent,
            "operation": p.operation,
            "key": p.key,
            "captured_at": p.captured_at,
            "reader": p.reader,
            "content": p.content,
            "drawn_against": None if p.drawn_against is None else versions.get(p.drawn_against),
        }
        for p in sorted(held, key=lambda p: p.id)
    ]
    if rows:
        conn.execute(pending.insert(), rows)
