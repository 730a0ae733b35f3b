"""korely-mcp over streamable HTTP on loopback: the identity of each request from its token.

The server is a subprocess listening on a free port of the default address; the clients are
the SDK's, each sending its own bearer token.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from korely_mcp import PREFIX
from korely_memory import Identity, MemoryEngine
from korely_memory.tools import MEMORY_TOOLS

from .servers import (
    GIULIA,
    MARCO,
    http_client,
    http_server,
    leaves,
    text,
    token_entry,
    write_tokens,
)

CHANGED = "## Changed since you last read"
QUERY = {"query": "Where does Giulia live?"}
LAPTOP, PHONE, MARCOS = "kmcp_laptop-" + "x" * 32, "kmcp_phone-" + "y" * 32, "kmcp_m-" + "z" * 32
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
).encode()


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    """Giulia's laptop and phone (two readers of one memory), and Marco's laptop."""
    path = tmp_path / "tokens.json"
    write_tokens(
        path,
        [
            token_entry("giulia-laptop", LAPTOP, GIULIA, "giulia-laptop"),
            token_entry("giulia-phone", PHONE, GIULIA, "giulia-phone"),
            token_entry("marco-laptop", MARCOS, MARCO, "marco-laptop"),
        ],
    )
    return path


def post(
    endpoint: str,
    token: str | None,
    host: str | None = None,
    session: str | None = None,
    body: bytes = INITIALIZE,
    origin: str | None = None,
) -> tuple[int, dict[str, str]]:
    """A bare request to the endpoint: its status and headers (names in lower case)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if host is not None:
        headers["Host"] = host
    if origin is not None:
        headers["Origin"] = origin
    if session is not None:
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = "2025-11-25"
    request = urllib.request.Request(endpoint, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}


