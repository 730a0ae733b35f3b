"""Databases for every test of the project: a SQLite file and a PostgreSQL schema of its own,
each with the memory's tables and no rows (a test marked ``new_database`` gets one with nothing
in it); ``giulia``, the identity most tests act for; and a check that every test closes what it
opens.

PostgreSQL is the one at ``$KORELY_TEST_POSTGRES_URL`` (default: the local
server, user postgres, database test). Without it, its tests skip, unless
``KORELY_REQUIRE_POSTGRES=1`` (CI), where they fail. With ``KORELY_TEST_PARTITIONS=N``, its
tables are hash-partitioned by account into N partitions (``korely db create --partitions N``),
as a database distributed by account requires them to be.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import shutil
import socket
import sqlite3
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.pool import Pool

from korely_memory import Identity, MemoryEngine
from korely_memory._db import _database, _migrations
from korely_memory._db._migrations import VERSION_TABLE
from korely_memory._db._schema import Base

POSTGRES_URL = os.environ.get(
    "KORELY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
PARTITIONS = int(os.environ.get("KORELY_TEST_PARTITIONS") or 0)
BACKENDS = ["sqlite", "postgresql"]

Connect = Callable[[socket.socket, Any], Any]

_postgres_error: str | None = None
_postgres_checked = False


def _postgres_unavailable() -> str | None:
    global _postgres_checked, _postgres_error
    if not _postgres_checked:
        _postgres_checked = True
        try:
            probe = sa.create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
            with probe.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            probe.dispose()
        except Exception as exc:  # any reason at all means: no PostgreSQL here
            _postgres_error = (
                f"PostgreSQL not reachable at {POSTGRES_URL}: {exc.__class__.__name__}: {exc}"
            )
    return _postgres_error


def require_postgres() -> None:
    reason = _postgres_unavailable()
    if reason is None:
        return
    if os.environ.get("KORELY_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"KORELY_REQUIRE_POSTGRES=1 but {reason}")
    pytest.skip(reason)


# The slowest tests (seconds each, a quiet 2-vCPU machine, before the smoke sizes shrank): each
# worker starts its share of them first, so that none is left to start last.
SLOW = {
    "tests/test_benchmarks_smoke.py::test_smoke_run_prints_the_table": 75,
    "tests/reliability/test_model.py::test_engine_agrees_with_the_model_of_the_spec": 43,
    "tests/test_benchmarks_smoke.py::test_locomo_on_one_conversation_prints_its_tables": 32,
    "tests/reliability/test_isolation.py::test_no_answer_shows_what_its_identity_may_not_see": 22,
    "integrations/korely-server/tests/test_server_load.py::"
    "test_twenty_clients_at_once_are_all_served_and_every_write_is_kept": 9,
    "integrations/korely-server/tests/test_server_browser.py::"
    "test_a_person_with_thousands_of_versions_is_shown_a_page_at_a_time": 10,
    "tests/test_concurrency.py::test_racing_processes_on_postgresql": 8,
    "tests/test_told_once.py::test_told_once_with_processes_on_postgresql": 6,
    "integrations/llama-index-memory-korely/tests/test_llamaindex_chat_store.py::"
    "test_forty_conversations_start_together_on_one_chat_store": 6,
    "tests/test_erasure.py::test_no_cache_of_the_process_keeps_an_erased_word": 4,
    "integrations/langchain-korely/tests/test_store_langgraph_async.py::"
    "test_large_batches_async": 5,
    "integrations/korely-mcp/tests/test_mcp_example.py::"
    "test_the_example_tells_the_laptop_of_the_phones_correction_once": 5,
    "tests/test_concurrency.py::test_racing_threads": 4,
    "integrations/llama-index-memory-korely/tests/test_llamaindex_notes.py::"
    "test_notes_meet_the_targets_against_the_other_placements": 4,
    "tests/test_told_once.py::test_told_once_with_threads": 4,
    "tests/reliability/test_told_once_processes.py::"
    "test_each_change_is_told_once_to_readers_of_distinct_names": 4,
    "integrations/langchain-korely/tests/test_store_langgraph_async.py::test_large_batches": 4,
    "tests/reliability/test_faults.py::test_a_writer_killed_mid_write_leaves_no_partial_version": 4,
    "tests/reliability/test_told_once_processes.py::"
    "test_each_change_is_told_once_to_one_name_read_by_many_processes": 4,
    "integrations/korely-mcp/tests/test_mcp_stdio.py::"
    "test_a_change_is_told_in_one_conversation_of_one_call_and_not_in_the_next": 4,
    "integrations/langchain-korely/tests/test_langchain_example.py::"
    "test_the_demo_captures_facts_and_a_correction_told_once": 3,
    "integrations/korely-server/tests/test_server_browser.py::"
    "test_an_administrator_reviews_exports_and_erases_in_the_browser": 3,
    "tests/reliability/test_told_once_threads.py::"
    "test_each_change_is_told_once_to_one_name_read_by_threads_of_one_engine": 3,
    "tests/reliability/test_told_once_threads.py::"
    "test_each_change_is_told_once_to_one_name_read_by_engines_of_one_process": 3,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In each worker of ``--dist=worksteal``, order the tests so that each worker's first share
    starts with its part of the ``SLOW`` ones.

    The scheduler hands worker i the i-th of as many equal runs of the list as there are
    workers, then moves tests from the end of a busy worker's share to an idle one. The slow
    tests go, longest first, to the share with the least slow seconds so far, at its head;
    every other test keeps its place in the order of the collection.
    """
    workers = getattr(config, "workerinput", {}).get("workercount", 0)
    if workers < 2:  # (a worker's ``--dist`` reads "no": its controller schedules)
        return

    def seconds(item: pytest.Item) -> float:
        return SLOW.get(item.nodeid.partition("[")[0], 0)

    sizes = []
    left = len(items)
    for i in range(workers):  # as the scheduler splits the list
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    heads: list[list[pytest.Item]] = [[] for _ in sizes]
    load = [0.0] * workers
    for item in sorted((i for i in items if seconds(i)), key=seconds, reverse=True):
        share = min((s for s in range(workers) if len(heads[s]) < sizes[s]), key=lambda s: load[s])
        heads[share].append(item)
        load[share] += seconds(item)
    rest = iter(i for i in items if not seconds(i))
    items[:] = [
        item
        for head, size in zip(heads, sizes, strict=True)
        for item in [*head, *itertools.islice(rest, size - len(head))]
    ]


