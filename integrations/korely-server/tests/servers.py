"""Starting `korely-server` as a subprocess on a free loopback port, with a token file of four
callers, and HTTP clients that send their tokens.

Every server runs under the tests' network guard (the root conftest's ``local_only``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from korely_mcp import hash_token
from korely_memory import Identity, MemoryEngine
from tests import processes

# The certificates a new httpx client loads (a fifth of a second on the test machines, for each
# of the hundreds of clients the tests open), loaded once: the clients speak plain HTTP to the
# loopback servers, and would verify any other the same way.
TLS = httpx.create_ssl_context()


@functools.cache
def mcp_tls() -> ssl.SSLContext:
    """The same for httpx2, the MCP SDK's client (imported by the tests that use it)."""
    import httpx2

    return httpx2.create_ssl_context()


ACCOUNT, AGENT = "acme", "support-copilot"
GIULIA = Identity(ACCOUNT, "giulia", AGENT)
MARCO = Identity(ACCOUNT, "marco", AGENT)
ADMIN = Identity(ACCOUNT, "ada", AGENT)

TOKENS = {
    # A person's own clients: Giulia's laptop, Marco's laptop.
    "giulia": ("ksrv_giulia-" + "g" * 32, GIULIA, "giulia-laptop", {}),
    "marco": ("ksrv_marco-" + "m" * 32, MARCO, "marco-laptop", {}),
    # The application's backend: any user of the account, named in each request.
    "backend": (
        "ksrv_backend-" + "b" * 32,
        Identity(ACCOUNT, None, AGENT),
        "backend",
        {"any_user": True},
    ),
    # An administrator (granted in the engine by `running`).
    "admin": ("ksrv_admin-" + "a" * 32, ADMIN, "admin-console", {"admin": True}),
    # Another account's backend.
    "other": (
        "ksrv_other-" + "o" * 32,
        Identity("globex", None, AGENT),
        "other",
        {"any_user": True},
    ),
}


def token_entry(name: str) -> dict[str, Any]:
    """The token file's entry for the caller ``name`` of `TOKENS`."""
    token, who, reader, flags = TOKENS[name]
    return {
        "name": name,
        "sha256": hash_token(token),
        "account": who.account,
        "user": who.user,
        "agent": who.agent,
        "reader": reader,
        **flags,
    }


def write_tokens(path: Path, names: Sequence[str] = tuple(TOKENS)) -> Path:
    """A token file of the callers ``names``, written in one step and for its owner only."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps({"tokens": [token_entry(n) for n in names]}, indent=2))
    partial.chmod(0o600)
    partial.replace(path)
    return path


def command(*args: str, pid_file: Path | None = None) -> list[str]:
    """The command line of `korely-server ARGS`, forked from the tests' process server."""
    return processes.command("-m", "korely_server", *args, pid_file=pid_file)


@dataclass
class Server:
    """A running server: its base URL, its process (the launcher `command` starts: stopping it
    stops the server gracefully), its log and database, and the server's own process id."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    database: str
    pid: int

    def client(self, caller: str | None, **options: Any) -> httpx.Client:
        """An HTTP client of the server sending the token of ``caller`` (None: no token)."""
        headers = {} if caller is None else {"Authorization": f"Bearer {TOKENS[caller][0]}"}
        options = {"timeout": 60, "verify": TLS, **options}
        return httpx.Client(base_url=self.url, headers=headers, **options)


@contextlib.contextmanager
def running(
    database: str | None,
    folder: Path,
    *flags: str,
    admin: bool = True,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Server]:
    """A server on ``database`` with every caller of `TOKENS`; yields it, stops it after.

    With ``admin``, the administrator's user is granted administration of the account first.
    With no ``database``, no ``--url`` is given: the server opens its default, in ``cwd`` (the
    tests' own folder by default), with ``env`` as its environment.
    """
    if admin:
        assert database is not None
        with contextlib.closing(MemoryEngine(database)) as engine:
            assert ADMIN.user is not None
            engine.grant_admin(ADMIN.account, ADMIN.user)
    tokens = write_tokens(folder / "tokens.json")
    log, pid_file = folder / "server.log", folder / "server.pid"
    named = [] if database is None else ["--url", database]
    args = ["--tokens", str(tokens), "--port", "0", *named, *flags]
    with log.open("w") as errors:
        process = subprocess.Popen(
            command(*args, pid_file=pid_file),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            cwd=cwd,
            env=env,
        )
    try:
        url = _base_url(process, log)
        yield Server(url, process, log, database or "", int(pid_file.read_text()))
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server (SIGTERM, then SIGKILL after 20 s)."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _base_url(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("korely-server: serving "):
                return line.split()[2]
        if process.poll() is not None:
            raise AssertionError(f"the server stopped: {log.read_text()}")
        time.sleep(0.01)  # a server starts in a fifth of a second: a short look each time
    raise AssertionError(f"the server did not start: {log.read_text()}")


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` object of a JSON error answer."""
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "field", "message"}, error
    return error
