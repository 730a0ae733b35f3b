"""Keeping the memory in shape: ``trim`` for a timer, ``stats``, and ``scrub`` after erasure."""

from __future__ import annotations

import datetime as dt

import click

from ._app import Failed, cli, common, moment_option, open_engine
from ._output import emit, pairs


@cli.command()
@moment_option("--now", "Trim as of this moment (default: now).")
@common
@click.pass_context
def trim(ctx: click.Context, now: dt.date | None) -> None:
    """Remove read marks 90 days after their last read, and those whose change was told.

    For a timer: hourly is plenty.
    """
    report = open_engine(ctx).trim(now)
    emit(ctx.obj, report, lambda: pairs(vars(report)))


@cli.command()
@common
@click.pass_context
def scrub(ctx: click.Context) -> None:
    """Make deleted words physically gone from the memory's tables.

    PostgreSQL: VACUUM FULL each table (each is locked while it is rewritten;
    run it in a quiet hour, after erasures). SQLite: empty the write-ahead log
    into the file.
    """
    done = open_engine(ctx).scrub()
    if not done:
        raise Failed(
            "the write-ahead log could not be emptied: a connection holds an older snapshot; "
            "run `korely scrub` again once it is closed"
        )
    emit(ctx.obj, {"scrubbed": True}, lambda: "scrubbed")


@cli.command()
@common
@click.pass_context
def stats(ctx: click.Context) -> None:
    """How much the memory holds: accounts, people, facts, memories, marks, size."""
    found = open_engine(ctx).listings.stats()
    emit(ctx.obj, found, lambda: pairs(found))
