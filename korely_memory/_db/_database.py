"""Connections and transactions: the one place that knows SQLite from PostgreSQL.

SQLite runs in WAL mode, and every transaction that writes starts with
``BEGIN IMMEDIATE``: a deferred transaction that reads and then writes fails
at once with SQLITE_BUSY_SNAPSHOT whatever the busy timeout says. Python's
sqlite3 module would issue its own BEGIN, so it is switched off and the
engine's ``begin`` event emits the right one. SQLite writers are thereby
serialised; on PostgreSQL, writers that must not interleave take advisory
locks (``lock``).

Every other module writes portable SQLAlchemy; what differs between the two
databases is decided here.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import functools
import hashlib
import importlib.util
import math
import os
import random
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.pool import StaticPool

from .._values._errors import InvalidRequest

R = TypeVar("R")

DEFAULT_URL = "sqlite:///korely-memory.db"
POSTGRES_MIN = (12,)
"""The oldest PostgreSQL the engine runs on: searches read through ``WITH ... AS MATERIALIZED``."""
# The one driver of each database the engine is written for, what it is, and a URL that opens it.
# A PostgreSQL connection is set up with psycopg 3's own calls (its ``execute``, its
# ``prepare_threshold``); any other dialect would be taken for SQLite.
_DRIVERS = {
    "sqlite": ("pysqlite", "SQLite", "Python's sqlite3", "sqlite:///path/to/memory.db"),
    "postgresql": ("psycopg", "PostgreSQL", "psycopg 3", "postgresql://..."),
}
_SUPPORTED = (
    "the engine runs on SQLite (sqlite:///path/to/memory.db) "
    f"and PostgreSQL {POSTGRES_MIN[0]} or later (postgresql://...)"
)
WRITE_WAIT = 5.0  # seconds a writer waits for another writer's lock
_WRITE = "korely_write"
_WAIT = "korely_wait"  # seconds a transaction may wait for a lock before giving way
_SNAPSHOT = "korely_snapshot"  # a read of several statements from one snapshot
_RAN = "korely_ran"  # a statement of the current transaction reached the server

# PostgreSQL SQLSTATEs after which a write transaction is simply run again.
_RETRY_PG = {"40001", "40P01", "23505", "55P03"}
# Failures that mean "this lock, connection or server is busy or gone", to which the read-mark
# step gives way: lock and statement timeouts, deadlocks, serialisation, resources (53),
# read-only transactions, idle-in-transaction timeouts (25P03), administrator shutdown and
# failover (57P), and lost connections (08).
_GIVE_WAY_PG = ("55P03", "57014", "40P01", "40001", "53", "25006", "25P03", "57P", "08")
# SQLite's primary result codes (the sqlite3 module names them from Python 3.11 on).
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL = 5, 6, 8, 10, 13
_GIVE_WAY_SQLITE = (_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_FULL, _SQLITE_READONLY, _SQLITE_IOERR)
# What those say, for Python 3.10, whose exceptions carry no code.
_GIVE_WAY_SQLITE_SAYS = ("locked", "disk is full", "readonly database", "disk i/o error")


def resolve_url(url: str | URL | None) -> URL:
    """The URL given, else ``$KORELY_DATABASE_URL``, else ``./korely-memory.db``.

    In a SQLite URL a leading ``~`` is the home folder, as a shell would read it.

    Raises:
        InvalidRequest: It is not a database URL, or not one of a database and driver the
            engine runs on (the message does not repeat a URL that may hold a password).
    """
    if url is None:
        url = os.environ.get("KORELY_DATABASE_URL") or DEFAULT_URL
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        said = "the URL given" if "@" in str(url) else repr(str(url))
        raise InvalidRequest(
            "url", f"{said} is not a database URL (sqlite:///path/to/memory.db, postgresql://...)"
        ) from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif parsed.drivername.startswith("postgres+"):  # SQLAlchemy knows "postgres" bare only
        parsed = parsed.set(drivername="postgresql+" + parsed.drivername.split("+", 1)[1])
    _check_supported(parsed)
    path = parsed.database
    if parsed.get_backend_name() == "sqlite" and path and path.startswith("~"):
        parsed = parsed.set(database=os.path.expanduser(path))
    return parsed


def _check_supported(url: URL) -> None:
    """Refuse a database or a driver the engine is not written for, before anything is opened or
    imported: another dialect would be taken for SQLite (its statements, no lock between
    writers), and an asyncio driver cannot run the engine's synchronous calls.

    Raises:
        InvalidRequest: The URL names another database, or another driver of SQLite or
            PostgreSQL; the message names that database or driver, never the URL itself.
    """
    backend = url.get_backend_name()
    if backend not in _DRIVERS:
        raise InvalidRequest("url", f"{backend} databases are not supported: {_SUPPORTED}")
    driver = url.get_driver_name()
    wanted, name, uses, form = _DRIVERS[backend]
    if driver == wanted:
        return
    refused = (
        f"the {driver} driver is for asyncio, and the engine is synchronous (its async methods, "
        "such as aremember, run it in a worker thread)"
        if _is_async(url)
        else f"the {driver} driver is not supported"
    )
    raise InvalidRequest("url", f"{refused}: {name} is opened with {uses} ({form})")


def _is_async(url: URL) -> bool:
    """Whether SQLAlchemy's dialect for ``url`` is one for asyncio (its driver is not imported)."""
    try:
        return bool(url.get_dialect().is_async)
    except NoSuchModuleError:  # a driver SQLAlchemy does not know
        return False


