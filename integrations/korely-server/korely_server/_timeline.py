"""A person's facts as the administrator's page draws them: each key's versions on a timeline.

Pure: it takes the versions (``get_facts(..., include_invalidated=True)``), the read marks of
the person's export and the time, and returns values the template shows; no I/O.

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


@dataclass(frozen=True)
class KeyHistory:
    """A key's versions, oldest recorded first, and its drawing's extent."""

    key: str
    versions: tuple[Version, ...]
    start: dt.datetime
    end: dt.datetime
    height: int

    def concerns(self, user: str) -> bool:
        """Whether a version of the key is ``user``'s own (stated, proposed or read about them),
        rather than only the account's facts they see."""
        return any(v.fact.owner == user for v in self.versions)

    @property
    def current(self) -> Version | None:
        """The version the store holds for the key now, if any."""
        return next((v for v in reversed(self.versions) if v.fact.is_current), None)


def histories(
    facts: Iterable[Fact], marks: Sequence[MarkRecord], now: dt.datetime
) -> list[KeyHistory]:
    """Each key's history, by key; its versions oldest recorded first.

    Args:
        facts: Every version of the person's facts.
        marks: The read marks of the person's export.
        now: The time the drawing ends at, at the latest.
    """
    by_key: dict[str, list[Fact]] = {}
    for fact in facts:
        by_key.setdefault(fact.key, []).append(fact)
    told: dict[int, list[Told]] = {}
    for mark in sorted(marks, key=lambda m: (m.first_read_at, m.reader)):
        told.setdefault(mark.fact_id, []).append(
            Told(mark.reader, mark.first_read_at, mark.last_read_at, mark.told_at, mark.held_until)
        )
    return [
        _history(key, sorted(versions, key=lambda f: (f.recorded_at, f.id)), told, now)
        for key, versions in sorted(by_key.items())
    ]


def _history(
    key: str, versions: list[Fact], told: dict[int, list[Told]], now: dt.datetime
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
            )
        )
    return KeyHistory(key, tuple(drawn), start, end, len(drawn) * ROW + 4)


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
