"""Who and what the memory holds, counted: the listings an operator reads (``korely people``,
``agents``, ``readers``, ``admins``, ``stats``), each in the snapshot its connection is in.

Every listing is plain values (dicts of names and counts, lists of names), ordered by account
and name, so that a command prints them as they come.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection

from .._db import _database
from .._db._schema import (
    Base,
    account_row,
    admins,
    erasures,
    facts,
    marks,
    memories,
    personal_row,
    true_row,
)
from .._values._identity import Scope
from ._import import holds_anything

_PERSONAL = sa.text(personal_row("korely_facts"))
_ACCOUNT = sa.text(account_row("korely_facts"))
_TRUE = sa.text(true_row("korely_facts"))


def _true(condition: Any = None) -> Any:
    """How many of a group's versions are true (and meet ``condition``)."""
    holds = _TRUE if condition is None else sa.and_(_TRUE, condition)
    return sa.func.coalesce(sa.func.sum(sa.case((holds, 1), else_=0)), 0)


def _in(column: Any, account: str | None) -> Any:
    return column == account if account is not None else sa.true()


def people(conn: Connection, account: str | None = None) -> list[dict[str, Any]]:
    """Every person the memory holds facts or memories of, with how many, by account and name."""
    found: dict[tuple[str, str], dict[str, Any]] = {}

    def entry(acc: str, user: str) -> dict[str, Any]:
        return found.setdefault(
            (acc, user),
            {"account": acc, "user": user, "facts": 0, "versions": 0, "memories": 0},
        )

    for acc, user, true, versions in conn.execute(
        sa.select(facts.c.account, facts.c.owner_key, _true(), sa.func.count())
        .where(_PERSONAL, facts.c.owner_key != "", _in(facts.c.account, account))
        .group_by(facts.c.account, facts.c.owner_key)
    ):
        entry(acc, user).update(facts=int(true), versions=int(versions))
    for acc, user, n in conn.execute(
        sa.select(memories.c.account, memories.c.owner_key, sa.func.count())
        .where(memories.c.owner_key != "", _in(memories.c.account, account))
        .group_by(memories.c.account, memories.c.owner_key)
    ):
        entry(acc, user)["memories"] = int(n)
    return [found[k] for k in sorted(found)]


def agents(conn: Connection, account: str | None = None) -> list[dict[str, Any]]:
    """Every agent definition that holds facts or memories, with how many, by account and name."""
    found: dict[tuple[str, str], dict[str, Any]] = {}

    def entry(acc: str, agent: str) -> dict[str, Any]:
        return found.setdefault(
            (acc, agent),
            {
                "account": acc,
                "agent": agent,
                "people": 0,
                "facts": 0,
                "account_facts": 0,
                "memories": 0,
            },
        )

    for acc, agent, own, shared in conn.execute(
        sa.select(
            facts.c.account,
            facts.c.agent,
            _true(_PERSONAL),
            _true(_ACCOUNT),
        )
        .where(_in(facts.c.account, account))
        .group_by(facts.c.account, facts.c.agent)
    ):
        entry(acc, agent).update(facts=int(own), account_facts=int(shared))
    for acc, agent, n in conn.execute(
        sa.select(memories.c.account, memories.c.agent, sa.func.count())
        .where(_in(memories.c.account, account))
        .group_by(memories.c.account, memories.c.agent)
    ):
        entry(acc, agent)["memories"] = int(n)
    whose = sa.union(
        sa.select(facts.c.account, facts.c.agent, facts.c.owner_key).where(
            _PERSONAL, facts.c.owner_key != "", _in(facts.c.account, account)
        ),
        sa.select(memories.c.account, memories.c.agent, memories.c.owner_key).where(
            memories.c.owner_key != "", _in(memories.c.account, account)
        ),
    ).subquery()
    for acc, agent, n in conn.execute(
        sa.select(whose.c.account, whose.c.agent, sa.func.count()).group_by(
            whose.c.account, whose.c.agent
        )
    ):
        entry(acc, agent)["people"] = int(n)
    return [found[k] for k in sorted(found)]


