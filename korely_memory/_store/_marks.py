"""Read marks: the one module that writes ``korely_marks``.

A mark says that one reader was handed one fact version. When that version
ends, its marks are stamped ``ended_at`` in the same transaction; the reader's
next block tells the change and spends the mark (``told_at``), or holds it
for a while (``hold_token``, ``held_until``) until the read is acknowledged.

A mark is written after the block it belongs to was read from a snapshot, so
the version may have ended in between: ``hand_over`` takes the mark's end
from the fact row itself, in the statement that inserts it, and on
PostgreSQL holds that row (``FOR SHARE``) so that a writer ending it waits for
the mark to be committed and then stamps it. Either way the change is told.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection

from .._db import _database
from .._db._schema import facts, marks
from .._values import _expiry
from .._values._identity import Identity, Scope
from .._values._types import Fact

LOOK_AT = 200  # pending changes read for one block
LIFETIME = dt.timedelta(days=90)  # a mark goes this long after its last read


def hour(moment: dt.datetime) -> dt.datetime:
    """Last-read times are kept to the hour, so a steady read has nothing to write."""
    return moment.replace(minute=0, second=0, microsecond=0)


def subject_of(fact: Fact) -> str:
    """The user a fact is about, '' for account facts and agent-team memory."""
    return "" if fact.effective_scope is Scope.ACCOUNT else (fact.owner or "")


@dataclass(frozen=True)
class Hold:
    """A read's hold on the changes it shows: its token, and until when it keeps them."""

    token: str
    until: dt.datetime


# -- reading marks (in the read's snapshot, no locks) ----------------------------------


def _pending_statement(*, keyed: bool) -> sa.Select[Any]:
    statement = (
        sa.select(facts)
        .join(marks, sa.and_(marks.c.fact_id == facts.c.id, marks.c.account == facts.c.account))
        .where(
            facts.c.account == sa.bindparam("account"),
            marks.c.account == sa.bindparam("account"),
            marks.c.reader == sa.bindparam("reader"),
            marks.c.subject.in_(sa.bindparam("subjects", expanding=True)),
            # As in the partial index ix_korely_marks_pending.
            sa.text("korely_marks.ended_at IS NOT NULL AND korely_marks.told_at IS NULL"),
            # A fact that expires is marked with its end when handed over: pending once it comes.
            marks.c.ended_at <= sa.bindparam("now"),
            sa.or_(
                marks.c.held_until.is_(None),
                marks.c.held_until <= sa.bindparam("now"),
                marks.c.hold_token == sa.bindparam("renewing"),
            ),
        )
        .order_by(marks.c.ended_at.desc(), facts.c.id.desc())
        .limit(LOOK_AT)
    )
    if keyed:
        statement = statement.where(facts.c.key.in_(sa.bindparam("keys", expanding=True)))
    return statement


_PENDING = _pending_statement(keyed=False)
_PENDING_UNDER = _pending_statement(keyed=True)


def pending(
    conn: Connection,
    who: Identity,
    reader: str,
    now: dt.datetime,
    renewing: str | None = None,
    *,
    keys: Sequence[str] | None = None,
) -> list[Fact]:
    """Versions ``reader`` was handed, about this block's user or about no user, that ended since
    (under these ``keys`` only, when given).

    Changes another read holds are left out until their hold runs out, except those held
    under ``renewing``, the token of the earlier block a read renews.
    """
    subjects = sorted({who.user or "", ""})
    params: dict[str, Any] = {
        "account": who.account,
        "reader": reader,
        "subjects": subjects,
        "now": now,
        "renewing": renewing or "",
    }
    if keys is not None:
        params["keys"] = sorted(set(keys))
    rows = conn.execute(_PENDING if keys is None else _PENDING_UNDER, params).all()
    return [_expiry.seen_at(Fact.from_row(r), now) for r in rows]


_LAST_READ = sa.select(marks.c.fact_id, marks.c.last_read_at).where(
    marks.c.account == sa.bindparam("account"),
    marks.c.reader == sa.bindparam("reader"),
    marks.c.fact_id.in_(sa.bindparam("ids", expanding=True)),
)


