"""Starting `korely-mcp` as a subprocess, and the SDK's clients that talk to it.

Every server runs under the tests' network guard (the root conftest's ``local_only``): a
connection off this machine fails it. HTTP servers listen on a free loopback port.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from korely_mcp import hash_token
from korely_memory import Identity
from tests import processes

# The certificates a new httpx2 client loads (a fifth of a second on the test machines), loaded
# once: the clients speak plain HTTP to the loopback servers, and would verify any other the same.
TLS = httpx2.create_ssl_context()

HOLD = 1.0  # seconds: a block's notices wait this long for the caller's next call
GIULIA = Identity("acme", "giulia", "support-copilot")
MARCO = Identity("acme", "marco", "support-copilot")


def command(*args: str, pid_file: Path | None = None) -> list[str]:
    """The command line of `korely-mcp ARGS` under the network guard (its process id
    written to ``pid_file`` when given), forked from the tests' server in milliseconds where a
    new interpreter would take seconds to import the SDK."""
    return processes.command("-m", "korely_mcp", *args, pid_file=pid_file)


def stdio(
    url: str,
    reader: str = "laptop",
    who: Identity = GIULIA,
    env: dict[str, str] | None = None,
    pid_file: Path | None = None,
) -> Client:
    """A client of a new stdio server for ``who``, reading as ``reader``.

    With ``env``, the identity and the reader come from the environment instead of flags;
    with ``pid_file``, the server writes its process id there.
    """
    assert who.user is not None
    identity = ["--account", who.account, "--user", who.user, "--agent", who.agent]
    flags = ["--reader", reader, *identity] if env is None else []
    line = command("--url", url, "--hold", str(HOLD), *flags, pid_file=pid_file)
    return Client(StdioServerParameters(command=line[0], args=line[1:], env=env))


def text(result: CallToolResult) -> str:
    """The one text the tool sent back."""
    [content] = result.content
    assert content.type == "text"
    return content.text


def leaves(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups, or the error itself."""
    inner: Sequence[BaseException] | None = getattr(error, "exceptions", None)
    if inner is None:
        return [error]
    return [leaf for e in inner for leaf in leaves(e)]


def token_entry(name: str, token: str, who: Identity, reader: str) -> dict[str, Any]:
    """One entry of a token file."""
    return {
        "name": name,
        "sha256": hash_token(token),
        "account": who.account,
        "user": who.user,
        "agent": who.agent,
        "reader": reader,
    }


def write_tokens(path: Path, entries: Sequence[dict[str, Any]]) -> None:
    """Write a token file in one step, so a server never reads half of one."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps({"tokens": list(entries)}, indent=2))
    partial.replace(path)


@contextlib.contextmanager
def http_server(url: str, tokens: Path, log: Path, *flags: str) -> Iterator[str]:
    """An HTTP server on a free port of the default address; yields its endpoint's URL."""
    args = ["--transport", "http", "--tokens", str(tokens), "--port", "0", "--url", url]
    with log.open("w") as errors:
        process = subprocess.Popen(
            command(*args, "--hold", str(HOLD), *flags),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        yield _endpoint(process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _endpoint(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("korely-mcp: serving "):
                return line.split()[2]
        if process.poll() is not None:
            raise AssertionError(f"the server stopped: {log.read_text()}")
        time.sleep(0.01)  # a server starts in a fifth of a second: a short look each time
    raise AssertionError(f"the server did not start: {log.read_text()}")


@contextlib.asynccontextmanager
async def http_client(
    endpoint: str,
    token: str | None,
    mode: str = "auto",
    on_message: Callable[[Any], Awaitable[None]] | None = None,
) -> AsyncIterator[Client]:
    """A client of the HTTP server, sending ``token`` as its bearer token (``on_message``
    gets what the server sends outside a response)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    async with httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30, read=60), verify=TLS
    ) as http:
        transport = streamable_http_client(endpoint, http_client=http)
        async with Client(transport, mode=mode, message_handler=on_message) as client:
            yield client
