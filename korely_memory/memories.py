"""Memories on a connection: free text kept for recall, scoped like a user fact."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import index
from .facts import owner_key
from .identity import Identity
from .models import facts, marks, memories
from .types import Memory

RECENT = 200  # memories looked at for one block, newest first


def _mine(who: Identity) -> list[sa.ColumnElement[bool]]:
    return [
        memories.c.account == who.account,
        memories.c.agent == who.agent,
        memories.c.owner_key == owner_key(who.user),
    ]


def add(conn: Connection, who: Identity, content: str, now: dt.datetime) -> Memory:
    memory_id = conn.execute(
        memories.insert()
        .values(
            account=who.account,
            owner=who.user,
            owner_key=owner_key(who.user),
            agent=who.agent,
            content=content,
            created_at=now,
        )
        .returning(memories.c.id)
    ).scalar_one()
    return Memory(memory_id, who.account, who.user, who.agent, content, now)


def get(conn: Connection, who: Identity, memory_id: int) -> Memory | None:
    row = conn.execute(sa.select(memories).where(memories.c.id == memory_id, *_mine(who))).first()
    return Memory.from_row(row) if row else None


_RECENT = (
    sa.select(memories)
    .where(
        memories.c.account == sa.bindparam("account"),
        memories.c.agent == sa.bindparam("agent"),
        memories.c.owner_key == sa.bindparam("owner_key"),
    )
    .order_by(memories.c.created_at.desc(), memories.c.id.desc())
    .limit(sa.bindparam("limit"))
)


def recent(conn: Connection, who: Identity, limit: int = RECENT) -> list[Memory]:
    rows = conn.execute(
        _RECENT,
        {
            "account": who.account,
            "agent": who.agent,
            "owner_key": owner_key(who.user),
            "limit": limit,
        },
    )
    return [Memory.from_row(r) for r in rows]


def forget(conn: Connection, memory: Memory, now: dt.datetime) -> int:
    """Remove the memory's text and end the facts read from it; their words go too. Returns facts ended."""
    read_from_it = sa.select(facts.c.id).where(
        facts.c.source_memory_id == memory.id, facts.c.ended_recorded_at.is_(None)
    )
    conn.execute(
        marks.update()
        .where(marks.c.fact_id.in_(read_from_it), marks.c.ended_at.is_(None))
        .values(ended_at=now)
    )
    index.ended(conn, index.true_versions(conn, [facts.c.source_memory_id == memory.id]))
    ended = conn.execute(
        facts.update()
        .where(facts.c.source_memory_id == memory.id, facts.c.ended_recorded_at.is_(None))
        .values(ended_recorded_at=now, invalid_at=now, end_cause="forgotten")
    ).rowcount
    conn.execute(facts.update().where(facts.c.source_memory_id == memory.id).values(content=""))
    conn.execute(memories.delete().where(memories.c.id == memory.id))
    return ended