@pytest.fixture
def postgresql_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL whose connections use a schema of their own: at the newest revision with no rows,
    or, for a test marked ``new_database``, with nothing in it at all."""
    with _fresh_schema(new=request.node.get_closest_marker("new_database") is not None) as url:
        yield url


@pytest.fixture
def other_postgresql_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A second schema in the same database as ``postgresql_url``'s, made the same way."""
    with _fresh_schema(new=request.node.get_closest_marker("new_database") is not None) as url:
        yield url


# A test's commits are visible to every other session at once, as always, but do not wait for
# the server to flush its log to disk (6 ms a commit on the test machines, most of what a
# PostgreSQL test waits for): only a crash of the server itself could lose one, and no test
# crashes the server.
SESSION_OPTIONS = "-csynchronous_commit=off"


def _schema_url(schema: str) -> str:
    url = sa.make_url(POSTGRES_URL).update_query_dict(
        {"options": f"-csearch_path={schema} {SESSION_OPTIONS}"}
    )
    return url.render_as_string(hide_password=False)


@contextlib.contextmanager
def _fresh_schema(*, new: bool = False) -> Iterator[str]:
    """A schema for one test, dropped afterwards, or emptied and kept for the next.

    Creating the memory's tables is most of what an ordinary PostgreSQL test costs. A test
    that leaves them exactly as the engine creates them hands its schema back: its rows are
    truncated and the next test of this process gets it. Anything else a test did (another
    revision, a table dropped, renamed or added, a lock held past the wait) drops the schema.
    """
    require_postgres()
    with _admin().connect() as conn:
        if _SPARE and not new:
            schema = _SPARE.pop()
        else:  # the engine makes the tables, unless they are to be partitioned
            schema = _new_schema(conn, tables=bool(PARTITIONS) and not new)
    try:
        yield _schema_url(schema)
    finally:
        with _admin().connect() as conn:
            if not _emptied(conn, schema):
                conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
                _tidy_catalog(conn)