def last_reads(
    conn: Connection, account: str, reader: str, fact_ids: Iterable[int]
) -> dict[int, dt.datetime]:
    """When ``reader`` last read each of these versions, for those it has a mark of."""
    ids = sorted(set(fact_ids))
    if not ids:
        return {}
    rows = conn.execute(_LAST_READ, {"account": account, "reader": reader, "ids": ids})
    moments: dict[int, dt.datetime] = {}
    for fact_id, moment in rows:  # a Row is typed as a tuple in SQLAlchemy 2.1, not in 2.0
        moments[fact_id] = moment
    return moments


def lock_subjects(conn: Connection, account: str, reader: str, subjects: Iterable[str]) -> None:
    """One transaction at a time writes one reader's marks about one subject: taken by a read's
    mark step before it decides what to claim, so that it decides from the marks as every
    earlier one left them. (SQLite's writers run one at a time already.)"""
    keys = [("marks", account, reader, subject) for subject in sorted(set(subjects))]
    _database.lock_all(conn, keys, shared=False)


def unsettled() -> sa.Exists:
    """Whether ``reader`` has a mark, about this block's user or about no user, whose version
    ended and that is not told yet (pending, held, or whose expiry is to come): bound as
    ``pending`` binds."""
    return sa.exists().where(
        marks.c.account == sa.bindparam("account"),
        marks.c.reader == sa.bindparam("reader"),
        marks.c.subject.in_(sa.bindparam("subjects", expanding=True)),
        sa.text("korely_marks.ended_at IS NOT NULL AND korely_marks.told_at IS NULL"),
    )


def marked_columns(dialect: str) -> list[sa.ScalarSelect[Any]]:
    """How many of the versions ``ids`` ``reader`` has a mark of, and the oldest last read of
    those: two columns of another statement. The ids are one parameter (``ids_param``), so
    that a block of hundreds of facts sends one statement, planned once."""
    if dialect == "postgresql":
        listed = marks.c.fact_id == sa.any_(sa.bindparam("ids", type_=ARRAY(sa.BigInteger)))
    else:
        listed = marks.c.fact_id.in_(
            sa.select(sa.literal_column("value")).select_from(
                sa.func.json_each(sa.bindparam("ids", type_=sa.String))
            )
        )
    of_them = (
        marks.c.account == sa.bindparam("account"),
        marks.c.reader == sa.bindparam("reader"),
        listed,
    )
    return [
        sa.select(sa.func.count()).select_from(marks).where(*of_them).scalar_subquery(),
        sa.select(sa.func.min(marks.c.last_read_at)).where(*of_them).scalar_subquery(),
    ]


def ids_param(dialect: str, ids: Sequence[int]) -> Any:
    """``ids`` as ``marked_columns`` binds them: an array, or a JSON list (SQLite)."""
    return list(ids) if dialect == "postgresql" else json.dumps(list(ids))


# -- writing marks (in a short transaction of their own, or in a writer's) -------------


@functools.cache
def _hand_over_statement(dialect: str) -> sa.Insert:
    source = sa.select(
        sa.bindparam("account", type_=marks.c.account.type),
        sa.bindparam("reader", type_=marks.c.reader.type),
        facts.c.id,
        sa.bindparam("subject", type_=marks.c.subject.type),
        sa.bindparam("first", type_=marks.c.first_read_at.type),
        sa.bindparam("last", type_=marks.c.last_read_at.type),
        # A version that ended is marked ended; one that expires, with its expiry to come.
        sa.func.coalesce(facts.c.ended_recorded_at, facts.c.valid_until),
    ).where(facts.c.account == sa.bindparam("account"), facts.c.id == sa.bindparam("id"))
    source = _database.lock_rows(source, dialect)
    insert: sa.Insert = _database.insert_ignoring_duplicates_for(dialect, marks)
    return insert.from_select(
        ["account", "reader", "fact_id", "subject", "first_read_at", "last_read_at", "ended_at"],
        source,
    )


