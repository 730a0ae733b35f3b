"""Read marks and "Changed since you last read": each change told exactly once.

A read with a reader works in two steps (PERFORMANCE.md):

1. In the read snapshot, with no lock: the facts pending for this reader
   (``pending``, ``resolve``), and, once the block is rendered, the marks of
   the facts it shows (``marks_of``). ``plan`` decides from those alone
   whether anything must be written; a steady read writes nothing.
2. If something must be, one short transaction (``settle``) inserts missing
   marks, moves old last-read times, and claims the changes shown with a
   compare-and-set (``told_at IS NULL``), so two readers never both tell one.
   It waits at most 0.2 s for a lock; past that the read gives way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from .facts import owner_key
from .identity import Identity, Scope
from .models import facts, marks
from .types import Change, Fact

LOOK_AT = 200  # pending changes read for one block
EXPLICIT = frozenset({"corrected", "forgotten", "stated"})


def hour(moment: dt.datetime) -> dt.datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def subject_of(fact: Fact) -> str:
    """The user a fact is about, '' for account facts and agent-team memory."""
    return "" if fact.effective_scope is Scope.ACCOUNT else (fact.owner or "")


_PENDING = (
    sa.select(facts)
    .join(marks, marks.c.fact_id == facts.c.id)
    .where(
        marks.c.account == sa.bindparam("account"),
        marks.c.reader == sa.bindparam("reader"),
        marks.c.subject.in_(sa.bindparam("subjects", expanding=True)),
        sa.text("korely_marks.ended_at IS NOT NULL AND korely_marks.told_at IS NULL"),
    )
    .order_by(marks.c.ended_at.desc(), facts.c.id.desc())
    .limit(LOOK_AT)
)


def pending(conn: Connection, who: Identity, reader: str) -> list[Fact]:
    """Facts this reader was handed about this block's user (or about no user) that have ended since."""
    subjects = sorted({owner_key(who.user), ""})
    rows = conn.execute(
        _PENDING, {"account": who.account, "reader": reader, "subjects": subjects}
    ).all()
    return [Fact.from_row(r) for r in rows]


@dataclass
class Resolved:
    """Pending changes sorted out: those to tell, and those that are no change at all."""

    tellable: list[Change] = field(default_factory=list)
    claims: dict[int, list[int]] = field(default_factory=dict)  # was.id -> every mark it settles
    silent: list[int] = field(default_factory=list)  # settled without a word: true again


def resolve(
    conn: Connection, who: Identity, ended: Sequence[Fact], kinds: frozenset[str] | None
) -> Resolved:
    """Follow each ended fact's chain of replacements to what holds now (two statements in all)."""
    out = Resolved()
    if not ended:
        return out
    chain = _chains(conn, [f.id for f in ended])
    current = _current_same_keys(conn, ended)
    by_end: dict[int, Change] = {}
    for was in ended:
        last = was
        seen = {was.id}
        while (
            last.replaced_by_id is not None
            and last.replaced_by_id in chain
            and last.replaced_by_id not in seen
        ):
            nxt = chain[last.replaced_by_id]
            if not nxt.is_current:
                last = nxt
                seen.add(nxt.id)
                continue
            last = nxt
            break
        now = last if last.is_current and _reaches(last, who) else None
        again = (
            now
            if now is not None
            else current.get((was.account, was.agent, _namespace(was), was.key))
        )
        if again is not None and again.content == was.content and again.content:
            out.silent.append(was.id)
            continue
        link = _last_link(was, chain)
        if not _told(link.end_cause or "stated", subject_of(was), kinds):
            continue
        change = Change(
            was=was,
            now=now,
            day=(link.ended_recorded_at or link.recorded_at).date(),
            cause=link.end_cause or "stated",
        )
        if now is not None and now.id in by_end:
            out.claims[by_end[now.id].was.id].append(was.id)
            continue
        if now is not None:
            by_end[now.id] = change
        out.tellable.append(change)
        out.claims[was.id] = [was.id]
    out.tellable.sort(key=lambda c: (_ended(c, chain), c.was.id), reverse=True)
    return out


def _ended(change: Change, chain: dict[int, Fact]) -> dt.datetime:
    link = _last_link(change.was, chain)
    return link.ended_recorded_at or link.recorded_at


def _last_link(was: Fact, chain: dict[int, Fact]) -> Fact:
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


def _told(cause: str, subject: str, kinds: frozenset[str] | None) -> bool:
    if kinds is not None:
        return cause in kinds
    return bool(subject) or cause in EXPLICIT


def _namespace(fact: Fact) -> str:
    return "\x00account" if fact.effective_scope is Scope.ACCOUNT else (fact.owner or "")


def _reaches(fact: Fact, who: Identity) -> bool:
    """Whether the block's identity sees ``fact``: a fact of another agent definition is not told."""
    if fact.account != who.account or fact.agent != who.agent:
        return False
    if fact.effective_scope is Scope.ACCOUNT:
        return True
    return fact.effective_scope is not Scope.ACCOUNT_REJECTED and fact.owner == who.user


