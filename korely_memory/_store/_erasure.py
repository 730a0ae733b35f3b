"""Erasing a person: every fact, version, memory, mark, note and change held for their approval,
in one transaction.

The transaction holds the person's lock alone (``lock_person``), so no write
about them commits while it runs. Confirmed account facts they stated are the
account's and stay, with the person's name replaced by a pseudonym. A row in
``korely_erasures`` records that an erasure happened, naming the person only
by that pseudonym.
"""

from __future__ import annotations

import datetime as dt
import secrets

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db._schema import account_row, admins, erasures, facts, memories, personal_row
from .._text._words import fact_text
from .._values._types import ErasureReport, TrimReport
from . import _items, _marks, _memories, _notes, _pending, _versions, _word_index
from ._vectors import forget_vectors

_PERSONAL = sa.text(personal_row("korely_facts"))
_ACCOUNT = sa.text(account_row("korely_facts"))


def erase(conn: Connection, account: str, user: str, now: dt.datetime) -> ErasureReport:
    """Delete everything about ``user`` in ``account``; their confirmed account facts stay."""
    _versions.lock_person(conn, account, user, erasing=True)
    pseudonym = f"erased-{secrets.token_hex(8)}"
    theirs = sa.and_(facts.c.account == account, facts.c.owner_key == user)
    personal = sa.select(facts.c.id).where(theirs, _PERSONAL)
    their_memories = sa.select(memories.c.id).where(
        memories.c.account == account, memories.c.owner_key == user
    )

    versions = _versions.by_ids(conn, account, conn.execute(personal).scalars().all())
    texts = [
        *(fact_text(f) for f in versions),
        *(f.content for f in versions),  # as a store's search embeds them
        *conn.execute(
            sa.select(memories.c.content).where(
                memories.c.account == account, memories.c.id.in_(their_memories)
            )
        )
        .scalars()
        .all(),
    ]
    forget_vectors(conn, account, texts)
    n_marks = _marks.delete_for_person(conn, account, user, personal)
    n_notes = _notes.erase(conn, account, user)
    n_items = _items.erase(conn, account, user)
    n_pending = _pending.erase(conn, account, user)
    # Account facts may point into the versions about to go.
    conn.execute(
        facts.update()
        .where(facts.c.account == account, facts.c.replaced_by_id.in_(personal))
        .values(replaced_by_id=None)
    )
    _word_index.erased(conn, account, user)
    n_facts = conn.execute(facts.delete().where(theirs, _PERSONAL)).rowcount
    n_memories = _memories.delete(conn, account, their_memories)
    kept = conn.execute(
        facts.update().where(theirs, _ACCOUNT).values(owner=pseudonym, owner_key=pseudonym)
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
        notes=n_notes,
        items=n_items,
        pending=n_pending,
    )


def trim(conn: Connection, now: dt.datetime, *, expire_by: dt.datetime) -> TrimReport:
    """Facts whose ``valid_until`` came by ``expire_by`` are ended as expired; marks go 90 days
    after their last read (as of ``now``), and once the change they waited for was told."""
    ended = _versions.end_all_expired(conn, expire_by)
    expired, told = _marks.trim(conn, now)
    return TrimReport(
        marks_expired=expired, marks_told=told, facts_expired=ended, notes=_notes.trim(conn, now)
    )
