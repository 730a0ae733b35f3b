"""A person's facts as the administrator's page draws them: each key's versions on a timeline.

Pure: it takes the versions a page shows (of ``get_facts(..., include_invalidated=True)``),
every version of their keys, the read marks of the person's export and the time, and returns
values the template shows; no I/O. A page may show part of a key's versions: its drawing spans
those, and the key's heading still says what holds now.

A version's bar runs from ``valid_from`` to when it stopped being true (``invalid_at``), or to
its ``valid_until``, or to now; a tick marks when the store recorded it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from korely_memory import EndCause, Fact, MarkRecord, Scope

__all__ = ["WIDTH", "Bar", "KeyHistory", "Told", "Version", "histories"]

WIDTH = 1000
"""The drawing's width in its own units (the page stretches it)."""
ROW = 14
"""A version's row height, in the drawing's units."""

ENDED = {
    EndCause.STATED: "replaced: something new was stated under its key",
    EndCause.CORRECTED: "corrected",
    EndCause.FORGOTTEN: "forgotten (or the memory it was read from was)",
    EndCause.READ_FROM_MEMORY: "replaced by what was read from a memory",
    EndCause.REJECTED: "rejected by an administrator",
    EndCause.ERASED: "forgotten, its words erased",
    EndCause.EXPIRED: "expired: its valid-until came",
}
SCOPES = {
    Scope.USER: "the person's",
    Scope.ACCOUNT_PROPOSED: "proposed for the account",
    Scope.ACCOUNT: "the account's",
    Scope.ACCOUNT_REJECTED: "rejected for the account",
}


@dataclass(frozen=True)
class Told:
    """What one reader was handed of a version (a read mark)."""

    reader: str
    first_read_at: dt.datetime
    last_read_at: dt.datetime
    told_at: dt.datetime | None
    held_until: dt.datetime | None


@dataclass(frozen=True)
class Bar:
    """A version's place in its key's drawing, in the drawing's units."""

    x: float
    width: float
    y: float
    recorded_x: float
    state: str


@dataclass(frozen=True)
class Version:
    """One version of a key, with what the page says of it."""

    fact: Fact
    state: str
    """current, proposed, ended, rejected or erased: the bar's colour."""
    scope: str
    true_until: dt.datetime | None
    """When it stopped (or stops) being true; None: still true, with no end recorded."""
    ended: str | None
    """Why it ended, in words; None while it holds."""
    told: tuple[Told, ...]
    bar: Bar
    decision: str | None
    """``confirmed`` or ``rejected``, for an account fact an administrator reviewed."""


@dataclass(frozen=True)
class KeyHistory:
    """The versions of a key a page shows, oldest recorded first, and its drawing's extent."""

    key: str
    versions: tuple[Version, ...]
    start: dt.datetime
    end: dt.datetime
    height: int
    now: Fact | None
    """The version the store holds for the key now, shown on this page or not."""
    first: int
    """The place of the first version shown among all of the key's, by id, from 1."""
    count: int
    """How many versions the key has in all."""

    @property
    def last(self) -> int:
        """The place of the last version shown among the key's."""
        return self.first + len(self.versions) - 1


def histories(
    facts: Iterable[Fact],
    marks: Sequence[MarkRecord],
    now: dt.datetime,
    every: Iterable[Fact] | None = None,
) -> list[KeyHistory]:
    """Each key's history, by key; its versions oldest recorded first.

    Args:
        facts: The versions to draw (a page of the person's).
        marks: The read marks of the person's export.
        now: The time the drawing ends at, at the latest.
        every: Every version of the keys drawn, of which ``facts`` are some (default:
            ``facts``): what holds now under each, and where the ones drawn fall among its.
    """
    by_key: dict[str, list[Fact]] = {}
    for fact in facts:
        by_key.setdefault(fact.key, []).append(fact)
    all_of: dict[str, list[Fact]] = {}
    for fact in facts if every is None else every:
        if fact.key in by_key:
            all_of.setdefault(fact.key, []).append(fact)
    shown = {f.id for f in facts} if every is not None else None
    told: dict[int, list[Told]] = {}
    for mark in sorted(marks, key=lambda m: (m.first_read_at, m.reader)):
        if shown is None or mark.fact_id in shown:
            told.setdefault(mark.fact_id, []).append(
                Told(
                    mark.reader,
                    mark.first_read_at,
                    mark.last_read_at,
                    mark.told_at,
                    mark.held_until,
                )
            )
    return [
        _history(key, sorted(versions, key=_order), sorted(all_of[key], key=_order), told, now)
        for key, versions in sorted(by_key.items())
    ]


def _order(fact: Fact) -> tuple[dt.datetime, int]:
    return fact.recorded_at, fact.id


def _history(
    key: str,
    versions: list[Fact],
    every: list[Fact],
    told: dict[int, list[Told]],
    now: dt.datetime,
) -> KeyHistory:
    ends = [_true_until(f) for f in versions]
    moments = [m for f in versions for m in (f.valid_from, f.recorded_at)]
    start = min(moments)
    end = max([now, *moments, *(e for e in ends if e is not None)])
    span = (end - start).total_seconds() or 1.0

    def x(moment: dt.datetime) -> float:
        return round((moment - start).total_seconds() / span * WIDTH, 1)

    drawn = []
    for row, (fact, until) in enumerate(zip(versions, ends, strict=True)):
        state = _state(fact)
        left = x(fact.valid_from)
        right = x(until if until is not None else end)
        bar = Bar(left, max(right - left, 3.0), row * ROW + 2, x(fact.recorded_at), state)
        drawn.append(
            Version(
                fact=fact,
                state=state,
                scope=SCOPES[fact.effective_scope],
                true_until=until,
                ended=ENDED[fact.end_cause] if fact.end_cause is not None else None,
                told=tuple(told.get(fact.id, ())),
                bar=bar,
                decision=_decision(fact),
            )
        )
    holding = next((f for f in reversed(every) if f.is_current), None)
    # A page takes a key's versions by id (`/v1/facts`' order): those shown are a run of them.
    oldest = min(f.id for f in versions)
    first = 1 + sum(1 for f in every if f.id < oldest)
    return KeyHistory(
        key, tuple(drawn), start, end, len(drawn) * ROW + 4, holding, first, len(every)
    )


def _decision(fact: Fact) -> str | None:
    # The reviewer of an account fact is kept in confirmed_by whichever way they decided.
    if fact.confirmed_by is None:
        return None
    return "rejected" if fact.effective_scope is Scope.ACCOUNT_REJECTED else "confirmed"


def _true_until(fact: Fact) -> dt.datetime | None:
    if fact.invalid_at is not None:
        return fact.invalid_at
    return fact.valid_until


def _state(fact: Fact) -> str:
    if fact.erased:
        return "erased"
    if fact.effective_scope is Scope.ACCOUNT_REJECTED:
        return "rejected"
    if not fact.is_current:
        return "ended"
    if fact.effective_scope is Scope.ACCOUNT_PROPOSED:
        return "proposed"
    return "current"
