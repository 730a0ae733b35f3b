"""Memories on a connection: free text kept for recall, scoped like a user fact."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import _database, _versions
from ._identity import EndCause, Identity
from ._schema import facts, memories, personal_row
from ._types import Memory

RECENT = 200  # memories looked at for one block, newest first


def _mine(who: Identity) -> list[sa.ColumnElement[bool]]:
    return [
        memories.c.account == who.account,
        memories.c.agent == who.agent,
        memories.c.owner_key == _versions.owner_key(who.user),
    ]


def add(conn: Connection, who: Identity, content: str, now: dt.datetime) -> Memory:
    """Keep ``content`` as a memory of ``who``."""
    memory_id = conn.execute(
        memories.insert()
        .values(
            account=who.account,
            owner=who.user,
            owner_key=_versions.owner_key(who.user),
            agent=who.agent,
            content=content,
            created_at=now,
        )
        .returning(memories.c.id)
    ).scalar_one()
    return Memory(memory_id, who.account, who.user, who.agent, content, now)


def get(
    conn: Connection, who: Identity, memory_id: int, *, exclusive: bool = False
) -> Memory | None:
    """The memory of ``who`` with this id, held until the transaction ends.

    Held shared by a writer that reads a fact from it, alone by ``forget``: a
    fact read from a memory never outlives the memory's forgetting.
    """
    select = sa.select(memories).where(memories.c.id == memory_id, *_mine(who))
    select = _database.lock_rows(select, conn.dialect.name, exclusive=exclusive)
    row = conn.execute(select).first()
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
    """The newest memories of ``who``, newest first."""
    params = {
        "account": who.account,
        "agent": who.agent,
        "owner_key": _versions.owner_key(who.user),
        "limit": limit,
    }
    return [Memory.from_row(r) for r in conn.execute(_RECENT, params)]


def forget(conn: Connection, memory: Memory, now: dt.datetime) -> int:
    """Delete the memory, end the personal facts read from it and remove their words.

    Confirmed account facts read from it stay: they are the account's, and only
    an administrator may end one. They lose their link to the memory. Returns
    how many facts ended.
    """
    read_from_it = facts.c.source_memory_id == memory.id
    personal = sa.and_(read_from_it, sa.text(personal_row("korely_facts")))
    ended = _versions.end_versions(conn, personal, cause=EndCause.FORGOTTEN, now=now)
    _versions.erase_words(conn, personal)
    conn.execute(memories.delete().where(memories.c.id == memory.id))  # links go with it
    return len(ended)