def _chains(conn: Connection, start_ids: list[int]) -> dict[int, Fact]:
    """Every version reachable from ``start_ids`` by ``replaced_by_id``, in one recursive query."""
    step = (
        sa.select(facts.c.id, facts.c.replaced_by_id)
        .where(facts.c.id.in_(start_ids))
        .cte(recursive=True)
    )
    nxt = facts.alias("nxt")
    step = step.union(
        sa.select(nxt.c.id, nxt.c.replaced_by_id).where(nxt.c.id == step.c.replaced_by_id)
    )
    rows = conn.execute(sa.select(facts).where(facts.c.id.in_(sa.select(step.c.id)))).all()
    return {r.id: Fact.from_row(r) for r in rows}


def _current_same_keys(
    conn: Connection, ended: Sequence[Fact]
) -> dict[tuple[str, str, str, str], Fact]:
    """True facts under the keys of ``ended``: a fact true again is no change."""
    keys = sorted({(f.account, f.agent, f.key) for f in ended})
    rows = conn.execute(
        sa.select(facts).where(
            sa.tuple_(facts.c.account, facts.c.agent, facts.c.key).in_(keys),
            facts.c.ended_recorded_at.is_(None),
        )
    ).all()
    found = [Fact.from_row(r) for r in rows]
    return {(f.account, f.agent, _namespace(f), f.key): f for f in found}


_MARKS_OF = sa.select(marks.c.fact_id, marks.c.last_read_at).where(
    marks.c.account == sa.bindparam("account"),
    marks.c.reader == sa.bindparam("reader"),
    marks.c.fact_id.in_(sa.bindparam("ids", expanding=True)),
)


def marks_of(
    conn: Connection, account: str, reader: str, fact_ids: Iterable[int]
) -> dict[int, dt.datetime]:
    """The last-read time of each of these facts' marks, for the ones that have one."""
    ids = sorted(set(fact_ids))
    if not ids:
        return {}
    rows = conn.execute(_MARKS_OF, {"account": account, "reader": reader, "ids": ids})
    return {fact_id: last for fact_id, last in rows}


@dataclass
class Plan:
    """What one read must write; empty for a steady read."""

    insert: list[Fact] = field(default_factory=list)
    refresh: list[int] = field(default_factory=list)
    claim: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.insert or self.refresh or self.claim)


def plan(
    shown: Sequence[Fact], known: dict[int, dt.datetime], claim: Iterable[int], now: dt.datetime
) -> Plan:
    this_hour = hour(now)
    out = Plan(claim=sorted(set(claim)))
    for fact in shown:
        last = known.get(fact.id)
        if last is None:
            out.insert.append(fact)
        elif last < this_hour:
            out.refresh.append(fact.id)
    out.insert.sort(key=lambda f: f.id)
    out.refresh.sort()
    return out


def settle(conn: Connection, account: str, reader: str, todo: Plan, now: dt.datetime) -> set[int]:
    """Write the plan; returns the mark fact ids this read claimed (and so may tell)."""
    this_hour = hour(now)
    claimed: set[int] = set()
    if todo.claim:
        rows = conn.execute(
            marks.update()
            .where(
                marks.c.account == account,
                marks.c.reader == reader,
                marks.c.fact_id.in_(todo.claim),
                marks.c.told_at.is_(None),
            )
            .values(told_at=now)
            .returning(marks.c.fact_id)
        )
        claimed = {r[0] for r in rows}
    if todo.refresh:
        conn.execute(
            marks.update()
            .where(
                marks.c.account == account,
                marks.c.reader == reader,
                marks.c.fact_id.in_(todo.refresh),
            )
            .values(last_read_at=this_hour)
        )
    if todo.insert:
        conn.execute(
            _insert_mark(conn.dialect.name),
            [
                {
                    "account": account,
                    "reader": reader,
                    "id": f.id,
                    "subject": subject_of(f),
                    "first": now,
                    "last": this_hour,
                }
                for f in todo.insert
            ],
        )
    return claimed


def _insert_mark(dialect: str) -> sa.Insert:
    """Insert a mark unless one is there, and only while its fact exists (it may be erased meanwhile)."""
    source = sa.select(
        sa.bindparam("account"),
        sa.bindparam("reader"),
        facts.c.id,
        sa.bindparam("subject"),
        sa.bindparam("first", type_=marks.c.first_read_at.type),
        sa.bindparam("last", type_=marks.c.last_read_at.type),
    ).where(facts.c.id == sa.bindparam("id"))
    columns = ["account", "reader", "fact_id", "subject", "first_read_at", "last_read_at"]
    if dialect == "postgresql":
        return postgresql.insert(marks).from_select(columns, source).on_conflict_do_nothing()
    return sqlite.insert(marks).from_select(columns, source).prefix_with("OR IGNORE")
