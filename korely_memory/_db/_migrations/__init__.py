"""The schema's version: checked at every engine start, upgraded with Alembic.

The revisions live in ``versions/`` next to Alembic's ``env.py``; the database
records the one it is at in its own table, ``korely_alembic_version``, so an
application's own Alembic history never meets this one.

This module imports no Alembic: an engine that finds its database at the
newest revision (the common case) pays one query and nothing else. A new
database is created from the models and stamped at the newest revision, which
the tests prove to be the same schema as the revisions build.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError

from ..._values._errors import InvalidRequest
from ..._values._errors import (
    SchemaVersionError as SchemaVersionError,  # raised here, defined with the rest
)
from .. import _database
from .._schema import Base

VERSION_TABLE = "korely_alembic_version"
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010")
"""Every revision, oldest first (``versions/``; a test holds the two to each other)."""
HEAD = REVISIONS[-1]
EMPTY = "empty"
"""The state of a database that holds none of the memory's tables."""
UNVERSIONED = "unversioned"
"""The state of a database that holds the memory's tables but records no revision."""
UPGRADE = "korely db upgrade"

# As Alembic declares its version table, so that Alembic reads and writes this one.
_version = sa.Table(
    VERSION_TABLE,
    sa.MetaData(),
    sa.Column("version_num", sa.String(32), nullable=False),
    sa.PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
)
_READ = sa.select(_version.c.version_num)


def is_memory_table(name: str) -> bool:
    """Whether a table of the database is one of the memory's (the version table is not)."""
    return name.startswith("korely_") and name != VERSION_TABLE


def auto_upgrade_default(url: URL) -> bool:
    """Upgrade at start on SQLite (one machine, one application); never on PostgreSQL, where
    an upgrade is a deployment step (``korely db upgrade``): processes of the previous version
    may still run against the database, and the application's role may not own the tables."""
    return url.get_backend_name() == "sqlite"


def prepare(db: Engine, *, auto_upgrade: bool) -> None:
    """At engine start: create a new database at the newest revision, upgrade an older one when
    ``auto_upgrade``, refuse one it cannot work with.

    One query when the database is at the newest revision. Otherwise the work runs under the
    schema lock (an advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) and looks
    again, so that many processes starting at once create or upgrade it once.

    Raises:
        SchemaVersionError: The database is newer than this version of korely-memory, older
            and ``auto_upgrade`` is off, or holds the memory's tables with no revision.
    """
    if _quick_look(db) == HEAD:
        return
    with schema_transaction(db) as conn:
        found = state(conn)
        if found == HEAD:
            return
        if found == EMPTY:
            _create(conn)
            return
        refuse_unknown(found)
        if not auto_upgrade:
            raise SchemaVersionError(
                f"the database's schema is at revision {found}, older than {HEAD} that this "
                f"version of korely-memory needs: run `{UPGRADE}` (or open the engine with "
                "auto_upgrade=True)",
                found,
                head=HEAD,
            )
        from ._alembic import upgrade

        upgrade(conn, HEAD)


def count_words_left(conn: Connection) -> None:
    """Count the facts' words that SQL printed by ``korely db upgrade --sql`` left to count
    (revision 0007), once: the engine that removes the setting counts them, in its write
    transaction; another waits for it and finds nothing left."""
    from .versions.v0007_fact_word_counts import UNCOUNTED, count_words

    claimed = conn.execute(
        sa.text("DELETE FROM korely_settings WHERE name = :name RETURNING name"),
        {"name": UNCOUNTED},
    ).first()
    if claimed is not None:
        count_words(conn)


def refuse_unknown(found: str) -> None:
    """Raise unless ``found`` is a revision this version of korely-memory can upgrade from.

    Raises:
        SchemaVersionError: The database records no revision, or one newer than ``HEAD``.
    """
    if found == UNVERSIONED:
        raise SchemaVersionError(
            f"the database holds the memory's tables but no {VERSION_TABLE}: it was made "
            "before schema versions existed. If its tables are those of revision 0001, record "
            "that with `korely db stamp 0001`, then run `korely db upgrade`",
            found,
            head=HEAD,
        )
    if found not in REVISIONS:
        raise SchemaVersionError(
            f"the database's schema is at revision {found}, which this version of "
            f"korely-memory (revision {HEAD}) does not know: a newer korely-memory upgraded "
            "it; install that version",
            found,
            head=HEAD,
        )


