"""What the engine runs on: SQLite through Python's sqlite3 and PostgreSQL 12 or later through
psycopg 3. Any other database, driver or server is refused before anything is written, by the
engine and by the command alike, and the message never repeats a password."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.pool import Pool

from korely_memory import InvalidRequest, MemoryEngine
from korely_memory._db._database import resolve_url

from .cli_helpers import korely, one_error

SUPPORTED = "SQLite (sqlite:///path/to/memory.db) and PostgreSQL 12 or later"


@pytest.mark.parametrize(
    ("url", "dialect"),
    [
        ("mysql+pymysql://korely:secret@127.0.0.1/memory", "mysql"),
        ("mysql:///memory.db", "mysql"),
        ("cockroachdb://root:secret@127.0.0.1:26257/defaultdb", "cockroachdb"),
        ("cockroachdb:///memory.db", "cockroachdb"),
        ("mssql+pyodbc://sa:secret@127.0.0.1/memory?driver=ODBC+Driver+18", "mssql"),
        ("oracle+oracledb://scott@127.0.0.1/?service_name=memory", "oracle"),
    ],
)
def test_another_database_is_refused_by_name_before_anything_is_made(
    url: str, dialect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidRequest) as refused:
        MemoryEngine(url)
    assert refused.value.field == "url"
    assert refused.value.message == (
        f"url: {dialect} databases are not supported: the engine runs on {SUPPORTED} "
        "(postgresql://...)"
    )
    assert "secret" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # a path-like URL made no file


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("sqlite+aiosqlite:///{tmp}/memory.db", "aiosqlite"),
        ("postgresql+asyncpg://korely:secret@127.0.0.1/test", "asyncpg"),
        ("postgresql+psycopg_async://korely:secret@127.0.0.1/test", "psycopg_async"),
    ],
)
def test_an_asyncio_driver_is_refused_by_name(url: str, driver: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest) as refused:
        MemoryEngine(url.format(tmp=tmp_path))
    said = str(refused.value)
    assert refused.value.field == "url"
    assert said.startswith(
        f"url: the {driver} driver is for asyncio, and the engine is synchronous"
    )
    assert "secret" not in said
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "postgresql+psycopg2://korely:secret@127.0.0.1/test",
            "the psycopg2 driver is not supported: PostgreSQL is opened with psycopg 3",
        ),
        (
            "postgresql+pg8000://korely:secret@127.0.0.1/test",
            "the pg8000 driver is not supported: PostgreSQL is opened with psycopg 3",
        ),
        (
            "sqlite+pysqlcipher://:secret@/{tmp}/memory.db",
            "the pysqlcipher driver is not supported: SQLite is opened with Python's sqlite3",
        ),
    ],
)
def test_another_driver_of_sqlite_or_postgresql_is_refused_by_name(
    url: str, said: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        MemoryEngine(url.format(tmp=tmp_path))
    assert refused.value.field == "url"
    assert str(refused.value).startswith(f"url: {said} (")
    assert "secret" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "read_as"),
    [
        ("postgresql://korely@127.0.0.1/test", "postgresql+psycopg://korely@127.0.0.1/test"),
        ("postgres://korely@127.0.0.1/test", "postgresql+psycopg://korely@127.0.0.1/test"),
        ("postgresql+psycopg://korely@127.0.0.1/test", None),
        ("postgres+psycopg://korely@127.0.0.1/test", "postgresql+psycopg://korely@127.0.0.1/test"),
        ("sqlite:///memory.db", None),
        ("sqlite+pysqlite:///memory.db", None),
        ("sqlite://", None),
    ],
)
def test_the_supported_urls_are_taken(url: str, read_as: str | None) -> None:
    assert resolve_url(url).render_as_string(hide_password=False) == (read_as or url)


# -- the server ---------------------------------------------------------------------------------

POSTGRES_11 = (
    "PostgreSQL 11.22 (Debian 11.22-1.pgdg120+1) on x86_64-pc-linux-gnu, "
    "compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit"
)
COCKROACH = "CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu, built 2023/09/27 01:53:43, go1.19.10)"


@contextlib.contextmanager
def server_says(version: str) -> Iterator[None]:
    """Engines made inside read ``version`` as what the server's ``version()`` returns: SQLAlchemy
    parses it at the first connection as it would the server's own. Everything else is the real
    server. On the way out, every connection they opened is closed."""
    opened: list[tuple[Pool, Any]] = []

    def read(dialect: PGDialect, connection: Any) -> Any:
        opened.append((connection.engine.pool, connection.connection.dbapi_connection))
        said = SimpleNamespace(exec_driver_sql=lambda _sql: SimpleNamespace(scalar=lambda: version))
        return PGDialect._get_server_version_info(dialect, said)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PGDialect_psycopg, "_get_server_version_info", read)
        yield
    for pool, dbapi_connection in opened:
        assert dbapi_connection.closed
        # SQLAlchemy closes a connection whose first connect failed without the pool's close
        # event: announce it, for the check that each test closes what it opens.
        pool.dispatch.close(dbapi_connection, None)


def memory_tables(url: str) -> list[str]:
    db = sa.create_engine(url)
    with db.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).scalars()
        tables = sorted(found)
    db.dispose()
    return tables


@pytest.mark.new_database
@pytest.mark.parametrize(
    ("version", "said"),
    [
        (POSTGRES_11, "the server is PostgreSQL 11.22, older than 12"),
        (COCKROACH, f"the server is not PostgreSQL (its version() is {COCKROACH!r})"),
    ],
    ids=["postgresql-11", "cockroachdb"],
)
def test_a_server_too_old_or_not_postgresql_is_refused_before_anything_is_written(
    postgresql_url: str, version: str, said: str
) -> None:
    with server_says(version), pytest.raises(InvalidRequest) as refused:
        MemoryEngine(postgresql_url)
    assert refused.value.field == "url"
    assert str(refused.value) == f"url: {said}: the engine runs on {SUPPORTED} (postgresql://...)"
    assert memory_tables(postgresql_url) == []  # and no connection is left open (conftest)


def test_a_current_postgresql_is_taken(postgresql_url: str) -> None:
    with MemoryEngine(postgresql_url) as engine:
        assert engine.db.dialect.server_version_info >= (12,)


# -- the command ---------------------------------------------------------------------------------


def test_the_command_refuses_another_database_or_driver_in_one_line(tmp_path: Path) -> None:
    mysql = korely("--url", "mysql://korely:secret@127.0.0.1/memory", "stats")
    said = one_error(mysql, "invalid_request")
    assert said.startswith("korely: invalid_request: url: mysql databases are not supported")
    assert "secret" not in mysql.stderr
    aiosqlite = korely("--url", f"sqlite+aiosqlite:///{tmp_path}/memory.db", "db", "upgrade")
    said = one_error(aiosqlite, "invalid_request")
    assert said.startswith("korely: invalid_request: url: the aiosqlite driver is for asyncio")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.new_database
def test_the_command_refuses_an_old_postgresql_before_anything_is_written(
    postgresql_url: str,
) -> None:
    with server_says(POSTGRES_11):
        for command in (["db", "upgrade"], ["stats"], ["db", "current"]):
            said = one_error(korely("--url", postgresql_url, *command), "invalid_request")
            assert said.startswith("korely: invalid_request: url: the server is PostgreSQL 11.22")
    assert memory_tables(postgresql_url) == []
