"""``korely db``: the schema's revision, checked and upgraded (Alembic, inside the package)."""

from __future__ import annotations

import click

from .._db import _migrations
from .._db._migrations import HEAD, REVISIONS
from .._values._errors import InvalidRequest, SchemaVersionError
from ._app import KorelyGroup, cli, common, database_url, open_database
from ._output import emit, pairs


@cli.group(cls=KorelyGroup)
def db() -> None:
    """The schema: which revision the database is at, and upgrading it."""


@db.command()
@common
@click.pass_context
def current(ctx: click.Context) -> None:
    """The revision the database is at, and the one this version of korely-memory needs."""
    with open_database(ctx, read_only=True).connect() as conn:
        found = _migrations.state(conn)
    said = {"revision": found, "head": HEAD, "up_to_date": found == HEAD}
    emit(ctx.obj, said, lambda: pairs(said))


@db.command()
@common
@click.pass_context
def check(ctx: click.Context) -> None:
    """Fail unless the database is at the newest revision and its tables match the models.

    For a deployment step or a health check: exit status 0 means the engine will
    open the database as it is.
    """
    from .._db._migrations._alembic import differences

    with open_database(ctx, read_only=True).connect() as conn:
        found = _migrations.state(conn)
        if found != HEAD:
            _migrations.refuse_unknown(found)
            raise SchemaVersionError(
                f"the database is at revision {found}; run `korely db upgrade` to reach {HEAD}",
                found,
                head=HEAD,
            )
        differ = differences(conn)
    if differ:
        shown = "; ".join(str(d) for d in differ[:5])
        raise SchemaVersionError(
            f"revision {HEAD} is recorded but {len(differ)} difference(s) from the models: {shown}",
            found,
            head=HEAD,
        )
    said = {"revision": found, "head": HEAD, "up_to_date": True}
    emit(ctx.obj, said, lambda: f"revision {HEAD}: the tables match the models")


@db.command()
@click.option("--sql", is_flag=True, help="Print the SQL instead of running it (PostgreSQL).")
@common
@click.pass_context
def upgrade(ctx: click.Context, sql: bool) -> None:
    """Upgrade the schema to the newest revision, under a lock; a new database is created.

    Run it before starting the new version's processes. PostgreSQL holds an
    advisory lock (engines starting meanwhile wait); SQLite holds its write lock
    and runs each change in batch mode.
    """
    from .._db._migrations._alembic import upgrade as run_upgrade
    from .._db._migrations._alembic import upgrade_sql

    if sql:
        with open_database(ctx, read_only=True).connect() as conn:
            found = _migrations.state(conn)
        if found not in (HEAD, _migrations.EMPTY):
            _migrations.refuse_unknown(found)
        start = "base" if found == _migrations.EMPTY else found
        url = database_url(ctx.obj)
        click.echo(upgrade_sql(url, start, HEAD) if found != HEAD else "-- already at " + HEAD)
        return
    with _migrations.schema_transaction(open_database(ctx, may_create=True)) as conn:
        found = _migrations.state(conn)
        if found != _migrations.EMPTY:
            _migrations.refuse_unknown(found)
        if found != HEAD:
            run_upgrade(conn, HEAD)
    said = {"from": found, "to": HEAD, "upgraded": found != HEAD}
    emit(
        ctx.obj,
        said,
        lambda: f"upgraded from {found} to {HEAD}" if found != HEAD else f"already at {HEAD}",
    )


@db.command()
@click.option(
    "--partitions",
    type=int,
    required=True,
    help="How many partitions each table that holds an account's rows is split into (2-256).",
)
@common
@click.pass_context
def create(ctx: click.Context, partitions: int) -> None:
    """Create the tables in an empty PostgreSQL database, hash-partitioned by account.

    Every table that holds an account's rows is declared PARTITION BY HASH
    (account) with PARTITIONS partitions, at the newest revision; the engine then
    opens it as any other. PostgreSQL enforces on it what a database that
    distributes tables by account (Citus) requires.
    """
    if database_url(ctx.obj, may_create=True).get_backend_name() != "postgresql":
        raise InvalidRequest("partitions", "tables are partitioned on PostgreSQL only")
    with _migrations.schema_transaction(open_database(ctx)) as conn:
        _migrations.create_partitioned(conn, partitions)
    said = {"revision": HEAD, "partitions": partitions}
    emit(
        ctx.obj,
        said,
        lambda: f"created revision {HEAD}, partitioned by account into {partitions}",
    )


@db.command()
@click.argument("revision")
@common
@click.pass_context
def stamp(ctx: click.Context, revision: str) -> None:
    """Record REVISION as the one the database is at, changing no table.

    For a database made before schema versions existed, whose tables are those
    of REVISION; `korely db check` then tells whether they really are.
    """
    from .._db._migrations._alembic import stamp as run_stamp

    if revision not in REVISIONS:
        raise InvalidRequest("revision", f"must be one of {', '.join(REVISIONS)}")
    with _migrations.schema_transaction(open_database(ctx)) as conn:
        found = _migrations.state(conn)
        run_stamp(conn, revision)
    said = {"from": found, "revision": revision}
    emit(ctx.obj, said, lambda: f"recorded revision {revision} (was {found})")
