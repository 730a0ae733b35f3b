"""korely-mcp over stdio, as a desktop client runs it: a subprocess, driven by the SDK's client.

Each test runs on SQLite and on PostgreSQL (the root conftest's ``db_url`` and ``engine``);
the test's own engine plays the other applications that share the memory.
"""

from __future__ import annotations

import time
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


async def test_a_notice_whose_result_may_not_have_arrived_is_told_again_after_the_hold(
    db_url: str, engine: MemoryEngine
) -> None:
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    async with stdio(db_url) as client:
        await client.call_tool("korely_get_context", QUERY)
        engine.correct(GIULIA, "home-city", "Giulia lives in Milan", reader="crm")
        told = await client.call_tool("korely_get_context", QUERY)
        read_at = time.monotonic()
        assert CHANGED in text(told)
        # Held for this client's next call: no other read under its name tells it meanwhile.
        assert CHANGED not in engine.get_context(GIULIA, reader="laptop").text
    # The session ended with no call after that block: nothing says the model got it.
    await anyio.sleep(max(0.0, read_at + HOLD + 0.3 - time.monotonic()))
    retold = engine.get_context(GIULIA, reader="laptop")
    assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan (" in retold.text


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