def hand_over(
    conn: Connection, account: str, reader: str, handed: Sequence[Fact], now: dt.datetime
) -> None:
    """Mark ``handed`` as read by ``reader``, unless marked already.

    A version that ended since it was read (or was erased) is marked as ended
    (or not at all), from its row, in the same statement.
    """
    if not handed:
        return
    statement = _hand_over_statement(conn.dialect.name)
    rows = {
        f.id: {
            "account": account,
            "reader": reader,
            "id": f.id,
            "subject": subject_of(f),
            "first": now,
            "last": hour(now),
        }
        for f in handed
    }
    conn.execute(statement, [rows[i] for i in sorted(rows)])  # in id order: no circular waits


def refresh(
    conn: Connection, account: str, reader: str, fact_ids: Sequence[int], now: dt.datetime
) -> None:
    """Move the last-read time of these marks to this hour (the 90-day clock starts again)."""
    if not fact_ids:
        return
    conn.execute(
        marks.update()
        .where(
            marks.c.account == account,
            marks.c.reader == reader,
            marks.c.fact_id.in_(sorted(fact_ids)),
        )
        .values(last_read_at=hour(now))
    )


def _ended_statement() -> sa.Select[Any]:
    f, nxt, held = facts.alias("f"), facts.alias("nxt"), marks.alias("held")
    started = (
        sa.select(f.c.id.label("start"), f.c.replaced_by_id.label("id"))
        .where(
            f.c.account == sa.bindparam("account"),
            f.c.id.in_(sa.bindparam("ids", expanding=True)),
            f.c.ended_recorded_at.is_not(None),
        )
        .cte("later", recursive=True)
    )
    later = started.union(
        sa.select(started.c.start, nxt.c.replaced_by_id).where(
            nxt.c.account == sa.bindparam("account"),
            nxt.c.id == started.c.id,
            nxt.c.replaced_by_id.is_not(None),
        )
    )
    return (
        sa.select(later.c.start, sa.func.count(held.c.fact_id))
        .select_from(
            later.outerjoin(
                held,
                sa.and_(
                    held.c.account == sa.bindparam("account"),
                    held.c.reader == sa.bindparam("reader"),
                    held.c.fact_id == later.c.id,
                    held.c.first_read_at != sa.bindparam("now"),  # not this read's own
                ),
            )
        )
        .group_by(later.c.start)
    )


_ENDED = _ended_statement()


def ended_among(
    conn: Connection, account: str, reader: str, handed: Sequence[Fact], now: dt.datetime
) -> tuple[list[int], list[int]]:
    """Of the versions a read has just handed to ``reader``, those that had ended already (its
    snapshot was older than the write that ended them), and of those, the ones this read is the
    first to hand over while the reader holds a later version from another read.

    Another read, from a newer snapshot, moved the reader past those: it never held them before
    this read's stale block, so their end is no news to it. A version the reader held before
    (handed by an earlier read) keeps its change to be told, whatever else it was shown since.
    What has not ended cannot end before the read commits (its marks hold the rows).
    """
    if not handed:
        return [], []
    ids = sorted({f.id for f in handed})
    params = {"account": account, "reader": reader, "ids": ids, "now": now}
    rows = conn.execute(_ENDED, params).all()
    ended = sorted(int(r[0]) for r in rows)
    passed = sorted(int(r[0]) for r in rows if r[1])
    if passed:
        first = conn.execute(
            sa.select(marks.c.fact_id).where(
                marks.c.account == account,
                marks.c.reader == reader,
                marks.c.fact_id.in_(passed),
                marks.c.first_read_at == now,
            )
        )
        mine = {int(r[0]) for r in first}
        passed = [i for i in passed if i in mine]
    return ended, passed