def check_server(engine: Engine) -> None:
    """Refuse a server the engine cannot run on, before anything is written: a PostgreSQL older
    than ``POSTGRES_MIN``, or a server that speaks PostgreSQL's protocol but is not PostgreSQL
    (CockroachDB's ``version()`` names CockroachDB). SQLite needs nothing.

    SQLAlchemy reads the server's version when the engine first connects: this connects once,
    sending nothing of its own, and the connection goes back to the pool for what follows. The
    caller disposes of the engine when it is refused.

    Raises:
        InvalidRequest: The server is too old or not PostgreSQL; the message names its version.
    """
    if engine.dialect.name != "postgresql":
        return
    try:
        with engine.connect():
            pass
    except AssertionError as error:  # SQLAlchemy's: version() names no PostgreSQL version
        said = _NO_VERSION.match(str(error))
        if said is None:
            raise
        raise InvalidRequest(
            "url", f"the server is not PostgreSQL (its version() is {said[1]!r}): {_SUPPORTED}"
        ) from None
    found = engine.dialect.server_version_info or ()
    if found < POSTGRES_MIN:
        raise InvalidRequest(
            "url",
            f"the server is PostgreSQL {'.'.join(map(str, found))}, older than "
            f"{POSTGRES_MIN[0]}: {_SUPPORTED}",
        )


# What SQLAlchemy's PostgreSQL dialect raises at the first connection when ``version()`` says no
# PostgreSQL version, with what it says.
_NO_VERSION = re.compile(r"Could not determine version from string '(.*)'\Z", re.DOTALL)


def is_memory_sqlite(url: URL) -> bool:
    """Whether ``url`` names an in-memory SQLite database (one connection, nothing on disk)."""
    return url.get_backend_name() == "sqlite" and (
        url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"
    )


def create(url: URL, *, write_wait: float = WRITE_WAIT) -> Engine:
    """A SQLAlchemy engine for ``url``, set up as the memory needs it."""
    if url.get_backend_name() == "sqlite":
        return _create_sqlite(url, write_wait)
    if url.get_driver_name() == "psycopg" and importlib.util.find_spec("psycopg") is None:
        raise ModuleNotFoundError(
            "a postgresql:// URL needs the PostgreSQL driver: "
            "pip install 'korely-memory-engine[postgres]' (psycopg 3)",
            name="psycopg",
        )
    # No liveness ping on every checkout (a round trip per read): a call that finds its pooled
    # connection dropped is run again once on a new one (``run_read``, ``run_write``).
    engine = sa.create_engine(url, pool_size=5, max_overflow=10)

    @event.listens_for(engine, "connect")
    def _in_utc(dbapi_connection: Any, _record: Any) -> None:
        # Times come back in UTC as the engine returns them, with no conversion per value.
        dbapi_connection.execute("SET TIME ZONE 'UTC'")
        dbapi_connection.commit()
        # A block's statement takes longer to plan than to run: prepare every statement at its
        # first run, so each connection plans it once.
        dbapi_connection.prepare_threshold = 0

    _watch_statements(engine)
    return engine