def state(conn: Connection) -> str:
    """The revision the database is at, or ``EMPTY`` or ``UNVERSIONED``.

    Raises:
        SchemaVersionError: The version table holds more than one revision.
    """
    names = sa.inspect(conn).get_table_names()
    if VERSION_TABLE in names:
        found = list(conn.execute(_READ).scalars())
        if len(found) == 1:
            return str(found[0])
        if len(found) > 1:
            raise SchemaVersionError(
                f"{VERSION_TABLE} holds several revisions ({', '.join(sorted(found))})",
                ",".join(sorted(found)),
                head=HEAD,
            )
    return UNVERSIONED if any(is_memory_table(n) for n in names) else EMPTY


@contextlib.contextmanager
def schema_transaction(db: Engine) -> Iterator[Connection]:
    """A write transaction that holds the schema lock; what changes the schema runs in it.

    On SQLite, foreign keys are switched off for it (outside a transaction, the only place
    SQLite allows that) and checked before it commits: a revision in batch mode copies a
    table and drops the old one, which would otherwise cascade to the rows that refer to it.
    """
    with _database.queued(db), db.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            _pragma(conn, "foreign_keys=OFF")
        try:
            conn.execution_options(**{_database._WRITE: True})
            with conn.begin():
                _database.lock(conn, "schema")
                yield conn
                if sqlite:
                    _check_foreign_keys(conn)
        finally:
            if sqlite:
                _pragma(conn, "foreign_keys=ON")


def _pragma(conn: Connection, pragma: str) -> None:
    cursor: Any = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(f"PRAGMA {pragma}")
    finally:
        cursor.close()


def _check_foreign_keys(conn: Connection) -> None:
    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
    if broken:
        tables = sorted({str(row[0]) for row in broken})
        raise SchemaVersionError(
            f"the upgrade would leave rows that refer to nothing in {', '.join(tables)}; "
            "nothing was changed",
            "broken",
            head=HEAD,
        )


def _quick_look(db: Engine) -> str | None:
    """The revision recorded, in one query; None when that query cannot tell."""
    try:
        with db.connect() as conn:
            found = list(conn.execute(_READ).scalars())
    except DBAPIError:  # no version table yet; the locked look says what is there
        return None
    return str(found[0]) if len(found) == 1 else None


def _create(conn: Connection) -> None:
    Base.metadata.create_all(conn)
    _stamp_new(conn)


def _stamp_new(conn: Connection) -> None:
    _version.create(conn)
    conn.execute(_version.insert().values(version_num=HEAD))


SHARED = frozenset({"korely_settings"})
"""The tables that hold no account's rows: on a database distributed by account, every node
has all of them (Citus: a reference table)."""


def create_partitioned(conn: Connection, partitions: int) -> None:
    """Create the memory's tables in an empty PostgreSQL database, each that holds an account's
    rows hash-partitioned by account into ``partitions`` (``PARTITION BY HASH (account)``), at
    the newest revision; ``conn`` holds the schema lock (``schema_transaction``).

    PostgreSQL then enforces what a database that distributes by account (Citus) requires: the
    account in every primary key, unique index and foreign key between such tables.

    Raises:
        InvalidRequest: Not PostgreSQL, ``partitions`` not a whole number from 2 to 256, or the
            database already holds the memory's tables.
    """
    if conn.dialect.name != "postgresql":
        raise InvalidRequest("partitions", "tables are partitioned on PostgreSQL only")
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not 2 <= partitions <= 256
    ):
        raise InvalidRequest(
            "partitions", f"must be a whole number from 2 to 256, not {partitions!r}"
        )
    found = state(conn)
    if found != EMPTY:
        raise InvalidRequest(
            "partitions", f"the database already holds the memory's tables (revision {found})"
        )
    meta = sa.MetaData(naming_convention=Base.metadata.naming_convention)
    split = []
    for table in Base.metadata.sorted_tables:
        copy = table.to_metadata(meta)
        if table.name not in SHARED:
            copy.dialect_options["postgresql"]["partition_by"] = "HASH (account)"
            split.append(table.name)
    meta.create_all(conn)
    for name in split:
        for remainder in range(partitions):
            conn.exec_driver_sql(
                f'CREATE TABLE "{name}_p{remainder}" PARTITION OF "{name}"'
                f" FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
            )
    _stamp_new(conn)
