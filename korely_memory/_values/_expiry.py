"""Expiry, a property of the read: a version recorded with ``valid_until`` is true until then.

Nothing runs in the background. A read at a moment at or after a version's
``valid_until`` leaves it out, or sees it ended then (``is_expired``); a write
under its key, or ``trim``, ends the row itself (``_versions.end_expired``).

Each rule is stated once in Python, over a `Fact`, and once in SQL, over the columns of the
table (or alias) a statement reads it from, side by side: ``is_live`` and ``live``,
``is_expired`` and ``expired``, ``is_due`` and ``due``. Every read and write asks these, so
what the database leaves out and what Python leaves out cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from ._identity import EndCause
from ._types import Fact

SqlMoment = Any
"""A moment as SQL: a bound parameter, a column or the server's clock."""


# -- an end: a version's valid_until, an item's expires_at ---------------------------------


def is_due(end: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether ``end`` came by ``now``: there is one, and it is not after ``now``."""
    return end is not None and end <= now


def due(end: Any, now: SqlMoment) -> sa.ColumnElement[bool]:
    """SQL of ``is_due``: the column ``end`` holds a moment, not after ``now``."""
    return sa.and_(end.is_not(None), end <= now)


def to_come(end: Any, now: SqlMoment) -> sa.ColumnElement[bool]:
    """SQL of ``not is_due``: the column ``end`` holds no moment, or one after ``now``."""
    return sa.or_(end.is_(None), end > now)


# -- a version -------------------------------------------------------------------------------


def is_live(fact: Fact, now: dt.datetime) -> bool:
    """Whether ``fact`` is true at ``now``: the store holds it and it has not expired."""
    return fact.is_current and not is_due(fact.valid_until, now)


def live(table: Any, now: SqlMoment) -> sa.ColumnElement[bool]:
    """SQL of ``is_live``, for the version a row of ``table`` (facts, or an alias) holds: not
    ended, and its ``valid_until`` still to come.

    With the predicate of the row's namespace (``_schema.personal_row``, ``account_row``) it
    holds every term of the partial unique index of that namespace's true facts, as SQLite
    needs to use it: ``ended_recorded_at IS NULL`` as the index writes it.
    """
    return sa.and_(table.c.ended_recorded_at.is_(None), to_come(table.c.valid_until, now))


def is_expired(fact: Fact, now: dt.datetime) -> bool:
    """Whether ``fact`` is held as true but its ``valid_until`` has come by ``now``."""
    return fact.is_current and is_due(fact.valid_until, now)


def expired(table: Any, now: SqlMoment) -> sa.ColumnElement[bool]:
    """SQL of ``is_expired``, for the version a row of ``table`` holds.

    Its first two terms are those of the partial index of the true facts that expire
    (``ix_korely_facts_expiring``), in its order: the index finds these rows without reading
    the others.
    """
    until = table.c.valid_until
    return sa.and_(until.is_not(None), table.c.ended_recorded_at.is_(None), until <= now)


def seen_at(fact: Fact, now: dt.datetime) -> Fact:
    """``fact`` as a read at ``now`` sees it: an expired version, not yet ended by a write,
    reads as ended then (``expired``), as ``end_expired`` will end it."""
    if not is_expired(fact, now):
        return fact
    assert fact.valid_until is not None
    return dataclasses.replace(
        fact,
        ended_recorded_at=max(fact.valid_until, fact.recorded_at),
        invalid_at=fact.valid_until,
        end_cause=EndCause.EXPIRED,
    )


def all_seen_at(found: Iterable[Fact], now: dt.datetime) -> list[Fact]:
    """Every version of ``found`` as a read at ``now`` sees it."""
    return [seen_at(f, now) for f in found]
