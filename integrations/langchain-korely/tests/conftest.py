"""Fixtures of the LangChain adapter's tests.

The `engine` fixture (a fresh SQLite file, and a fresh PostgreSQL schema) comes
from the repository's root conftest. No test reaches the network: the root
conftest makes a connection to anything but this machine fail.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from korely_memory import MemoryEngine


@pytest.fixture(params=["invoke", "ainvoke"])
def use_async(request: pytest.FixtureRequest) -> bool:
    """A test that takes it runs once through the sync API and once through the async one."""
    return request.param == "ainvoke"


@pytest.fixture(params=["system", "context", "notes"])
def placement(request: pytest.FixtureRequest) -> str:
    """A test that takes it runs once with each placement of the block."""
    return str(request.param)


class Outage:
    """A PostgreSQL database reached through a relay on this machine, which a test can cut.

    Cutting closes the relay and every connection through it: the engine then
    meets a database that is down, as it would when the server goes away.
    """

    def __init__(self, url: str) -> None:
        target = sa.make_url(url)
        self._target = (target.host or "127.0.0.1", target.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()
        relayed = target.set(host="127.0.0.1", port=self.port)
        self.engine = MemoryEngine(relayed.render_as_string(hide_password=False))

    def cut(self) -> None:
        with self._lock:
            for sock in [self._listener, *self._sockets]:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._target)
            except OSError:
                return
            with self._lock:
                self._sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def outage(postgresql_url: str) -> Iterator[Outage]:
    """An engine on a PostgreSQL database that the test can take down (`outage.cut()`)."""
    relay = Outage(postgresql_url)
    try:
        yield relay
    finally:
        relay.cut()
        relay.engine.close()
