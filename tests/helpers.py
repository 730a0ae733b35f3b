"""Small helpers shared by the engine's tests."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine
from korely_memory._db._schema import Base
from korely_memory._store import _versions


class Clock:
    """A clock the test moves by hand, for ``MemoryEngine(clock=...)``."""

    def __init__(self, start: dt.datetime) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)

    def to(self, moment: dt.datetime) -> None:
        self.now = moment


class Running:
    """A clock that runs at the real pace from a fixed moment, for ``MemoryEngine(clock=...)``: a
    test that prints the day of what it wrote names one day whatever the hour it runs at."""

    def __init__(self, start: dt.datetime) -> None:
        self.start, self.began = start, time.monotonic()

    def __call__(self) -> dt.datetime:
        return self.start + dt.timedelta(seconds=time.monotonic() - self.began)


def snapshot(engine: MemoryEngine) -> dict[str, str]:
    """Every row of every table, in primary-key order, as text (JSON, one string per table).

    Equal snapshots mean an unchanged database. One statement, so that a test may take one before
    every call it makes.
    """
    with one_statement(engine.db) as conn:
        row = conn.exec_driver_sql(_snapshot_sql(engine.db.dialect)).one()
    return dict(row._mapping)


_SNAPSHOT_SQL: dict[tuple[str, ...], str] = {}


def _snapshot_sql(dialect: sa.Dialect) -> str:
    """``snapshot``'s statement, made once per database and set of tables: ordering the tables
    costs more than reading them."""
    made = (dialect.name, *Base.metadata.tables)
    if made not in _SNAPSHOT_SQL:
        _SNAPSHOT_SQL[made] = _make_snapshot_sql(dialect)
    return _SNAPSHOT_SQL[made]


def _make_snapshot_sql(dialect: sa.Dialect) -> str:
    postgresql = dialect.name == "postgresql"
    q = dialect.identifier_preparer.quote
    parts = []
    for table in Base.metadata.sorted_tables:
        name, order = q(table.name), ", ".join(q(c.name) for c in table.primary_key.columns)
        if postgresql:
            rows = f"SELECT json_agg(t ORDER BY {order})::text FROM {name} t"
        else:  # quote(): the value as an SQL literal, blobs too
            values = ", ".join(f"quote({q(c.name)})" for c in table.columns)
            rows = (
                f"SELECT json_group_array(json_array({values}))"
                f" FROM (SELECT * FROM {name} ORDER BY {order})"
            )
        parts.append(f"({rows}) AS {name}")
    return f"SELECT {', '.join(parts)}"


@contextlib.contextmanager
def one_statement(db: sa.Engine) -> Iterator[sa.Connection]:
    """A connection of ``db`` for a read of one statement, which sees everything committed.

    On PostgreSQL outside any transaction: one round trip where BEGIN and COMMIT around it
    would make three (and never a rollback, which empties psycopg's prepared statements on the
    connection, which the engine would then prepare again). On SQLite, in the engine's own
    transaction, which costs no round trip.
    """
    if db.dialect.name == "postgresql":
        with db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            yield conn
    else:
        with db.begin() as conn:
            yield conn


@contextlib.contextmanager
def statements(db: sa.Engine) -> Iterator[list[str]]:
    """Every SQL statement ``db`` sends to the database while the block runs, in order."""
    sent: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    sa.event.listen(db, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        sa.event.remove(db, "before_cursor_execute", record)


def hold_the_mark_lock(url: str, giulia: Identity) -> Callable[[], None]:
    """Hold what a read's mark step needs for longer than it waits; returns the release."""
    holder = sa.create_engine(url)
    conn = holder.connect()
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        trans = conn.begin()
        _versions.lock_person(conn, giulia.account, giulia.user, erasing=True)
        assert trans.is_active

    def release() -> None:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("ROLLBACK")
        conn.close()
        holder.dispose()

    return release
