"""Keeping the memory in shape: ``trim`` for a timer, ``stats``, and ``scrub`` after erasure."""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import click
import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection

from .._db import _database, _migrations
from .._db._schema import Base, admins, erasures, facts, marks, memories, personal_row, true_row
from .._values._identity import Scope
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
    engine = open_engine(ctx)
    with _database.reading(engine.db) as conn:
        found = counts(conn)
        found["size_bytes"] = size(conn, engine.url)
        found["schema_revision"] = _migrations.state(conn)
    emit(ctx.obj, found, lambda: pairs(found))


def counts(conn: Connection) -> dict[str, Any]:
    """What the memory holds, counted in one snapshot."""
    personal = sa.text(personal_row("korely_facts"))
    current = sa.text(true_row("korely_facts"))
    people = sa.union(
        sa.select(facts.c.account, facts.c.owner_key).where(facts.c.owner_key != "", personal),
        sa.select(memories.c.account, memories.c.owner_key).where(memories.c.owner_key != ""),
    ).subquery()
    accounts = sa.union(sa.select(facts.c.account), sa.select(memories.c.account)).subquery()

    def number(query: sa.Select[Any]) -> int:
        return int(conn.execute(query).scalar_one())

    total = sa.func.count()
    return {
        "accounts": number(sa.select(total).select_from(accounts)),
        "people": number(sa.select(total).select_from(people)),
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
    PostgreSQL (the database may hold an application's tables too). None in memory."""
    if conn.dialect.name == "postgresql":
        names = [t.name for t in Base.metadata.sorted_tables]
        total = conn.execute(
            sa.text(
                "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) "
                "FROM unnest(CAST(:names AS text[])) AS t"
            ),
            {"names": names},
        ).scalar_one()
        return int(total)
    if _database.is_memory_sqlite(url) or not url.database:
        return None
    files = [url.database, url.database + "-wal"]
    return sum(os.path.getsize(f) for f in files if os.path.exists(f))