def readers(conn: Connection, account: str | None = None) -> list[dict[str, Any]]:
    """Every reader that was handed facts, with its marks, by account and name."""
    untold = sa.and_(marks.c.ended_at.is_not(None), marks.c.told_at.is_(None))
    rows = conn.execute(
        sa.select(
            marks.c.account,
            marks.c.reader,
            sa.func.count(),
            sa.func.count(sa.distinct(sa.case((marks.c.subject != "", marks.c.subject)))),
            sa.func.coalesce(sa.func.sum(sa.case((untold, 1), else_=0)), 0),
            sa.func.max(marks.c.last_read_at),
        )
        .where(_in(marks.c.account, account))
        .group_by(marks.c.account, marks.c.reader)
        .order_by(marks.c.account, marks.c.reader)
    )
    return [
        {
            "account": acc,
            "reader": reader,
            "marks": int(n),
            "people": int(subjects),
            "changes_untold": int(pending),
            "last_read_at": last,
        }
        for acc, reader, n, subjects, pending, last in rows
    ]


def accounts(conn: Connection) -> list[str]:
    """Every account the memory holds something of: facts, memories, marks or administrators."""
    return sorted(
        conn.execute(
            sa.union(
                sa.select(facts.c.account),
                sa.select(memories.c.account),
                sa.select(marks.c.account),
                sa.select(admins.c.account),
            )
        ).scalars()
    )


def administrators(conn: Connection, account: str) -> list[str]:
    """The administrators on the memory's own list of ``account``, by name."""
    select = sa.select(admins.c.user).where(admins.c.account == account).order_by(admins.c.user)
    return list(conn.execute(select).scalars())


def holds_user(conn: Connection, account: str, user: str) -> bool:
    """Whether an erasure of ``user`` would find anything: what an import refuses to write over
    (``holds_anything``), or account facts that name them."""
    if holds_anything(conn, account, user):
        return True
    named = sa.or_(facts.c.owner_key == user, facts.c.confirmed_by == user)
    found = sa.select(facts.c.id).where(facts.c.account == account, named).limit(1)
    return conn.execute(found).first() is not None


def counts(conn: Connection) -> dict[str, int]:
    """What the memory holds, counted in the snapshot ``conn`` is in."""
    personal = sa.text(personal_row("korely_facts"))
    current = sa.text(true_row("korely_facts"))
    everyone = sa.union(
        sa.select(facts.c.account, facts.c.owner_key).where(facts.c.owner_key != "", personal),
        sa.select(memories.c.account, memories.c.owner_key).where(memories.c.owner_key != ""),
    ).subquery()
    every_account = sa.union(sa.select(facts.c.account), sa.select(memories.c.account)).subquery()

    def number(query: sa.Select[Any]) -> int:
        return int(conn.execute(query).scalar_one())

    total = sa.func.count()
    return {
        "accounts": number(sa.select(total).select_from(every_account)),
        "people": number(sa.select(total).select_from(everyone)),
        "facts": number(sa.select(total).select_from(facts).where(current)),
        "fact_versions": number(sa.select(total).select_from(facts)),
        "proposals": number(
            sa.select(total)
            .select_from(facts)
            .where(current, facts.c.scope == Scope.ACCOUNT_PROPOSED.value)
        ),
        "memories": number(sa.select(total).select_from(memories)),
        "marks": number(sa.select(total).select_from(marks)),
        "changes_untold": number(
            sa.select(total)
            .select_from(marks)
            .where(marks.c.ended_at.is_not(None), marks.c.told_at.is_(None))
        ),
        "administrators": number(sa.select(total).select_from(admins)),
        "erasures": number(sa.select(total).select_from(erasures)),
    }


def size(conn: Connection, url: URL) -> int | None:
    """Bytes on disk: the SQLite file and its log, or the memory's tables and their indexes on
    PostgreSQL (the database may hold an application's tables too). None in memory.

    A table partitioned by account (``korely db create --partitions``) holds no rows itself:
    its partitions do, and each table's partition tree (the table alone, when it is not
    partitioned) is counted."""
    if conn.dialect.name == "postgresql":
        names = [t.name for t in Base.metadata.sorted_tables]
        total = conn.execute(
            sa.text(
                "WITH t AS (SELECT to_regclass(n) AS r FROM unnest(CAST(:names AS text[])) AS n) "
                "SELECT coalesce(sum(pg_total_relation_size(r)), 0) FROM ("
                "SELECT r FROM t UNION SELECT p.relid FROM t, pg_partition_tree(t.r) AS p"
                ") AS every_table"
            ),
            {"names": names},
        ).scalar_one()
        return int(total)
    if _database.is_memory_sqlite(url) or not url.database:
        return None
    files = [url.database, url.database + "-wal"]
    return sum(os.path.getsize(f) for f in files if os.path.exists(f))