async def test_clients_share_memory_by_token_and_each_is_told_a_change_once(
    db_url: str, engine: MemoryEngine, tokens: Path, tmp_path: Path
) -> None:
    with http_server(db_url, tokens, tmp_path / "server.log") as endpoint:
        assert endpoint.startswith("http://127.0.0.1:")  # loopback unless told otherwise
        async with http_client(endpoint, LAPTOP) as laptop, http_client(endpoint, PHONE) as phone:
            listed = await laptop.list_tools()
            assert [t.name for t in listed.tools][2:] == [PREFIX + t.name for t in MEMORY_TOOLS]

            saved = await laptop.call_tool(
                "korely_remember", {"key": "home-city", "content": "Giulia lives in Rome"}
            )
            assert text(saved) == "Remembered home-city: Giulia lives in Rome"
            block = await laptop.call_tool("korely_get_context", QUERY)
            assert "- home-city: Giulia lives in Rome (since " in text(block)

            # The phone corrects what the laptop read: the laptop is told, once; not the phone.
            # Its subscription to its context is told at once.
            async with laptop.listen(resource_subscriptions=["korely://context"]) as stream:
                fixed = await phone.call_tool(
                    "korely_correct", {"key": "home-city", "content": "Giulia lives in Milan"}
                )
                with anyio.fail_after(10):
                    event = await stream.__anext__()
            assert getattr(event, "uri", None) == "korely://context"
            assert text(fixed) == "Corrected home-city: Giulia lives in Milan"
            told = await laptop.call_tool("korely_get_context", QUERY)
            assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan (" in text(told)
            assert told.structured_content is not None
            assert [c["now"] for c in told.structured_content["changed"]] == [
                "Giulia lives in Milan"
            ]
            again = await laptop.call_tool("korely_get_context", QUERY)
            assert CHANGED not in text(again)
            own = await phone.call_tool("korely_get_context", QUERY)
            assert CHANGED not in text(own)
            assert "- home-city: Giulia lives in Milan (since " in text(own)

            forged = {"key": "home-city", "content": "Marco lives in Oslo", "user": "marco"}
            refused = await laptop.call_tool("korely_remember", forged)
            assert refused.is_error
            assert "takes only key, content, account_wide and until, not user" in text(refused)

        # Marco's token reads Marco's memory, in a session of the older protocol too.
        updated: list[str] = []

        async def collect(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                updated.append(message.params.uri)

        async with http_client(endpoint, MARCOS, mode="legacy", on_message=collect) as marco:
            theirs = await marco.call_tool("korely_get_facts", {})
            with warnings.catch_warnings():  # the 2025 protocol's way, deprecated by the SDK
                warnings.simplefilter("ignore")
                await marco.subscribe_resource("korely://context")
            await marco.call_tool("korely_remember", {"key": "team", "content": "Marco is in ops"})
            with anyio.fail_after(10):
                while not updated:
                    await anyio.sleep(0.02)
        assert updated == ["korely://context"]
    assert theirs.structured_content == {"facts": [], "more": 0, "next_cursor": None}
    assert text(theirs) == "No facts are kept."
    assert [f.content for f in engine.get_facts(GIULIA)] == ["Giulia lives in Milan"]
    assert [f.content for f in engine.get_facts(MARCO)] == ["Marco is in ops"]


async def test_a_request_without_a_token_the_file_lists_is_refused(
    sqlite_url: str, tokens: Path, tmp_path: Path
) -> None:
    with http_server(sqlite_url, tokens, tmp_path / "server.log") as endpoint:
        status, headers = post(endpoint, None)
        assert status == 401
        assert headers["www-authenticate"].startswith("Bearer ")
        assert post(endpoint, "kmcp_not-a-token")[0] == 401
        assert post(endpoint, LAPTOP[:-1])[0] == 401
        status, headers = post(endpoint, LAPTOP)
        assert status == 200
        # A session opened with one token is not there for another.
        ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
        session = headers["mcp-session-id"]
        assert post(endpoint, PHONE, session=session, body=ping)[0] == 404
        assert post(endpoint, LAPTOP, session=session, body=ping)[0] == 200
        # On loopback the SDK also refuses a Host a DNS-rebinding page would send.
        assert post(endpoint, LAPTOP, host="evil.example")[0] == 421
        # ...and takes loopback's names without a port (a server on port 80, a local proxy).
        assert post(endpoint, LAPTOP, host="localhost")[0] == 200

        with pytest.raises(Exception) as caught:
            async with http_client(endpoint, "kmcp_not-a-token") as client:
                await client.list_tools()
        assert any(isinstance(leaf, MCPError) for leaf in leaves(caught.value))

        # The file is read again when it changes: a token is added or revoked without a restart.
        newcomer = "kmcp_new-" + "w" * 32
        write_tokens(
            tokens,
            [
                token_entry("giulia-laptop", LAPTOP, GIULIA, "giulia-laptop"),
                token_entry("anna", newcomer, Identity("acme", "anna", "support-copilot"), "anna"),
            ],
        )
        assert post(endpoint, newcomer)[0] == 200
        assert post(endpoint, PHONE)[0] == 401
        async with http_client(endpoint, newcomer) as anna:
            await anna.call_tool("korely_remember", {"key": "pet", "content": "Anna has a dog"})

        # A file that no longer reads refuses every token until it is fixed.
        tokens.write_text('{"tokens": [')
        assert post(endpoint, LAPTOP)[0] == 401
    with MemoryEngine(sqlite_url) as engine:
        anna_facts = engine.get_facts(Identity("acme", "anna", "support-copilot"))
    assert [f.content for f in anna_facts] == ["Anna has a dog"]


def test_a_server_off_loopback_warns_and_checks_the_hosts_it_is_told(
    sqlite_url: str, tokens: Path, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    flags = ("--host", "0.0.0.0", "--allowed-host", "memory.example")
    with http_server(sqlite_url, tokens, log, *flags) as endpoint:
        local = endpoint.replace("://0.0.0.0:", "://127.0.0.1:")
        assert post(local, LAPTOP, host="evil.example")[0] == 421
        assert post(local, LAPTOP, host="memory.example")[0] == 200
        port = local.split(":")[2].split("/")[0]
        assert post(local, LAPTOP, host=f"memory.example:{port}")[0] == 200
        assert post(local, LAPTOP, host="memory.example", origin="https://memory.example")[0] == 200
        assert post(local, LAPTOP, host="memory.example", origin="https://evil.example")[0] == 403
        said = log.read_text()
    assert (
        "korely-mcp: warning: serving plain HTTP on 0.0.0.0: bearer tokens travel in clear text"
        in said
    )
    assert "Host and Origin headers are not checked" not in said  # --allowed-host names them
