"""korely-mcp over stdio, as a desktop client runs it: a subprocess, driven by the SDK's client.

Each test runs on SQLite and on PostgreSQL (the root conftest's ``db_url`` and ``engine``);
the test's own engine plays the other applications that share the memory.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio

from korely_mcp import PREFIX
from korely_memory import MemoryEngine
from korely_memory.tools import MEMORY_TOOLS

from .servers import GIULIA, HOLD, MARCO, stdio, text

CHANGED = "## Changed since you last read"
TOOLS = ["korely_get_context", "korely_get_facts", *(PREFIX + t.name for t in MEMORY_TOOLS)]
QUERY = {"query": "Where does Giulia live?"}


def engine_tool(name: str) -> Any:
    return next(tool for tool in MEMORY_TOOLS if tool.name == name)


async def test_a_client_remembers_reads_corrects_and_is_told_a_change_once(
    db_url: str, engine: MemoryEngine
) -> None:
    async with stdio(db_url) as client:
        saved = await client.call_tool(
            "korely_remember", {"key": "home-city", "content": "Giulia lives in Rome"}
        )
        assert (saved.is_error, text(saved)) == (
            False,
            "Remembered home-city: Giulia lives in Rome",
        )
        assert [f.content for f in engine.get_facts(GIULIA)] == ["Giulia lives in Rome"]

        block = await client.call_tool("korely_get_context", QUERY)
        assert not block.is_error
        assert "- home-city: Giulia lives in Rome (since " in text(block)
        assert CHANGED not in text(block)
        assert block.structured_content is not None
        assert block.structured_content["text"] == text(block)
        assert block.structured_content["changed"] == []
        assert block.structured_content["changed_more"] == 0

        # Another application corrects it: this client read it, so it is told, once.
        engine.correct(GIULIA, "home-city", "Giulia lives in Milan", reader="crm")
        told = await client.call_tool("korely_get_context", QUERY)
        assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan (" in text(told)
        assert told.structured_content is not None
        ended = engine.history(GIULIA, "home-city")[0].ended_recorded_at
        assert ended is not None
        assert told.structured_content["changed"] == [
            {
                "key": "home-city",
                "was": "Giulia lives in Rome",
                "now": "Giulia lives in Milan",
                "day": ended.date().isoformat(),
                "cause": "corrected",
            }
        ]
        again = await client.call_tool("korely_get_context", QUERY)
        assert CHANGED not in text(again)
        assert "- home-city: Giulia lives in Milan (since " in text(again)
        # Spent by that call, not merely held: once the hold has run out it is still not told.
        await anyio.sleep(HOLD + 0.3)
        later = await client.call_tool("korely_get_context", QUERY)
        assert CHANGED not in text(later)

        # Its own correction is not told back to it.
        fixed = await client.call_tool(
            "korely_correct", {"key": "home-city", "content": "Giulia lives in Turin"}
        )
        assert (fixed.is_error, text(fixed)) == (
            False,
            "Corrected home-city: Giulia lives in Turin",
        )
        after = await client.call_tool("korely_get_context", QUERY)
        assert CHANGED not in text(after)
        assert "- home-city: Giulia lives in Turin (since " in text(after)

        versions = await client.call_tool("korely_get_facts", {"include_invalidated": True})
        assert versions.structured_content is not None
        listed = versions.structured_content["facts"]
        assert [(f["content"], f["current"]) for f in listed] == [
            ("Giulia lives in Turin", True),
            ("Giulia lives in Milan", False),
            ("Giulia lives in Rome", False),
        ]
        assert text(versions).splitlines()[1].startswith("- home-city: Giulia lives in Milan (")
        assert text(versions).splitlines()[1].endswith(", corrected)")


async def one_call(url: str, pid_file: Path | None = None) -> str:
    """A conversation of one call: a desktop assistant's process reads the block, and the
    conversation ends (stdin closed cleanly, unless ``pid_file`` is given: then killed)."""
    async with stdio(url, pid_file=pid_file) as client:
        said = text(await client.call_tool("korely_get_context", QUERY))
        if pid_file is not None:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    return said


async def test_a_change_is_told_in_one_conversation_of_one_call_and_not_in_the_next(
    sqlite_url: str, tmp_path: Path
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
        engine.get_facts(GIULIA, reader="laptop")  # an earlier conversation read it
        engine.correct(GIULIA, "home-city", "Giulia lives in Milan", reader="crm")
    assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan (" in await one_call(
        sqlite_url
    )
    await anyio.sleep(HOLD + 0.3)  # spent when the session closed, not merely held
    for _ in range(2):
        later = await one_call(sqlite_url)
        assert CHANGED not in later
        assert "- home-city: Giulia lives in Milan (since " in later

    # A server that is killed after the block spent nothing: the next one tells it again.
    with MemoryEngine(sqlite_url) as engine:
        engine.correct(GIULIA, "home-city", "Giulia lives in Turin", reader="crm")
    told = await one_call(sqlite_url, pid_file=tmp_path / "server.pid")
    assert "- was: Giulia lives in Milan -> now: Giulia lives in Turin (" in told
    read_at = time.monotonic()
    await anyio.sleep(max(0.0, read_at + HOLD + 0.3 - time.monotonic()))
    retold = await one_call(sqlite_url)
    assert "- was: Giulia lives in Milan -> now: Giulia lives in Turin (" in retold


async def test_a_session_that_only_read_the_resource_leaves_its_notice_for_the_next(
    sqlite_url: str,
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
        engine.get_facts(GIULIA, reader="laptop")
        engine.correct(GIULIA, "home-city", "Giulia lives in Milan", reader="crm")
    async with stdio(sqlite_url) as client:  # the client reads the block; no model does
        read = await client.read_resource("korely://context")
        assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan (" in str(read)
    # The clean close released the notice: the next conversation's block tells it at once.
    told = await one_call(sqlite_url)
    assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan (" in told


async def test_no_tool_takes_an_identity_and_one_the_model_sends_is_refused(
    db_url: str, engine: MemoryEngine
) -> None:
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    forged = {"key": "home-city", "content": "Marco lives in Oslo", "user": "marco"}
    async with stdio(db_url) as client:
        listed = await client.list_tools()
        refused = await client.call_tool("korely_remember", forged)
        read = await client.call_tool("korely_get_context", {"account": "globex", "query": "x"})
        missing = await client.call_tool(
            "korely_correct", {"key": "no-such-fact", "content": "Giulia has a cat"}
        )
    assert [tool.name for tool in listed.tools] == TOOLS
    for tool in listed.tools:
        assert tool.description
        assert not {"account", "user", "agent", "who"} & set(tool.input_schema["properties"])
        assert tool.input_schema["additionalProperties"] is False
    by_name = {tool.name: tool for tool in listed.tools}
    for engine_side in MEMORY_TOOLS:
        schema = by_name[PREFIX + engine_side.name].input_schema
        assert list(schema["properties"]) == [a.name for a in engine_side.arguments]
        assert schema["required"] == [a.name for a in engine_side.arguments if a.required]
        assert by_name[PREFIX + engine_side.name].description == engine_side.description

    # The same sentence the engine's tool gives every adapter (a refusal writes nothing).
    assert refused.is_error
    assert text(refused) == engine_tool("remember").run(engine, GIULIA, forged).text
    assert "takes only key, content, account_wide and until, not user" in text(refused)
    assert read.is_error
    assert text(read) == (
        "Not read: this tool takes only query, token_budget and changes, not account. "
        "It always works on the memory of the person in this conversation."
    )
    assert missing.is_error
    assert text(missing) == (
        engine_tool("correct")
        .run(engine, GIULIA, {"key": "no-such-fact", "content": "Giulia has a cat"})
        .text
    )
    assert text(missing).startswith("Not corrected: ")
    assert [f.content for f in engine.get_facts(GIULIA)] == ["Giulia lives in Rome"]
    assert engine.get_facts(MARCO) == []
    assert len(engine.history(GIULIA, "home-city")) == 1


async def test_the_identity_and_reader_can_come_from_the_environment(
    sqlite_url: str,
) -> None:
    env = {
        "KORELY_ACCOUNT": "acme",
        "KORELY_USER": "giulia",
        "KORELY_AGENT": "support-copilot",
        "KORELY_READER": "laptop",
    }
    async with stdio(sqlite_url, env=env) as client:
        await client.call_tool("korely_remember", {"key": "pet", "content": "Giulia has a cat"})
    with MemoryEngine(sqlite_url) as engine:
        assert [f.content for f in engine.get_facts(GIULIA)] == ["Giulia has a cat"]
