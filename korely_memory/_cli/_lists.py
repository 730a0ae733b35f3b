"""Who the memory holds: ``people``, ``agents`` and ``readers``, with what each holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db import _database
from .._db._schema import account_row, admins, facts, marks, memories, personal_row, true_row
from .._values import _validation
from ._app import cli, common, open_engine
from ._output import emit, table

_PERSONAL = sa.text(personal_row("korely_facts"))
_ACCOUNT = sa.text(account_row("korely_facts"))
_TRUE = sa.text(true_row("korely_facts"))
_ACCOUNT_HELP = "Only this account (default: every account)."


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


def known_users(conn: Connection, account: str) -> list[str]:
    """The names the memory knows as people of ``account``, administrators too."""
    names = {row["user"] for row in people(conn, account)}
    names.update(
        conn.execute(sa.select(admins.c.user).where(admins.c.account == account)).scalars()
    )
    return sorted(names)


def known_accounts(conn: Connection) -> list[str]:
    """Every account the memory holds something of."""
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


def _listing(
    ctx: click.Context,
    account: str | None,
    read: Any,
    headers: Sequence[str],
    empty: str,
) -> None:
    _validation.name("account", account, optional=True)
    engine = open_engine(ctx)
    with _database.reading(engine.db) as conn:
        found = read(conn, account)
    emit(
        ctx.obj,
        found,
        lambda: table(headers, [[row[h] for h in headers] for row in found], empty=empty),
    )


@cli.command("people")
@click.argument("account", required=False)
@common
@click.pass_context
def people_command(ctx: click.Context, account: str | None) -> None:
    """The people the memory holds facts or memories of, in ACCOUNT or every account.

    For each: its true facts and proposals, every version of them, its memories.
    """
    headers = ["account", "user", "facts", "versions", "memories"]
    _listing(ctx, account, people, headers, "no people")


@cli.command("agents")
@click.argument("account", required=False)
@common
@click.pass_context
def agents_command(ctx: click.Context, account: str | None) -> None:
    """The agent definitions that hold facts or memories, in ACCOUNT or every account.

    For each: the people it holds something of, its true facts and proposals
    (its own team memory too), its true account facts, its memories.
    """
    headers = ["account", "agent", "people", "facts", "account_facts", "memories"]
    _listing(ctx, account, agents, headers, "no agents")


@cli.command("readers")
@click.argument("account", required=False)
@common
@click.pass_context
def readers_command(ctx: click.Context, account: str | None) -> None:
    """The readers facts were handed to, in ACCOUNT or every account.

    For each: its read marks, the people they are about, the changes not yet
    told to it, and its latest read (to the hour).
    """
    headers = ["account", "reader", "marks", "people", "changes_untold", "last_read_at"]
    _listing(ctx, account, readers, headers, "no readers")
