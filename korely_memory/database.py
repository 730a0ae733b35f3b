"""Connections and transactions: the one place that knows SQLite from PostgreSQL.

SQLite runs in WAL mode, and every transaction that writes starts with
``BEGIN IMMEDIATE``: a deferred transaction that reads and then writes fails
at once with SQLITE_BUSY_SNAPSHOT whatever the busy timeout says. Python's
sqlite3 module would issue its own BEGIN, so it is switched off and the
engine's ``begin`` event emits the right one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.pool import StaticPool

DEFAULT_URL = "sqlite:///korely-memory.db"
WRITE = "korely_write"
WAIT = "korely_wait"  # seconds a mark transaction may wait for the write lock before giving way
WRITE_WAIT = 5.0  # seconds a writer waits for another writer's lock

# PostgreSQL SQLSTATEs after which a write transaction is simply run again.
_RETRY_PG = {"40001", "40P01", "23505", "55P03"}
# Infrastructure failures after which the read-mark step gives way (PERFORMANCE.md).
_GIVE_WAY_PG_PREFIXES = ("55P03", "57014", "40P01", "40001", "53", "25006", "08")
_GIVE_WAY_SQLITE = (
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR,
)


def resolve_url(url: str | URL | None) -> URL:
    """The URL given, else ``$KORELY_DATABASE_URL``, else ``./korely-memory.db``."""
    if url is None:
        url = os.environ.get("KORELY_DATABASE_URL") or DEFAULT_URL
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and (
        url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"
    )


def create(url: URL, *, write_wait: float = WRITE_WAIT) -> Engine:
    if url.get_backend_name() == "sqlite":
        return _create_sqlite(url, write_wait)
    engine = sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)

    @event.listens_for(engine, "connect")
    def _in_utc(dbapi_connection: Any, _record: Any) -> None:
        # Times come back in UTC as the engine returns them, with no conversion per value.
        dbapi_connection.execute("SET TIME ZONE 'UTC'")
        dbapi_connection.commit()

    return engine


def _create_sqlite(url: URL, write_wait: float) -> Engine:
    memory = is_memory_sqlite(url)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
    if memory:
        # One connection shared by every thread, or each would see its own empty database.
        kwargs["poolclass"] = StaticPool
    engine = sa.create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Deleted text must not linger in free pages (erasure, SPEC §8).
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(write_wait * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if not options.get(WRITE, False):
            conn.exec_driver_sql("BEGIN")
        elif options.get(WAIT) is None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            _begin_within(conn, options[WAIT], write_wait)

    return engine


def _begin_within(conn: Connection, wait: float, write_wait: float) -> None:
    """BEGIN IMMEDIATE, giving up after ``wait`` seconds.

    SQLite's own busy handler sleeps in growing steps and overshoots a short
    timeout under load, so the wait is bounded here with short sleeps.
    """
    deadline = time.monotonic() + wait
    conn.exec_driver_sql("PRAGMA busy_timeout=0")
    try:
        delay = 0.001
        while True:
            try:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                return
            except OperationalError as exc:
                if _sqlite_code(exc) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    raise
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                time.sleep(min(delay, left))
                delay = min(delay * 2, 0.02)
    finally:
        conn.exec_driver_sql(f"PRAGMA busy_timeout={int(write_wait * 1000)}")


@contextlib.contextmanager
def marking(engine: Engine, wait: float) -> Iterator[Connection]:
    """A write transaction that waits at most ``wait`` seconds for a lock another transaction holds."""
    options = {WRITE: True, WAIT: wait}
    with engine.connect().execution_options(**options) as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(wait * 1000)}ms'")
        yield conn


def create_schema(engine: Engine, metadata: sa.MetaData) -> None:
    """Create the tables that are missing, safely when many processes start at once."""
    with writing(engine) as conn:  # on SQLite, BEGIN IMMEDIATE already serialises this
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        metadata.create_all(conn)


_SCHEMA_LOCK = 0x6B6F72656C79  # any constant the application does not use; spells "korely"


def namespace_lock(conn: Connection, *parts: str | None) -> None:
    """Serialise writers of one key namespace (PostgreSQL; SQLite writers are serialised already)."""
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.blake2b("\x1f".join(p or "" for p in parts).encode(), digest_size=8).digest()
    conn.exec_driver_sql(
        "SELECT pg_advisory_xact_lock(%s)", (int.from_bytes(digest, "big", signed=True),)
    )


def _pg_code(exc: BaseException) -> str | None:
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


def _sqlite_code(exc: BaseException) -> int | None:
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_retryable(exc: BaseException) -> bool:
    code = _pg_code(exc)
    if code is not None:
        return code in _RETRY_PG
    # SQLite writers queue on BEGIN IMMEDIATE; a unique violation there is a real bug.
    return False


def gives_way(exc: BaseException) -> bool:
    """An infrastructure failure the mark step yields to; a programming error is not one."""
    if not isinstance(exc, DBAPIError) or isinstance(exc, IntegrityError):
        return False
    code = _pg_code(exc)
    if code is not None:
        return code.startswith(_GIVE_WAY_PG_PREFIXES)
    if exc.connection_invalidated:
        return True
    sqlite_code = _sqlite_code(exc)
    if sqlite_code is not None:
        return sqlite_code in _GIVE_WAY_SQLITE
    return isinstance(exc, OperationalError) and "locked" in str(exc.orig)


@contextlib.contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """One write transaction: committed whole or not at all."""
    with engine.connect().execution_options(**{WRITE: True}) as conn, conn.begin():
        yield conn


def run_write(engine: Engine, work: Any, attempts: int = 8) -> Any:
    """Run ``work(conn)`` in a write transaction, again after a conflict another writer caused."""
    for attempt in range(attempts):
        try:
            with writing(engine) as conn:
                return work(conn)
        except DBAPIError as exc:
            if attempt + 1 == attempts or not is_retryable(exc):
                raise
            time.sleep(random.uniform(0, 0.005 * (2**attempt)))
    raise AssertionError("unreachable")