def claim(
    conn: Connection,
    account: str,
    reader: str,
    fact_ids: Sequence[int],
    now: dt.datetime,
    hold: Hold | None = None,
) -> set[int]:
    """Take these pending marks for one read; returns those it got.

    A compare-and-set: a mark already told, or held by another read whose hold
    has not run out, is not taken, so two reads never both tell one change.
    With ``hold``, the marks are held instead of spent; marks held under its token
    already (a block renewed) are held again, until its new end.
    """
    if not fact_ids:
        return set()
    free = [marks.c.held_until.is_(None), marks.c.held_until <= now]
    if hold is None:
        values: dict[str, Any] = {"told_at": now}
    else:
        values = {"hold_token": hold.token, "held_until": hold.until}
        free.append(marks.c.hold_token == hold.token)
    rows = conn.execute(
        marks.update()
        .where(
            marks.c.account == account,
            marks.c.reader == reader,
            marks.c.fact_id.in_(sorted(fact_ids)),
            marks.c.told_at.is_(None),
            sa.or_(*free),
        )
        .values(**values)
        .returning(marks.c.fact_id)
    )
    return {r[0] for r in rows}


@dataclass(frozen=True)
class Receipt:
    """What a held block's receipt says: the hold's token, the marks it showed, and their
    account (None in a receipt made before receipts named it)."""

    token: str
    ids: list[int]
    account: str | None


def acknowledge(conn: Connection, held: Receipt, now: dt.datetime) -> int:
    """Spend the marks a read held; returns how many were still held by it."""
    return _let_go(conn, held, told_at=now)


def release(conn: Connection, held: Receipt) -> int:
    """Let go of the marks a read held: the next read tells them again."""
    return _let_go(conn, held)


def _let_go(conn: Connection, held: Receipt, **also: Any) -> int:
    """End the hold of ``held`` on its marks (``also``: and set these columns)."""
    if not held.ids:
        return 0
    of_account = [] if held.account is None else [marks.c.account == held.account]
    return conn.execute(
        marks.update()
        .where(
            *of_account,
            marks.c.hold_token == held.token,
            marks.c.fact_id.in_(sorted(held.ids)),
            marks.c.told_at.is_(None),
        )
        .values(hold_token=None, held_until=None, **also)
    ).rowcount


def versions_ended(
    conn: Connection,
    account: str,
    fact_ids: Sequence[int],
    now: dt.datetime,
    writer: tuple[str, str] | None = None,
) -> None:
    """These versions of ``account`` ended: every reader handed one has a change to be told.

    ``writer`` (account, reader) is the reader that made the change: it is not
    told its own change.
    """
    if not fact_ids:
        return
    ids = sorted(fact_ids)
    conn.execute(
        marks.update()
        .where(
            marks.c.account == account,
            marks.c.fact_id.in_(ids),
            # An expiry still to come gives way to the end that came first.
            sa.or_(marks.c.ended_at.is_(None), marks.c.ended_at > now),
        )
        .values(ended_at=now)
    )
    if writer is not None and writer[0] == account:
        reader = writer[1]
        conn.execute(
            marks.update()
            .where(
                marks.c.account == account,
                marks.c.reader == reader,
                marks.c.fact_id.in_(ids),
                marks.c.told_at.is_(None),
            )
            .values(told_at=now, hold_token=None, held_until=None)
        )


# -- deleting marks ---------------------------------------------------------------------


def delete_for_person(
    conn: Connection, account: str, user: str, their_versions: sa.Select[tuple[int]]
) -> int:
    """Every mark about ``user``, read under a reader of that name, or of one of their versions."""
    return conn.execute(
        marks.delete().where(
            marks.c.account == account,
            sa.or_(
                marks.c.subject == user,
                marks.c.reader == user,
                marks.c.fact_id.in_(their_versions),
            ),
        )
    ).rowcount


def delete_reader(conn: Connection, account: str, reader: str) -> int:
    """Every mark kept for ``reader`` in ``account``."""
    return conn.execute(
        marks.delete().where(marks.c.account == account, marks.c.reader == reader)
    ).rowcount


def trim(conn: Connection, now: dt.datetime) -> tuple[int, int]:
    """Marks whose change was told, and marks unread for ``LIFETIME``: (expired, told)."""
    told = conn.execute(marks.delete().where(marks.c.told_at.is_not(None))).rowcount
    expired = conn.execute(marks.delete().where(marks.c.last_read_at < now - LIFETIME)).rowcount
    return expired, told