_ADMIN: list[sa.Engine] = []


def _admin() -> sa.Engine:
    """This process's engine that makes and empties the schemas, open from its first PostgreSQL
    test to the end of the session: a connection each test would cost more than the test."""
    if not _ADMIN:
        admin = sa.create_engine(
            POSTGRES_URL,
            isolation_level="AUTOCOMMIT",
            pool_size=1,
            connect_args={"options": SESSION_OPTIONS},
        )
        # Not a connection any test opened: the check that each test closes its own skips it.
        event.listen(
            admin, "connect", lambda dbapi_connection, _: OPEN_CONNECTIONS.forget(dbapi_connection)
        )
        _ADMIN.append(admin)
    return _ADMIN[0]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the schemas this process kept for its next test, so that a run leaves none."""
    for admin in _ADMIN:
        with admin.connect() as conn:
            while _SPARE:
                conn.exec_driver_sql(f'DROP SCHEMA "{_SPARE.pop()}" CASCADE')
        admin.dispose()


_SPARE: list[str] = []  # this process's schemas at the newest revision, with no rows
_HEAD_SHAPE: list[str] = []
_USES: dict[str, int] = {}


def _new_schema(conn: sa.Connection, *, tables: bool) -> str:
    schema = f"korely_t_{uuid.uuid4().hex[:12]}"
    conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    if tables and PARTITIONS:
        made = _database.create(_database.resolve_url(_schema_url(schema)))
        with _migrations.schema_transaction(made) as new:
            _migrations.create_partitioned(new, PARTITIONS)
        made.dispose()
    if tables:
        MemoryEngine(_schema_url(schema)).close()
    return schema


def _emptied(conn: sa.Connection, schema: str) -> bool:
    """Truncate ``schema``'s tables and keep it as a spare, if it is as the engine makes it."""
    if not _HEAD_SHAPE:
        reference = _new_schema(conn, tables=True)
        _HEAD_SHAPE.extend(_shape(conn, reference))
        _SPARE.append(reference)
    if _shape(conn, schema) != _HEAD_SHAPE:
        return False
    # DELETE, children first, costs a few milliseconds where TRUNCATE costs sixty; every 25th
    # time a TRUNCATE lets the rows the deletes left dead go.
    _USES[schema] = _USES.get(schema, 0) + 1
    tables = [f'"{schema}"."{table.name}"' for table in reversed(Base.metadata.sorted_tables)]
    if _USES[schema] % 25:
        empty = "; ".join(f"DELETE FROM {table}" for table in tables)
    else:
        empty = f"TRUNCATE {', '.join(tables)}"
    restart = (
        "SELECT setval(c.oid, 1, false) FROM pg_class c JOIN pg_namespace n"
        f" ON n.oid = c.relnamespace WHERE c.relkind = 'S' AND n.nspname = '{schema}'"
    )
    conn.exec_driver_sql("SET lock_timeout = '2s'")
    try:
        conn.exec_driver_sql(f"BEGIN; {empty}; {restart}; COMMIT")
    except sa.exc.OperationalError:  # something still holds a table: drop the schema instead
        conn.exec_driver_sql("ROLLBACK")
        return False
    finally:
        conn.exec_driver_sql("RESET lock_timeout")
    _SPARE.append(schema)
    return True


