"""Databases for every test of the project: a fresh SQLite file and a fresh PostgreSQL schema;
and ``giulia``, the identity most tests act for.

PostgreSQL is the one at ``$KORELY_TEST_POSTGRES_URL`` (default: the local
server, user postgres, database test). Without it, its tests skip, unless
``KORELY_REQUIRE_POSTGRES=1`` (CI), where they fail.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine

POSTGRES_URL = os.environ.get(
    "KORELY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
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


@pytest.fixture
def postgresql_url() -> Iterator[str]:
    """A URL whose connections use a fresh, empty schema, dropped afterwards."""
    require_postgres()
    schema = f"korely_t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = sa.make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: os.PathLike[str]) -> str:
    return f"sqlite:///{tmp_path}/korely.db"


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str:
    """Every test that takes it runs once on SQLite and once on PostgreSQL."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def engine(db_url: str) -> Iterator[MemoryEngine]:
    with MemoryEngine(db_url) as eng:
        yield eng


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