def close_on_return(engine: Engine, closed: Callable[[], bool]) -> None:
    """Once ``closed()``, close each connection as it comes back to the pool instead of keeping
    it: one checked out when the pool was disposed would otherwise stay open in the old pool."""

    @event.listens_for(engine, "checkin")
    def _returned(dbapi_connection: Any, record: Any) -> None:
        if closed() and dbapi_connection is not None:
            record.invalidate()


def forget_statements() -> None:
    """Empty the cache of compiled statements of every engine of this process (after an erasure).

    SQLAlchemy keeps each compiled statement with the statement it was first compiled from,
    bound values included: the words of a fact looked up or unindexed by value.
    """
    for engine in list(_ENGINES):
        cache = getattr(engine, "_compiled_cache", None)
        if cache is not None:
            cache.clear()


_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def _watch_statements(engine: Engine) -> None:
    _ENGINES.add(engine)  # every engine made here: ``forget_statements`` reaches them all

    @event.listens_for(engine, "after_cursor_execute")
    def _ran(conn: Connection, *_: Any) -> None:
        conn.info[_RAN] = True


LN = "korely_ln"
"""The natural logarithm, as SQLite connections of the engine know it."""


def _create_sqlite(url: URL, write_wait: float) -> Engine:
    memory = is_memory_sqlite(url)
    if not memory:
        _create_private(url)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
    if memory:
        # One connection shared by every thread, or each would see its own empty database.
        kwargs["poolclass"] = StaticPool
    engine = sa.create_engine(url, **kwargs)
    if not memory:  # in memory, the engine's one connection already takes turns
        _QUEUED[engine] = (_writers_of(url), write_wait)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(write_wait * 1000)}")
        if not memory:
            _into_wal(cursor, write_wait)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Deleted text must not linger in free pages (erasure).
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.close()
        # BM25's idf in SQL (SQLite has ln() only when built with its math functions).
        dbapi_connection.create_function(LN, 1, math.log, deterministic=True)

    _watch_statements(engine)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if not options.get(_WRITE, False):
            if options.get(_SNAPSHOT, True):
                conn.exec_driver_sql("BEGIN")
        elif options.get(_WAIT) is None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            _begin_within(conn, options[_WAIT], write_wait)

    return engine


def _into_wal(cursor: Any, write_wait: float) -> None:
    """Put the database in WAL mode, waiting up to ``write_wait`` seconds for the lock it needs.

    When processes open a new database at once, SQLite answers "database is locked" to all but
    one of them straight away: its busy handler does not wait for this lock.
    """
    _while_busy(lambda: cursor.execute("PRAGMA journal_mode=WAL"), write_wait)


def _create_private(url: URL) -> None:
    """Create the SQLite file readable and writable by its owner only (0600; no umask widens it):
    it holds personal data. SQLite gives its ``-wal`` and ``-shm`` files the database file's
    permissions. A file that exists is left as it is; a URI filename (``?uri=true``) is SQLite's
    to open.
    """
    path = url.database
    if not path or url.query.get("uri") in ("true", "1") or path.startswith("file:"):
        return
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return
    except OSError:  # no such directory, no permission: SQLite says so when it opens the file
        return


def _begin_within(conn: Connection, wait: float, write_wait: float) -> None:
    """BEGIN IMMEDIATE, giving up after ``wait`` seconds.

    SQLite's own busy handler sleeps in growing steps and overshoots a short
    timeout under load, so the wait is bounded here with short sleeps.
    """
    conn.exec_driver_sql("PRAGMA busy_timeout=0")
    try:
        _while_busy(lambda: conn.exec_driver_sql("BEGIN IMMEDIATE"), wait)
    finally:
        conn.exec_driver_sql(f"PRAGMA busy_timeout={int(write_wait * 1000)}")


