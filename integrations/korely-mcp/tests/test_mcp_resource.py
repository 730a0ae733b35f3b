"""``korely://context``: the caller's block as a resource, read and subscribed to with the SDK's
client over its in-memory transport, in both protocol eras."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from korely_mcp import Caller, KorelyTools, _subscribers, create_server
from korely_memory import MemoryEngine

from .servers import GIULIA, MARCO

URI = "korely://context"
CHANGED = "## Changed since you last read"
LAPTOP = Caller(GIULIA, reader="laptop", name="laptop")
PHONE = Caller(GIULIA, reader="phone", name="phone")
MARCOS = Caller(MARCO, reader="marco", name="marco")


@pytest.fixture
def tools(sqlite_url: str) -> Iterator[KorelyTools]:
    with MemoryEngine(sqlite_url) as engine:
        yield KorelyTools(engine, hold=30)


def client(tools: KorelyTools, caller: Caller, mode: str = "auto", **options: Any) -> Client:
    return Client(create_server(tools, lambda: caller), mode=mode, **options)


async def subscribe(c: Client) -> None:
    with warnings.catch_warnings():  # the 2025 protocol's way, deprecated by the SDK
        warnings.simplefilter("ignore")
        await c.subscribe_resource(URI)


async def test_the_resource_is_the_caller_s_block_private_to_it(tools: KorelyTools) -> None:
    tools.engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    async with client(tools, LAPTOP) as laptop, client(tools, MARCOS) as marco:
        [listed] = (await laptop.list_resources()).resources
        read = await laptop.read_resource(URI)
        theirs = await marco.read_resource(URI)
        with pytest.raises(MCPError) as caught:
            await laptop.read_resource("korely://someone-else")
    assert (listed.uri, listed.mime_type) == (URI, "text/markdown")
    [content] = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert "- home-city: Giulia lives in Rome (since " in content.text
    assert (read.cache_scope, read.ttl_ms) == ("private", 0)
    [other] = theirs.contents
    assert isinstance(other, types.TextResourceContents)
    assert "Giulia" not in other.text
    assert caught.value.error.code == -32002


async def test_a_read_of_the_resource_holds_its_notices_and_spends_none(
    tools: KorelyTools,
) -> None:
    tools.engine.remember(GIULIA, "home-city", "Giulia lives in Rome", reader="laptop")
    tools.engine.correct(GIULIA, "home-city", "Giulia lives in Milan", reader="crm")
    async with client(tools, LAPTOP) as laptop:
        [told] = (await laptop.read_resource(URI)).contents
        assert isinstance(told, types.TextResourceContents) and CHANGED in told.text
        assert tools.held.waiting("laptop") == 1
        await laptop.read_resource(URI)  # the client's own read: no sign the model read it
        assert tools.held.waiting("laptop") == 1
        await laptop.call_tool("korely_get_facts", {})  # the caller calls again: spent
        assert tools.held.waiting("laptop") == 0


async def test_a_subscriber_is_told_when_a_write_changes_its_memory_2025_protocol(
    tools: KorelyTools,
) -> None:
    told: dict[str, list[Any]] = {"laptop": [], "marco": []}

    def collect(name: str) -> Any:
        async def handler(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                told[name].append(message.params.uri)

        return handler

    async with (
        client(tools, LAPTOP, "legacy", message_handler=collect("laptop")) as laptop,
        client(tools, MARCOS, "legacy", message_handler=collect("marco")) as marco,
        client(tools, PHONE, "legacy") as phone,
    ):
        assert laptop.server_capabilities.resources is not None
        assert laptop.server_capabilities.resources.subscribe is True
        await subscribe(laptop)
        await subscribe(marco)
        await phone.call_tool("korely_remember", {"key": "pet", "content": "Giulia has a cat"})
        refused = await phone.call_tool("korely_correct", {"key": "nothing", "content": "x"})
        assert refused.is_error  # wrote nothing: tells nothing
        with anyio.fail_after(5):
            while not told["laptop"]:
                await anyio.sleep(0.01)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await laptop.unsubscribe_resource(URI)
        await phone.call_tool("korely_forget", {"key": "pet"})
        await anyio.sleep(0.1)
    assert told == {"laptop": [URI], "marco": []}


async def test_a_listen_stream_is_told_when_a_write_changes_its_memory_2026_protocol(
    tools: KorelyTools,
) -> None:
    async with client(tools, LAPTOP) as laptop, client(tools, PHONE) as phone:
        assert laptop.protocol_version == "2026-07-28"
        async with laptop.listen(resource_subscriptions=[URI]) as stream:
            assert stream.honored.resource_subscriptions == [URI]
            assert tools.subscribers.count(GIULIA) == 1
            await phone.call_tool("korely_correct", {"key": "pet", "content": "x"})  # refused
            await phone.call_tool("korely_remember", {"key": "pet", "content": "A cat"})
            with anyio.fail_after(5):
                event = await stream.__anext__()
        assert getattr(event, "uri", None) == URI
        with anyio.fail_after(5):  # the stream's end takes its subscription with it
            while tools.subscribers.count(GIULIA):
                await anyio.sleep(0.01)


async def test_stuck_subscribers_delay_a_write_by_one_wait_not_one_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_subscribers, "SEND_WAIT", 0.5)
    subscribers = _subscribers.Subscribers()
    told: list[str] = []

    async def reads() -> None:
        told.append("reads")

    for key in ("stuck-1", "stuck-2", "stuck-3"):
        subscribers.add(GIULIA, key, anyio.sleep_forever)  # a client that stopped reading
    subscribers.add(GIULIA, "reads", reads)
    started = anyio.current_time()
    await subscribers.changed(GIULIA)
    assert anyio.current_time() - started < 1.2  # told side by side, not 1.5 s one after another
    assert told == ["reads"]
    assert subscribers.count(GIULIA) == 1  # the stuck ones are dropped