# What a schema holds, by name and kind: its tables, indexes, columns, constraints, triggers,
# routines; and the revision it records.
_SHAPE = """
SELECT 'relation ' || c.relname || ' ' || c.relkind::text
FROM pg_class c WHERE c.relnamespace = n.oid
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || a.atttypid || ' ' || a.atttypmod
       || ' ' || a.attnotnull || ' ' || a.atthasdef
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = n.oid AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint ' || conname || ' ' || contype::text
FROM pg_constraint WHERE connamespace = n.oid
UNION ALL
SELECT 'trigger ' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = n.oid
UNION ALL
SELECT 'routine ' || p.proname FROM pg_proc p WHERE p.pronamespace = n.oid
"""


def _shape(conn: sa.Connection, schema: str) -> list[str]:
    rows = conn.exec_driver_sql(
        f"SELECT x FROM pg_namespace n, LATERAL ({_SHAPE}) AS s(x) WHERE n.nspname = %(schema)s",
        {"schema": schema},
    ).scalars()
    shape = sorted(rows)
    if any(row.startswith(f"relation {VERSION_TABLE} ") for row in shape):
        version = conn.exec_driver_sql(
            f'SELECT version_num FROM "{schema}"."{VERSION_TABLE}"'
        ).scalars()
        shape.append(f"revision {sorted(version)}")
    return shape


_dropped = 0
CATALOG = ("pg_class", "pg_attribute", "pg_depend", "pg_type", "pg_index", "pg_constraint")


def _tidy_catalog(conn: sa.Connection) -> None:
    """Every 100 schemas dropped, let PostgreSQL reuse the catalog rows they left.

    Each test's schema adds and then deletes a few hundred catalog rows; where autovacuum is
    off (as on some test machines), they pile up and every later statement that plans reads
    past them. A plain VACUUM takes no lock that waits on the tests running beside it.
    """
    global _dropped
    _dropped += 1
    if _dropped % 100 == 0:
        with contextlib.suppress(sa.exc.DBAPIError):  # not the catalog's owner: let it be
            conn.exec_driver_sql(f"VACUUM {', '.join(CATALOG)}")


@pytest.fixture
def sqlite_url(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """A SQLite file of the test's own: a copy of one at the newest revision with no rows, or,
    for a test marked ``new_database``, none yet."""
    path = tmp_path / "korely.db"
    if request.node.get_closest_marker("new_database") is None:
        shutil.copyfile(_sqlite_template(tmp_path_factory), path)
    return f"sqlite:///{path}"


_SQLITE_TEMPLATE: list[Path] = []


def _sqlite_template(factory: pytest.TempPathFactory) -> Path:
    """This process's SQLite file with the memory's tables and no rows (copying it costs a tenth
    of creating the tables)."""
    if not _SQLITE_TEMPLATE:
        path = factory.mktemp("template") / "korely.db"
        MemoryEngine(f"sqlite:///{path}").close()
        conn = sqlite3.connect(path)
        try:  # what opening wrote (the language agreed) goes, as the spare schemas' rows do
            tables = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name <> ?",
                (VERSION_TABLE,),
            ).fetchall()
            for (table,) in tables:
                conn.execute(f'DELETE FROM "{table}"')
            conn.commit()
            conn.execute("VACUUM")
        finally:
            conn.close()
        assert not path.with_name(path.name + "-wal").exists(), "the template is not whole"
        _SQLITE_TEMPLATE.append(path)
    return _SQLITE_TEMPLATE[0]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str:
    """Every test that takes it runs once on SQLite and once on PostgreSQL."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def engine(db_url: str) -> Iterator[MemoryEngine]:
    with MemoryEngine(db_url) as eng:
        yield eng


@pytest.fixture
def exported() -> Callable[..., list[str]]:
    """``exported(module, *also)``: what the module's ``__all__`` must be."""
    return _exported


