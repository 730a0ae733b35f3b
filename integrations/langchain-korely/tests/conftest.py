"""Fixtures of the LangChain adapter's tests.

The `engine` fixture (a fresh SQLite file, and a fresh PostgreSQL schema when
one is reachable) comes from the repository's root conftest. No test reaches
the network: a connection to anything but this machine fails.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import pytest
from korely_memory import Identity

Connect = Callable[[socket.socket, Any], Any]


@pytest.fixture
def giulia() -> Identity:
    return Identity(account="acme", user="giulia", agent="support-copilot")


@pytest.fixture(params=["invoke", "ainvoke"])
def use_async(request: pytest.FixtureRequest) -> bool:
    """A test that takes it runs once through the sync API and once through the async one."""
    return request.param == "ainvoke"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any connection that would leave this machine (the test databases are on loopback)."""
    monkeypatch.setattr(socket.socket, "connect", local_only(socket.socket.connect))


def local_only(connect: Connect) -> Connect:
    """`connect`, refusing addresses other than loopback; also used by the example's subprocess."""

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
