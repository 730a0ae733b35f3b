"""What a block finds true facts by, without reading them all: their words, and how many there are.

``korely_fact_terms`` holds the words of every true fact, under the space a
block looks in (the owner's, or the account's); ``korely_fact_counts`` holds how
many true user facts and proposals each namespace has. Both are written in the
transaction that makes a version true or ends it, by the functions here, so
they never disagree with ``korely_facts``. An ended version leaves no word
behind: a forgotten memory's or an erased user's words stay nowhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from .identity import Scope
from .models import fact_counts, fact_terms, facts
from .ranking import words

ACCOUNT_SPACE = "/account"  # '/' is never in a name, so no owner key can be this
MAX_TERM = 64
MAX_TERMS = 256  # words kept of one fact; a fact is at most 2,000 characters
_ACCOUNT = Scope.ACCOUNT.value


_INSERT_TERMS = fact_terms.insert()


def terms_of(key: str, content: str) -> list[str]:
    """The distinct words a fact is found by: those of its key and its content."""
    found = dict.fromkeys(w[:MAX_TERM] for w in words(f"{key.replace('-', ' ')} {content}"))
    return list(found)[:MAX_TERMS]


def space_of(scope: str | None, owner_key: str) -> str:
    return ACCOUNT_SPACE if scope == _ACCOUNT else owner_key


def added(
    conn: Connection,
    fact_id: int,
    *,
    account: str,
    agent: str,
    owner_key: str,
    scope: str | None,
    key: str,
    content: str,
) -> None:
    """A version became true: index its words, and count it in its namespace."""
    space = space_of(scope, owner_key)
    rows = [
        {"account": account, "agent": agent, "space": space, "term": t, "fact_id": fact_id}
        for t in terms_of(key, content)
    ]
    if rows:
        conn.execute(_INSERT_TERMS, rows)
    if scope != _ACCOUNT:
        add_counts(conn, [(account, agent, owner_key, 1)])


def ended(conn: Connection, versions: Iterable[Sequence[Any]]) -> None:
    """Versions ``(id, account, agent, owner_key, scope)`` stopped being true: forget their words and count."""
    gone = sorted({v[0] for v in versions})
    if not gone:
        return
    conn.execute(fact_terms.delete().where(fact_terms.c.fact_id.in_(gone)))
    counts: dict[tuple[str, str, str], int] = {}
    for _, account, agent, owner_key, scope in versions:
        if scope != _ACCOUNT:
            counts[(account, agent, owner_key)] = counts.get((account, agent, owner_key), 0) - 1
    add_counts(conn, [(*k, n) for k, n in sorted(counts.items())])


def confirmed(conn: Connection, fact_id: int, *, account: str, agent: str, owner_key: str) -> None:
    """A proposal became an account fact: it is found in the account's space and no longer counted as the owner's."""
    conn.execute(
        fact_terms.update().where(fact_terms.c.fact_id == fact_id).values(space=ACCOUNT_SPACE)
    )
    add_counts(conn, [(account, agent, owner_key, -1)])


def erased(conn: Connection, account: str, user: str, personal: sa.Select[Any]) -> None:
    """Before a user's versions are deleted: their words and their counts go too."""
    conn.execute(fact_terms.delete().where(fact_terms.c.fact_id.in_(personal)))
    conn.execute(
        fact_counts.delete().where(
            fact_counts.c.account == account, fact_counts.c.owner_key == user
        )
    )


def true_versions(conn: Connection, where: Sequence[Any]) -> list[Sequence[Any]]:
    """``(id, account, agent, owner_key, scope)`` of the true versions ``where`` selects, for ``ended``."""
    rows = conn.execute(
        sa.select(
            facts.c.id, facts.c.account, facts.c.agent, facts.c.owner_key, facts.c.scope
        ).where(*where, facts.c.ended_recorded_at.is_(None))
    )
    return [tuple(r) for r in rows]


_UPSERT: dict[str, Any] = {}


def add_counts(conn: Connection, deltas: Sequence[tuple[str, str, str, int]]) -> None:
    if not deltas:
        return
    stmt = _UPSERT.get(conn.dialect.name)
    if stmt is None:
        insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
        base = insert(fact_counts)
        stmt = _UPSERT[conn.dialect.name] = base.on_conflict_do_update(
            index_elements=[fact_counts.c.account, fact_counts.c.agent, fact_counts.c.owner_key],
            set_={"n": fact_counts.c.n + base.excluded.n},
        )
    for account, agent, owner_key, n in deltas:
        conn.execute(stmt, {"account": account, "agent": agent, "owner_key": owner_key, "n": n})
