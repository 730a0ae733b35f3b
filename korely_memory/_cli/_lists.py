"""Who the memory holds: ``people``, ``agents`` and ``readers``, with what each holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from .._engine import MemoryEngine
from .._engine.listings import Listings
from .._values import _validation
from ._app import cli, common, open_engine
from ._output import emit, table

_ACCOUNT_HELP = "Only this account (default: every account)."


def known_users(engine: MemoryEngine, account: str) -> list[str]:
    """The names the memory knows as people of ``account``, administrators too."""
    names = {row["user"] for row in engine.listings.people(account)}
    return sorted(names.union(engine.listings.admins(account)))


def _listing(
    ctx: click.Context,
    account: str | None,
    read: Callable[[Listings, str | None], list[dict[str, Any]]],
    headers: Sequence[str],
    empty: str,
) -> None:
    _validation.name("account", account, optional=True)  # before the database is opened
    found = read(open_engine(ctx).listings, account)
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
    _listing(ctx, account, Listings.people, headers, "no people")


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
    _listing(ctx, account, Listings.agents, headers, "no agents")


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
    _listing(ctx, account, Listings.readers, headers, "no readers")