def _exported(module: ModuleType, *also: str) -> list[str]:
    """What ``__all__`` must be, as httpx pins its own: every name in ``vars(module)`` that does
    not start with "_" (but not its own submodules, bound when anything imports them) and
    ``also``, in ruff's order for ``__all__``: constants, then classes, then the rest."""
    inside = module.__name__ + "."
    names = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not (isinstance(value, ModuleType) and value.__name__.startswith(inside))
    }
    return sorted(
        names | set(also), key=lambda n: (0 if n.isupper() else int(n[0].islower()) + 1, n)
    )


@pytest.fixture
def giulia() -> Identity:
    """Giulia of the account acme, served by the support copilot: the person most tests act for."""
    return Identity("acme", "giulia", "support-copilot")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any connection that would leave this machine (the test databases are on loopback)."""
    monkeypatch.setattr(socket.socket, "connect", local_only(socket.socket.connect))


def local_only(connect: Connect) -> Connect:
    """``connect``, refusing addresses other than loopback.

    The examples' subprocesses use it too.
    """

    def guarded(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            raise AssertionError(f"a test tried to reach {address}")
        return connect(sock, address)

    return guarded


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenConnections:
    """Every database connection a SQLAlchemy pool opened and has not closed, with where.

    Any pool, in any thread: the engine's, an admin engine of a test, LlamaIndex's chat store.
    A connection left open is closed by the garbage collector whenever it next runs, with a
    ``ResourceWarning`` (psycopg; sqlite3 from Python 3.13) that fails whichever test runs
    then; checking at the end of each test fails the one that left it instead.
    """

    def __init__(self) -> None:
        self._open: dict[int, tuple[Any, str]] = {}
        self._lock = threading.Lock()
        event.listen(Pool, "connect", self._opened)
        event.listen(Pool, "close", self._closed)
        event.listen(Pool, "close_detached", self._closed)

    def _opened(self, dbapi_connection: Any, *_: Any) -> None:
        where = "".join(traceback.format_stack(limit=16)[:-2])
        thread = threading.current_thread().name
        with self._lock:
            self._open[id(dbapi_connection)] = (
                dbapi_connection,
                f"opened in thread {thread}:\n{where}",
            )

    def _closed(self, dbapi_connection: Any, *_: Any) -> None:
        with self._lock:
            self._open.pop(id(dbapi_connection), None)

    forget = _closed

    def close_since(self, before: set[int], wait: float) -> list[str]:
        """Close the connections opened since ``before`` (a ``snapshot``) and still open after
        ``wait`` seconds, so that no later test meets them; returns where each was opened.

        The wait lets work still finishing in another thread (an acknowledgement, a capture)
        return its connection to an engine that closes it then.
        """
        deadline = time.monotonic() + wait
        while self._left(before) and time.monotonic() < deadline:
            time.sleep(0.01)
        with self._lock:
            left = {key: found for key, found in self._open.items() if key not in before}
            for key in left:
                del self._open[key]
        for connection, _ in left.values():
            with contextlib.suppress(Exception):
                connection.close()
        return [where for _, where in left.values()]

    def _left(self, before: set[int]) -> bool:
        with self._lock:
            return any(key not in before for key in self._open)

    def snapshot(self) -> set[int]:
        with self._lock:
            return set(self._open)


OPEN_CONNECTIONS = OpenConnections()


@pytest.fixture(autouse=True)
def connections_closed() -> Iterator[None]:
    """Fail the test that leaves a database connection open, once its fixtures are torn down.

    Engines made for one test are closed by it (``with MemoryEngine(...)``, the ``engine``
    fixture, ``create_engine(...).dispose()``); work a test starts in another thread is
    finished before it returns.
    """
    before = OPEN_CONNECTIONS.snapshot()
    yield
    left = OPEN_CONNECTIONS.close_since(before, wait=2.0)
    if left:
        pytest.fail(
            f"{len(left)} database connection(s) left open; the first was {left[0]}",
            pytrace=False,
        )
