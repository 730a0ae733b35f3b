"""A person's data as plain values: what ``MemoryEngine.export_user`` returns.

It covers what erasure deletes or makes anonymous, so that what a person is
handed and what is removed on their request are the same set of rows:

- ``facts``: every version in their own namespaces, under every agent
  definition (user facts, with ``scope`` ``user``);
- ``proposals``: their account facts waiting for review or refused
  (``account_proposed``, ``account_rejected``), every version;
- ``account_facts``: versions of confirmed account facts they stated or
  confirmed;
- ``memories``: the free text kept about them;
- ``marks``: which reader was handed which version about them (or read under
  a reader named after them), and when; no text;
- ``administrator``: whether the engine's own list makes them an administrator;
- ``notes``: what each turn of their conversations was shown (``conversation=``), as kept.
  ``import_user`` does not restore them: they name versions by the ids the export had.
- ``items``: the items of LangGraph stores (``KorelyStore``) in their namespaces, values whole,
  under every agent definition. ``import_user`` does not restore them either (their facts are
  restored; a store puts its items again).
- ``pending``: the changes to their facts captured and held for their approval
  (``PendingFact``), under every agent definition; ``import_user`` holds them again.

A version whose words were removed (forgotten with ``erase=True``) is there
with empty ``content``. ``to_dict`` gives the same as JSON-ready values: times
in ISO 8601 (UTC), scopes and causes as their names.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db._schema import facts, marks, memories, personal_row
from .._values import _expiry
from .._values._identity import Scope
from .._values._types import Fact, Memory, Note, PendingFact, StoreItem
from . import _items, _notes, _pending, _review

FORMAT = "korely-user-export/1"
_PERSONAL = sa.text(personal_row("korely_facts"))
_PROPOSED = {Scope.ACCOUNT_PROPOSED, Scope.ACCOUNT_REJECTED}


@dataclass(frozen=True)
class MarkRecord:
    """That one reader was handed one fact version, and what became of the change since.

    Attributes:
        reader: The reading agent's name.
        fact_id: The version handed over.
        subject: The user the version is about ('' for account facts).
        first_read_at: When the reader was first handed it, exactly.
        last_read_at: The start of the hour of its latest read (a read in the same hour writes
            nothing): a mark read once shows one up to an hour before ``first_read_at``.
        ended_at: When the version ended, if it has.
        told_at: When the reader was told of that.
        held_until: Until when a read holds the change untold.
    """

    reader: str
    fact_id: int
    subject: str
    first_read_at: dt.datetime
    last_read_at: dt.datetime
    ended_at: dt.datetime | None
    told_at: dt.datetime | None
    held_until: dt.datetime | None


@dataclass(frozen=True)
class UserExport:
    """Everything the memory holds about one person in one account (see the module's text)."""

    account: str
    user: str
    exported_at: dt.datetime
    facts: tuple[Fact, ...] = ()
    proposals: tuple[Fact, ...] = ()
    account_facts: tuple[Fact, ...] = ()
    memories: tuple[Memory, ...] = ()
    marks: tuple[MarkRecord, ...] = ()
    administrator: bool = False
    notes: tuple[Note, ...] = ()
    items: tuple[StoreItem, ...] = ()
    pending: tuple[PendingFact, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The export as JSON-ready values, headed by its ``format``."""
        body = plain(self)
        assert isinstance(body, dict)
        return {"format": FORMAT, **body}


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses as dicts, times in ISO 8601, enums by name."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not f.name.startswith("_")
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def gather(conn: Connection, account: str, user: str, now: dt.datetime) -> UserExport:
    """Read the export of ``user`` in ``account`` from the snapshot ``conn`` is in."""
    order = (facts.c.agent, facts.c.key, facts.c.recorded_at, facts.c.id)
    theirs = sa.and_(facts.c.account == account, facts.c.owner_key == user)
    # Each version as a read now sees it: one that expired has ended, as history says.
    personal = [
        _expiry.seen_at(Fact.from_row(r), now)
        for r in conn.execute(sa.select(facts).where(theirs, _PERSONAL).order_by(*order))
    ]
    shared = sa.and_(
        facts.c.account == account,
        facts.c.scope == Scope.ACCOUNT.value,
        sa.or_(facts.c.owner_key == user, facts.c.confirmed_by == user),
    )
    account_facts = [
        _expiry.seen_at(Fact.from_row(r), now)
        for r in conn.execute(sa.select(facts).where(shared).order_by(*order))
    ]
    kept = conn.execute(
        sa.select(memories)
        .where(memories.c.account == account, memories.c.owner_key == user)
        .order_by(memories.c.agent, memories.c.created_at, memories.c.id)
    )
    personal_ids = sa.select(facts.c.id).where(theirs, _PERSONAL)
    read = conn.execute(
        sa.select(marks)
        .where(
            marks.c.account == account,
            sa.or_(
                marks.c.subject == user,
                marks.c.reader == user,
                marks.c.fact_id.in_(personal_ids),
            ),
        )
        .order_by(marks.c.reader, marks.c.fact_id)
    )
    return UserExport(
        account=account,
        user=user,
        exported_at=now,
        facts=tuple(f for f in personal if f.effective_scope not in _PROPOSED),
        proposals=tuple(f for f in personal if f.effective_scope in _PROPOSED),
        account_facts=tuple(account_facts),
        memories=tuple(Memory.from_row(r) for r in kept),
        marks=tuple(_mark(r, now) for r in read),
        administrator=_review.listed(conn, account, user),
        notes=tuple(_notes.of_person(conn, account, user)),
        items=tuple(_items.of_person(conn, account, user)),
        pending=tuple(_pending.of_person(conn, account, user)),
    )


def _mark(row: Any, now: dt.datetime) -> MarkRecord:
    m = row._mapping
    ended = m["ended_at"]  # the expiry of a fact that has not come yet is no end
    ended = ended if ended is None or ended <= now else None
    return MarkRecord(
        reader=m["reader"],
        fact_id=m["fact_id"],
        subject=m["subject"],
        first_read_at=m["first_read_at"],
        last_read_at=m["last_read_at"],
        ended_at=ended,
        told_at=m["told_at"],
        held_until=m["held_until"],
    )
