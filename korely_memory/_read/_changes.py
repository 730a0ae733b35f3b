"""From a reader's pending marks to the changes a block tells: chains followed, repeats folded.

A pending mark names a version the reader was handed that has ended. Its
chain of replacements (``replaced_by_id``) leads to what holds now: that is
the change (``was: OLD -> now: NEW``), or ``no longer true: OLD`` when nothing
this identity can see holds now. A version true again with the same words is
no change at all; two handed versions that lead to one fact now are told once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db._schema import facts
from .._store import _versions
from .._store._marks import subject_of
from .._values import _expiry
from .._values._identity import EndCause, Identity
from .._values._types import Change, Fact

EXPLICIT = frozenset(
    {
        EndCause.CORRECTED,
        EndCause.FORGOTTEN,
        EndCause.STATED,
        EndCause.ERASED,
        EndCause.EXPIRED,
    }
)
"""Causes told by default for memory with no end user: changes someone made on purpose (an
expiry was recorded on purpose with the fact)."""


@dataclass
class PendingChanges:
    """What a reader's pending marks come to."""

    changes: list[Change] = field(default_factory=list)
    """The changes to tell, newest first."""
    marks: dict[int, list[int]] = field(default_factory=dict)
    """For each change (by ``was.id``), every mark it settles when told."""
    no_change: list[int] = field(default_factory=list)
    """Marks settled without a word: the version is true again, in the same words."""
    versions: dict[int, Fact] = field(default_factory=dict)
    """The pending versions, by id."""

    def marks_settled_by(self, told: Sequence[Change]) -> list[int]:
        """The marks a block that tells ``told`` settles."""
        return [i for c in told for i in self.marks[c.was.id]] + self.no_change


def resolve(
    conn: Connection,
    who: Identity,
    ended: Sequence[Fact],
    kinds: frozenset[str] | None,
    at: dt.datetime,
) -> PendingChanges:
    """The changes behind ``ended`` (a reader's pending versions), in two statements in all;
    every version as a read at ``at`` sees it (one that expired by then has ended)."""
    out = PendingChanges(versions={f.id: f for f in ended})
    if not ended:
        return out
    chain = _chains(conn, who.account, [f.id for f in ended], at)
    current = _current_same_keys(conn, ended, at)
    by_end: dict[int, Change] = {}
    for was in ended:
        link = _last_ended(was, chain)
        after = chain.get(link.replaced_by_id) if link.replaced_by_id is not None else None
        now = (
            after if after is not None and after.is_current and _versions.sees(who, after) else None
        )
        # True again in the same words: in what replaced it, or in its own namespace (where the
        # person may have said them again while the replacement moved on, confirmed for the
        # account, and is hidden by theirs).
        held = current.get((was.account, was.agent, _versions.namespace_of(was), was.key))
        if was.content and any(f is not None and f.content == was.content for f in (now, held)):
            out.no_change.append(was.id)
            continue
        cause = link.end_cause or EndCause.STATED
        if not _told(cause, subject_of(was), kinds):
            continue
        if now is not None and now.id in by_end:
            out.marks[by_end[now.id].was.id].append(was.id)
            continue
        change = Change(was=was, now=now, day=_ended_at(link).date(), cause=cause)
        if now is not None:
            by_end[now.id] = change
        out.changes.append(change)
        out.marks[was.id] = [was.id]
    out.changes.sort(key=lambda c: (_ended_at(_last_ended(c.was, chain)), c.was.id), reverse=True)
    return out


def leading_to(
    conn: Connection, account: str, versions: Sequence[Fact], target: Fact, at: dt.datetime
) -> list[Fact]:
    """Those of ``versions`` that ``target`` replaced, one after another (one statement)."""
    candidates = [
        f for f in versions if (f.agent, f.key) == (target.agent, target.key) and f.id < target.id
    ]
    if not candidates:
        return []
    chain = _chains(conn, account, [f.id for f in candidates], at)
    return [f for f in candidates if target.id in later_versions(f.id, chain)]


def later_versions(fact_id: int, chain: dict[int, Fact]) -> list[int]:
    """The versions that replaced ``fact_id``, one after another, as far as ``chain`` goes."""
    found: list[int] = []
    link = chain.get(fact_id)
    while link is not None and link.replaced_by_id is not None:
        nxt = link.replaced_by_id
        if nxt == fact_id or nxt in found:
            break
        found.append(nxt)
        link = chain.get(nxt)
    return found


def _ended_at(link: Fact) -> dt.datetime:
    return link.ended_recorded_at or link.recorded_at


def _last_ended(was: Fact, chain: dict[int, Fact]) -> Fact:
    """The last ended version in the chain: its end is the change the reader hears of."""
    link = was
    seen = {was.id}
    while link.replaced_by_id in chain and link.replaced_by_id not in seen:
        nxt = chain[link.replaced_by_id]
        if nxt.is_current:
            break
        seen.add(nxt.id)
        link = nxt
    return link


def _told(cause: EndCause, subject: str, kinds: frozenset[str] | None) -> bool:
    if kinds is not None:
        return cause.value in kinds
    return bool(subject) or cause in EXPLICIT


def _chains(
    conn: Connection, account: str, start_ids: list[int], now: dt.datetime
) -> dict[int, Fact]:
    """Every version reachable from ``start_ids`` by ``replaced_by_id``, in one recursive query
    (a version is replaced only by one of its account)."""
    step = (
        sa.select(facts.c.id, facts.c.replaced_by_id)
        .where(facts.c.account == account, facts.c.id.in_(start_ids))
        .cte(recursive=True)
    )
    nxt = facts.alias("nxt")
    step = step.union(
        sa.select(nxt.c.id, nxt.c.replaced_by_id).where(
            nxt.c.account == account, nxt.c.id == step.c.replaced_by_id
        )
    )
    chained = sa.select(facts).where(
        facts.c.account == account, facts.c.id.in_(sa.select(step.c.id))
    )
    rows = conn.execute(chained).all()
    return {r.id: _expiry.seen_at(Fact.from_row(r), now) for r in rows}


def _current_same_keys(
    conn: Connection, ended: Sequence[Fact], now: dt.datetime
) -> dict[tuple[str, str, str, str], Fact]:
    """True facts under the keys of ``ended``: a fact true again is no change."""
    keys = sorted({(f.account, f.agent, f.key) for f in ended})
    rows = conn.execute(
        sa.select(facts).where(
            sa.tuple_(facts.c.account, facts.c.agent, facts.c.key).in_(keys),
            facts.c.ended_recorded_at.is_(None),
        )
    ).all()
    found = [f for r in rows if _expiry.is_live(f := Fact.from_row(r), now)]
    return {(f.account, f.agent, _versions.namespace_of(f), f.key): f for f in found}
