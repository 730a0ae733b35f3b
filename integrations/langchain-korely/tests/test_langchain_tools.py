"""The tools on their own: LangChain's standard tool tests, identity from the runtime, refusals."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from korely_memory import Identity, MemoryEngine
from langchain_korely import KorelyCorrect, KorelyForget, KorelyRemember, korely_tools

GIULIA = Identity(account="acme", user="giulia", agent="support-copilot")


def runtime(context: Any = GIULIA) -> ToolRuntime[Any, Any]:
    """What the agent injects into a tool call."""
    return ToolRuntime(
        state={"messages": []},
        context=context,
        config={},
        stream_writer=lambda _: None,
        tool_call_id="call-1",
        store=None,
    )


@functools.cache
def shared_engine() -> MemoryEngine:
    # The standard tests build tools from properties, where fixtures cannot reach.
    return MemoryEngine("sqlite://")


class _Standard:
    tool_class: type[BaseTool]
    example: dict[str, Any]

    @property
    def tool_constructor(self) -> type[BaseTool]:
        return self.tool_class

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"engine": shared_engine()}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {**self.example, "runtime": runtime()}


class TestRememberStandardUnit(_Standard, ToolsUnitTests):
    tool_class = KorelyRemember
    example = {"key": "home-city", "content": "Giulia lives in Rome"}


class TestRememberStandardIntegration(_Standard, ToolsIntegrationTests):
    tool_class = KorelyRemember
    example = {"key": "home-city", "content": "Giulia lives in Rome"}


class TestCorrectStandardUnit(_Standard, ToolsUnitTests):
    tool_class = KorelyCorrect
    example = {"key": "home-city", "content": "Giulia lives in Milan"}


class TestCorrectStandardIntegration(_Standard, ToolsIntegrationTests):
    tool_class = KorelyCorrect
    example = {"key": "home-city", "content": "Giulia lives in Milan"}


class TestForgetStandardUnit(_Standard, ToolsUnitTests):
    tool_class = KorelyForget
    example = {"key": "home-city"}


class TestForgetStandardIntegration(_Standard, ToolsIntegrationTests):
    tool_class = KorelyForget
    example = {"key": "home-city"}


def test_the_model_sees_only_key_and_content() -> None:
    remember, correct, forget = korely_tools(shared_engine())
    for tool, fields in (
        (remember, ["key", "content"]),
        (correct, ["key", "content"]),
        (forget, ["key"]),
    ):
        schema = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
        assert list(schema["properties"]) == fields
        assert schema["required"] == fields


@pytest.mark.asyncio
async def test_tools_write_under_the_runtimes_identity(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    remember, correct, forget = korely_tools(engine)

    async def call(tool: BaseTool, **args: Any) -> str:
        args["runtime"] = runtime(giulia)
        return await tool.ainvoke(args) if use_async else tool.invoke(args)

    assert await call(remember, key="Home City", content="Giulia lives in Rome") == (
        "Remembered home-city: Giulia lives in Rome"
    )
    assert await call(correct, key="home-city", content="Giulia lives in Milan") == (
        "Corrected home-city: Giulia lives in Milan"
    )
    assert [f.content for f in engine.history(giulia, "home-city")] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]
    assert await call(forget, key="home-city") == "Forgot home-city."
    assert engine.get_facts(giulia) == []


@pytest.mark.asyncio
async def test_max_facts_refuses_a_new_key_but_not_a_replacement(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    [remember, *_] = korely_tools(engine, max_facts=1)

    async def call(**args: Any) -> str:
        args["runtime"] = runtime(giulia)
        return await remember.ainvoke(args) if use_async else remember.invoke(args)

    assert (await call(key="home-city", content="Giulia lives in Rome")).startswith("Remembered")
    assert (await call(key="home-city", content="Giulia lives in Milan")).startswith("Remembered")
    refused = await call(key="pet", content="Giulia has a cat")
    assert refused.startswith("Not saved: ")
    assert "correct or forget" in refused
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


def test_an_identity_the_engine_refuses_is_raised_not_told_to_the_model(
    engine: MemoryEngine,
) -> None:
    [remember, *_] = korely_tools(engine)
    bad = Identity(account="acme", user="a/b", agent="support-copilot")
    with pytest.raises(ValueError, match="user"):
        remember.invoke({"key": "k", "content": "c", "runtime": runtime(bad)})


@pytest.mark.parametrize(
    "context",
    [
        {"account": "acme", "user": "giulia", "agent": "support-copilot"},
        type("Ctx", (), {"account": "acme", "user": "giulia", "agent": "support-copilot"})(),
    ],
    ids=["mapping", "object"],
)
def test_any_context_with_account_user_and_agent_works(
    engine: MemoryEngine, giulia: Identity, context: Any
) -> None:
    [remember, *_] = korely_tools(engine)
    remember.invoke(
        {"key": "home-city", "content": "Giulia lives in Rome", "runtime": runtime(context)}
    )
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


@pytest.mark.parametrize("context", [None, {"user": "giulia"}, "giulia"])
def test_a_context_without_identity_is_an_error_for_the_application(
    engine: MemoryEngine, context: Any
) -> None:
    [remember, *_] = korely_tools(engine)
    with pytest.raises(ValueError, match="context=Identity"):
        remember.invoke({"key": "home-city", "content": "x", "runtime": runtime(context)})


@pytest.mark.parametrize("tool_class", [KorelyRemember, KorelyCorrect, KorelyForget])
def test_async_calls_run_the_sync_body_in_a_thread(tool_class: type[BaseTool]) -> None:
    # One implementation per behaviour: `ainvoke` goes through BaseTool's `_arun`,
    # which runs `_run` in a worker thread, rather than through a copied async body.
    assert tool_class._arun is BaseTool._arun