def _while_busy(attempt: Callable[[], object], wait: float) -> None:
    """Run ``attempt`` again, in short sleeps, while SQLite answers that the database is busy,
    for up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    delay = 0.001
    while True:
        try:
            attempt()
            return
        except (OperationalError, sqlite3.OperationalError) as exc:
            left = deadline - time.monotonic()
            if not _sqlite_busy(exc) or left <= 0:
                raise
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.02)


# -- transactions -------------------------------------------------------------------


@contextlib.contextmanager
def reading(engine: Engine, *, snapshot: bool = True) -> Iterator[Connection]:
    """A read-only connection that takes no locks.

    With ``snapshot``, every statement reads from one snapshot (PostgreSQL at
    REPEATABLE READ; SQLite's WAL gives any transaction one). Without, each
    statement reads what is committed when it runs, outside any transaction: a
    read of one statement costs one round trip, no BEGIN and no COMMIT.
    """
    if engine.dialect.name == "postgresql":
        options: dict[str, Any] = {
            "isolation_level": "REPEATABLE READ" if snapshot else "AUTOCOMMIT"
        }
    else:
        options = {_SNAPSHOT: snapshot}
    with engine.connect().execution_options(**options) as conn, conn.begin():
        yield conn


def run_read(engine: Engine, work: Callable[[Connection], R], *, snapshot: bool = True) -> R:
    """Run ``work(conn)`` in ``reading``, once more on a new connection if the pooled one was
    dropped (a server restart, a failover): a read has nothing to undo."""
    for attempt in range(2):
        try:
            with reading(engine, snapshot=snapshot) as conn:
                return work(conn)
        except DBAPIError as exc:
            if attempt or not exc.connection_invalidated:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """One write transaction: committed whole or not at all."""
    with queued(engine) as left:
        options: dict[str, Any] = {_WRITE: True}
        if left is not None:  # it waited its turn: what is left of ``write_wait`` bounds BEGIN
            options[_WAIT] = left
        with engine.connect().execution_options(**options) as conn, conn.begin():
            yield conn


@contextlib.contextmanager
def writing_within(engine: Engine, wait: float) -> Iterator[Connection]:
    """A write transaction that waits at most ``wait`` seconds for a lock another one holds.

    PostgreSQL runs it at READ COMMITTED, so that a statement waiting for a
    row lock sees the row as its holder committed it.
    """
    with queued(engine, wait) as left:
        options = {_WRITE: True, _WAIT: wait if left is None else left}
        with engine.connect().execution_options(**options) as conn, conn.begin():
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(wait * 1000)}ms'")
            yield conn


@contextlib.contextmanager
def queued(engine: Engine, wait: float | None = None) -> Iterator[float | None]:
    """Wait for this process's turn to write to ``engine``'s SQLite file, at most ``wait``
    seconds (default: the engine's ``write_wait``), and hold it until the block ends.

    Yields what is left of the wait once it waited, None when it did not (or the database
    is not a SQLite file, whose writers need no turns).

    Raises:
        OperationalError: The turn did not come in time ("database is locked", as SQLite
            says when its lock does not come).
    """
    found = _QUEUED.get(engine)
    if found is None:
        yield None
        return
    writers, write_wait = found
    with writers.turn(write_wait if wait is None else wait) as left:
        yield left


class _Writers:
    """The writers of one SQLite file in this process, served in the order they came.

    SQLite's busy handler retries a waiting writer after growing sleeps, and any writer that
    asks in between takes the lock first: under steady writing from several threads, one of
    them can wait past its timeout while the others write again and again. Queued here first,
    the threads of a process take the file's write lock in turn, each behind at most the
    writers that came before it, and a writer that ends hands its turn to the next one (only
    that one wakes); SQLite's busy handler orders the processes.
    """

    def __init__(self) -> None:
        self.empty()

    def empty(self) -> None:
        """No writer waiting or writing (in a forked child, whose parent's threads are gone)."""
        self._lock = threading.Lock()
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._writing = False  # while False, nobody waits

    @contextlib.contextmanager
    def turn(self, wait: float) -> Iterator[float | None]:
        start = time.monotonic()
        with self._lock:
            mine = threading.Event() if self._writing else None
            if mine is None:
                self._writing = True
            else:
                self._waiting.append(mine)
        if mine is not None and not mine.wait(wait):
            with self._lock:
                handed = mine.is_set()  # the turn came as the wait ended
                if not handed:
                    self._waiting.remove(mine)
            if not handed:
                locked = sqlite3.OperationalError("database is locked")
                locked.sqlite_errorcode = _SQLITE_BUSY  # type: ignore[attr-defined]
                raise OperationalError("BEGIN IMMEDIATE", None, locked)
        waited = time.monotonic() - start
        try:
            yield max(wait - waited, 0.0) if waited > 0.001 else None
        finally:
            with self._lock:
                if self._waiting:
                    self._waiting.popleft().set()
                else:
                    self._writing = False


_QUEUED: weakref.WeakKeyDictionary[Engine, tuple[_Writers, float]] = weakref.WeakKeyDictionary()
# By path, while an engine on the file lives: a process that opens many files keeps no queue of
# one it closed.
_WRITERS: weakref.WeakValueDictionary[str, _Writers] = weakref.WeakValueDictionary()
_WRITERS_LOCK = threading.Lock()


def _writers_of(url: URL) -> _Writers:
    """The queue of this process's writers to the file ``url`` names (one for every engine on
    the same file)."""
    path = url.database or ""
    if not (url.query.get("uri") in ("true", "1") or path.startswith("file:")):
        path = os.path.realpath(path)
    with _WRITERS_LOCK:
        return _WRITERS.setdefault(path, _Writers())


def _forget_writers() -> None:
    """A forked child starts with no writer of its parent's in any queue."""
    global _WRITERS_LOCK
    _WRITERS_LOCK = threading.Lock()
    for writers in list(_WRITERS.values()):
        writers.empty()


os.register_at_fork(after_in_child=_forget_writers)


def run_write(engine: Engine, work: Callable[[Connection], R], attempts: int = 8) -> R:
    """Run ``work(conn)`` in a write transaction, again after a conflict another writer caused,
    or when the pooled connection turned out dropped before anything reached the server."""
    for attempt in range(attempts):
        reached: list[bool] = []
        try:
            with writing(engine) as conn:
                info = conn.info  # read through the dict: a dropped connection refuses its info
                info[_RAN] = False
                try:
                    return work(conn)
                finally:
                    reached.append(bool(info.get(_RAN)))
        except DBAPIError as exc:
            stale = exc.connection_invalidated and not any(reached)
            if attempt + 1 == attempts or not (stale or is_retryable(exc)):
                raise
            if not stale:
                time.sleep(random.uniform(0, 0.005 * (2**attempt)))
    raise AssertionError("unreachable")


def create_schema(engine: Engine, metadata: sa.MetaData) -> None:
    """Create the tables that are missing, safely when many processes start at once."""
    with writing(engine) as conn:  # on SQLite, BEGIN IMMEDIATE already serialises this
        lock(conn, "schema")
        metadata.create_all(conn)


# -- locks ----------------------------------------------------------------------------


def lock(conn: Connection, *parts: str | None, shared: bool = False) -> None:
    """Serialise the transactions that name the same ``parts`` until they end.

    PostgreSQL takes a transaction-scoped advisory lock on a hash of the parts
    (``shared``: many holders at once, none beside an exclusive one), scoped to
    the schema the tables are in: advisory locks belong to the whole database,
    and memories kept in two schemas of one database do not wait for each
    other. SQLite needs none: its writers run one at a time.
    """
    lock_all(conn, [parts], shared=shared)


def lock_all(conn: Connection, keys: Sequence[Sequence[str | None]], *, shared: bool) -> None:
    """``lock`` on each of ``keys``, in one round trip, in a fixed order (no circular waits)."""
    if conn.dialect.name != "postgresql" or not keys:
        return
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    ordered = sorted({_lock_key(k) for k in keys})
    calls = ", ".join(f"{function}(%s # {_SCHEMA_HASH})" for _ in ordered)
    conn.exec_driver_sql(f"SELECT {calls}", tuple(ordered))


# The same constant for every transaction in one schema, so that the fixed order of
# ``lock_all`` (of the keys before it is applied) holds within the schema.
_SCHEMA_HASH = "hashtextextended(coalesce(current_schema(), ''), 0)"


def _lock_key(parts: Sequence[str | None]) -> int:
    digest = hashlib.blake2b(
        "\x1f".join(p or "" for p in parts).encode(), digest_size=8, person=b"korely"
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_rows(select: sa.Select[Any], dialect: str, *, exclusive: bool = False) -> sa.Select[Any]:
    """``select`` made to hold its rows until the transaction ends, where the database can.

    PostgreSQL: ``FOR SHARE`` (``FOR UPDATE`` when ``exclusive``), so a writer
    that ends or deletes such a row waits, and a statement that waits on a row
    a writer holds sees it as the writer committed it. SQLite's writers do not
    interleave, so it needs none.
    """
    if dialect != "postgresql":
        return select
    return select.with_for_update(read=not exclusive)


# -- statements that differ ---------------------------------------------------------------


def insert_ignoring_duplicates(conn: Connection, table: sa.Table) -> Any:
    """``INSERT`` that skips rows whose primary key is already there."""
    return insert_ignoring_duplicates_for(conn.dialect.name, table)


@functools.cache
def insert_ignoring_duplicates_for(dialect: str, table: sa.Table) -> Any:
    """``insert_ignoring_duplicates`` for a dialect named ``sqlite`` or ``postgresql``."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).prefix_with("OR IGNORE")


def upsert_adding(
    conn: Connection,
    table: sa.Table,
    keys: Sequence[str],
    adding: Sequence[str],
    replacing: Sequence[str] = (),
) -> Any:
    """``INSERT`` that, when the keys clash, adds the new row's ``adding`` columns to the existing
    row's and sets its ``replacing`` columns."""
    return _upsert_adding(conn.dialect.name, table, tuple(keys), tuple(adding), tuple(replacing))


@functools.cache
def _upsert_adding(
    dialect: str,
    table: sa.Table,
    keys: tuple[str, ...],
    adding: tuple[str, ...],
    replacing: tuple[str, ...],
) -> Any:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    base = insert(table)
    return base.on_conflict_do_update(
        index_elements=[table.c[k] for k in keys],
        set_={
            **{c: table.c[c] + base.excluded[c] for c in adding},
            **{c: base.excluded[c] for c in replacing},
        },
    )


def dialect_name(conn_or_engine: Connection | Engine) -> str:
    """``sqlite`` or ``postgresql``."""
    return conn_or_engine.dialect.name


def _is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


# -- errors ---------------------------------------------------------------------------


def _pg_code(exc: BaseException) -> str | None:
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


def _sqlite_code(exc: BaseException) -> int | None:
    orig = getattr(exc, "orig", exc)  # SQLAlchemy's error wraps sqlite3's
    code = getattr(orig, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def _sqlite_busy(exc: BaseException) -> bool:
    code = _sqlite_code(exc)
    if code is not None:
        return code in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return "locked" in str(getattr(exc, "orig", exc)).lower()


def is_retryable(exc: BaseException) -> bool:
    """A conflict with another writer, after which the whole transaction may simply run again."""
    code = _pg_code(exc)
    if code is not None:
        return code in _RETRY_PG
    # SQLite writers queue on BEGIN IMMEDIATE; a unique violation there is a real bug.
    return False


def gives_way(exc: BaseException) -> bool:
    """A busy lock or a lost connection, to which the mark step yields (a programming error: no)."""
    if not isinstance(exc, DBAPIError) or isinstance(exc, IntegrityError):
        return False
    code = _pg_code(exc)
    if code is not None:
        return code.startswith(_GIVE_WAY_PG)
    if exc.connection_invalidated:
        return True
    sqlite_code = _sqlite_code(exc)
    if sqlite_code is not None:
        return sqlite_code in _GIVE_WAY_SQLITE
    said = str(exc.orig).lower()
    return isinstance(exc, OperationalError) and any(s in said for s in _GIVE_WAY_SQLITE_SAYS)


# -- making deletes physical ------------------------------------------------------------


def checkpoint(engine: Engine, url: URL, wait: float) -> bool:
    """Fold SQLite's write-ahead log into the file and empty it; True once it is empty.

    A connection that holds an older snapshot (a backup, a long report) keeps
    the log from being emptied; the checkpoint is tried again for up to
    ``wait`` seconds. In-memory SQLite has no file; PostgreSQL is not touched.
    """
    if engine.dialect.name != "sqlite":
        return False
    if is_memory_sqlite(url):
        return True
    deadline = time.monotonic() + wait
    delay = 0.005
    while True:
        with engine.connect() as conn:
            busy, _log, _done = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
        if not busy:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.1)


def scrub(engine: Engine, url: URL, tables: Sequence[sa.Table], wait: float) -> bool:
    """Make deleted rows physically gone from ``tables``; True when none is left in their files.

    SQLite zeroes deleted pages already: its write-ahead log is folded in and
    emptied (``checkpoint``). PostgreSQL keeps deleted rows in dead tuples until
    ``VACUUM FULL`` rewrites each table and its indexes (locking it meanwhile),
    but copies the rows a transaction older than the deletion may still see: it
    waits up to ``wait`` seconds for such transactions (of any session of the
    database) to end, and says False when one outlasted it, or when this role may
    not rewrite every table or look at every session (``_OLDER``).
    """
    if engine.dialect.name != "postgresql":
        return checkpoint(engine, url, wait)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        # Every deletion committed before now was made by a transaction numbered below `mark`.
        # VACUUM keeps the rows one deleted while any session's snapshot reaches back before it:
        # a transaction begun later may too, when an older one was still running as it began.
        mark = conn.exec_driver_sql("SELECT txid_current() %% 4294967296").scalar()
        deadline = time.monotonic() + wait
        while _older_snapshots(conn, mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        held = _older_snapshots(conn, mark)
        for table in tables:
            conn.exec_driver_sql(f'VACUUM FULL "{table.name}"')
        return not held and not _older_snapshots(conn, mark) and _rewritable(conn, tables)


def _rewritable(conn: Connection, tables: Sequence[sa.Table]) -> bool:
    """Whether this role may rewrite every one of ``tables``, and every partition of one
    (``korely db create --partitions``): VACUUM skips one it does not own with only a warning."""
    return bool(
        conn.exec_driver_sql(
            "SELECT bool_and(to_regclass(t) IS NOT NULL AND NOT EXISTS ("
            " SELECT 1 FROM pg_partition_tree(to_regclass(t)) p"
            " JOIN pg_class c ON c.oid = p.relid WHERE NOT pg_has_role(c.relowner, 'USAGE')))"
            " FROM unnest(%(names)s::text[]) AS t",
            {"names": [table.name for table in tables]},
        ).scalar()
    )


# What may keep rows deleted before transaction `mark` in VACUUM's copy: a session of this
# database holding an older snapshot or running an older transaction, or one this role may not
# look at (another role's, without pg_read_all_stats); a prepared transaction; a standby's
# feedback (its walsender, or a replication slot).
_OLDER = """
SELECT EXISTS (
    SELECT 1 FROM pg_stat_activity
    WHERE pid <> pg_backend_pid()
      AND (datname = current_database() AND (age(backend_xmin) > age(%(mark)s::text::xid)
                                             OR age(backend_xid) > age(%(mark)s::text::xid)
                                             OR state IS NULL)  -- hidden from this role
           OR backend_type = 'walsender' AND age(backend_xmin) > age(%(mark)s::text::xid))
) OR EXISTS (
    SELECT 1 FROM pg_prepared_xacts
    WHERE database = current_database() AND age(transaction) > age(%(mark)s::text::xid)
) OR EXISTS (
    SELECT 1 FROM pg_replication_slots
    WHERE (database IS NULL OR database = current_database())
      AND age(xmin) > age(%(mark)s::text::xid)
)
"""


def _older_snapshots(conn: Connection, mark: Any) -> bool:
    """Whether anything may still see rows deleted before transaction ``mark`` began, which
    VACUUM must then keep (``_OLDER``)."""
    return bool(conn.exec_driver_sql(_OLDER, {"mark": mark}).scalar())


def server_time(conn: Connection) -> dt.datetime:
    """The database server's clock now (PostgreSQL), in UTC: the one clock of every process."""
    moment: dt.datetime = conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
    return moment.astimezone(dt.timezone.utc)


def binds_arrays(dialect: Dialect) -> bool:
    """Whether one parameter may hold a list of values (PostgreSQL arrays); else one per value."""
    return dialect.name == "postgresql"
