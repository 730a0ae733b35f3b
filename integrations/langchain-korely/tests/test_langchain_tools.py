"""The tools on their own: the engine's definitions, a fixed or a run's identity, refusals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from langchain.tools import ToolRuntime
from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
from langchain_core.messages import ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from korely_memory import Identity, InvalidRequest, MemoryEngine, Scope
from korely_memory.tools import MEMORY_TOOLS
from langchain_korely import KorelyCorrect, KorelyForget, KorelyRemember, KorelyTool, korely_tools

from ._agents import calls, scripted

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


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": "call-1", "type": "tool_call"}


# The standard tests build tools from properties, where fixtures cannot reach: one in-memory
# engine for the module, opened at import and closed when the module's tests are done.
SHARED_ENGINE = MemoryEngine("sqlite://")


@pytest.fixture(autouse=True, scope="module")
def shared_engine_closed() -> Iterator[None]:
    yield
    SHARED_ENGINE.close()


def shared_engine() -> MemoryEngine:
    return SHARED_ENGINE


class _Standard:
    tool_class: type[BaseTool]
    example: ClassVar[dict[str, Any]]
    fixed = True

    @property
    def tool_constructor(self) -> type[BaseTool]:
        return self.tool_class

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        if self.fixed:
            return {"engine": shared_engine(), "identity": GIULIA}
        return {"engine": shared_engine()}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        # With a fixed identity, exactly what a model sends; from the run, the runtime too.
        return dict(self.example) if self.fixed else {**self.example, "runtime": runtime()}


REMEMBERED = {"key": "home-city", "content": "Giulia lives in Rome"}
CORRECTED = {"key": "home-city", "content": "Giulia lives in Milan"}
FORGOTTEN = {"key": "home-city"}


class TestRememberFixedUnit(_Standard, ToolsUnitTests):
    tool_class, example = KorelyRemember, REMEMBERED


class TestRememberFixedIntegration(_Standard, ToolsIntegrationTests):
    tool_class, example = KorelyRemember, REMEMBERED


class TestCorrectFixedUnit(_Standard, ToolsUnitTests):
    tool_class, example = KorelyCorrect, CORRECTED


class TestCorrectFixedIntegration(_Standard, ToolsIntegrationTests):
    tool_class, example = KorelyCorrect, CORRECTED


class TestForgetFixedUnit(_Standard, ToolsUnitTests):
    tool_class, example = KorelyForget, FORGOTTEN


class TestForgetFixedIntegration(_Standard, ToolsIntegrationTests):
    tool_class, example = KorelyForget, FORGOTTEN


class TestRememberFromRunIntegration(_Standard, ToolsIntegrationTests):
    tool_class, example, fixed = KorelyRemember, REMEMBERED, False


class TestForgetFromRunUnit(_Standard, ToolsUnitTests):
    tool_class, example, fixed = KorelyForget, FORGOTTEN, False


def test_every_engine_tool_is_offered_with_its_own_arguments() -> None:
    tools = korely_tools(shared_engine(), identity=GIULIA)
    assert [t.name for t in tools] == [d.name for d in MEMORY_TOOLS]
    for tool, definition in zip(tools, MEMORY_TOOLS, strict=True):
        assert tool.description == definition.description
        schema = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
        assert list(schema["properties"]) == [a.name for a in definition.arguments]
        assert schema.get("required", []) == [a.name for a in definition.arguments if a.required]
        for argument in definition.arguments:
            assert schema["properties"][argument.name]["description"] == argument.description


def test_the_runtime_is_never_shown_to_the_model() -> None:
    for tool in korely_tools(shared_engine()):
        schema = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
        assert "runtime" not in schema["properties"]
        assert "runtime" in tool.get_input_schema().model_fields


@pytest.mark.asyncio
async def test_a_fixed_identity_needs_no_run(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    remember, correct, forget, _recall = korely_tools(engine, identity=giulia)

    async def call(tool: BaseTool, **args: Any) -> Any:
        return await tool.ainvoke(args) if use_async else tool.invoke(args)

    assert await call(remember, key="Home City", content="Giulia lives in Rome") == (
        "Remembered home-city: Giulia lives in Rome"
    )
    assert await call(correct, key="home-city", content="Giulia lives in Milan") == (
        "Corrected home-city: Giulia lives in Milan"
    )
    assert await call(forget, key="home-city") == "Forgot home-city."
    assert [f.content for f in engine.history(giulia, "home-city")] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]
    assert engine.get_facts(giulia) == []


@pytest.mark.asyncio
async def test_tools_from_the_run_write_under_the_runtimes_identity(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    [remember, *_] = korely_tools(engine)
    args = {"key": "home-city", "content": "Giulia lives in Rome", "runtime": runtime(giulia)}
    said = await remember.ainvoke(args) if use_async else remember.invoke(args)
    assert said == "Remembered home-city: Giulia lives in Rome"
    assert [f.owner for f in engine.get_facts(giulia)] == ["giulia"]


def test_a_call_outside_a_run_says_to_give_the_identity(engine: MemoryEngine) -> None:
    [remember, *_] = korely_tools(engine)
    with pytest.raises(InvalidRequest, match=r"identity=Identity\(") as refused:
        remember.invoke({"key": "home-city", "content": "x"})
    assert refused.value.field == "identity"
    assert engine.get_facts(GIULIA) == []


@pytest.mark.parametrize(
    ("name", "args", "said"),
    [
        ("remember", {"key": "!!", "content": "x"}, "Not saved: key"),
        ("remember", {"key": "home-city", "content": " "}, "Not saved: content"),
        ("remember", {"key": "pet", "content": "Giulia has a cat"}, "Not saved: already 1 facts"),
        ("correct", {"key": "pet", "content": "Giulia has a cat"}, "Not corrected: no true fact"),
        ("forget", {"key": "pet"}, "Not forgotten: no true fact"),
        ("remember", {"key": "pet", "content": "x", "user": "mallory"}, "Not saved: this tool"),
        ("remember", {"key": "pet", "content": "x", "scope": "account"}, "Not saved: this tool"),
    ],
)
def test_a_refusal_is_an_error_tool_message_with_the_engines_sentence(
    engine: MemoryEngine, giulia: Identity, name: str, args: dict[str, Any], said: str
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    tools = {t.name: t for t in korely_tools(engine, max_facts=1, identity=giulia)}

    answer = tools[name].invoke(tool_call(name, **args))

    assert isinstance(answer, ToolMessage)
    assert answer.status == "error"
    assert answer.text.startswith(said)
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


def test_an_account_fact_is_proposed_only_when_asked(
    engine: MemoryEngine, giulia: Identity
) -> None:
    [remember, *_] = korely_tools(engine, identity=giulia)
    said = remember.invoke(
        {"key": "office", "content": "Acme's office is in Turin", "account_wide": True}
    )
    assert said.startswith("Proposed office for the whole account")
    [fact] = engine.get_facts(giulia)
    assert fact.effective_scope is Scope.ACCOUNT_PROPOSED


def test_forget_can_erase_the_words(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "health", "Giulia has type 1 diabetes")
    _, _, forget, _ = korely_tools(engine, identity=giulia)
    assert forget.invoke({"key": "health", "erase": True}) == (
        "Forgot health and erased every version of it."
    )
    assert [f.erased for f in engine.history(giulia, "health")] == [True]
    assert "diabetes" not in engine.get_context(giulia, "health", reader="support-bot").text


def test_a_fixed_identity_ignores_a_runtime_the_caller_sends(
    engine: MemoryEngine, giulia: Identity
) -> None:
    [remember, *_] = korely_tools(engine, identity=giulia)
    forged = runtime(Identity("evil", "mallory", "other-bot"))
    answer = remember.invoke(tool_call("remember", key="k", content="c", runtime=forged))
    assert answer.status == "error"
    assert engine.get_facts(Identity("evil", "mallory", "other-bot")) == []
    assert engine.get_facts(giulia) == []


def test_a_database_failure_is_a_neutral_sentence(giulia: Identity, outage: Any) -> None:
    [remember, *_] = korely_tools(outage.engine, identity=giulia)
    outage.cut()
    answer = remember.invoke(tool_call("remember", key="home-city", content="Rome"))
    assert answer.status == "error"
    assert answer.text.startswith("Not saved: the memory could not be reached")
    for leak in ("127.0.0.1", str(outage.port), "psycopg", "connection", "refused"):
        assert leak not in answer.text


def test_the_writer_is_not_told_its_own_change(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="support-bot")
    _, correct, *_ = korely_tools(engine, identity=giulia, reader="support-bot")
    correct.invoke({"key": "home-city", "content": "Giulia lives in Milan"})
    assert engine.get_context(giulia, reader="support-bot").changed == ()
    assert engine.get_context(giulia, reader="other-bot").changed == ()  # never read it


def test_tool_prefix_names_every_tool(engine: MemoryEngine) -> None:
    tools = korely_tools(engine, identity=GIULIA, tool_prefix="memory_")
    assert [t.name for t in tools] == [f"memory_{d.name}" for d in MEMORY_TOOLS]


def test_a_classic_agent_executor_uses_tools_with_a_fixed_identity(
    engine: MemoryEngine, giulia: Identity
) -> None:
    model = scripted(calls("remember", key="home-city", content="Giulia lives in Rome"), "Noted.")
    tools = korely_tools(engine, identity=giulia)
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You keep facts."),
            ("human", "{input}"),
            MessagesPlaceholder("agent_scratchpad"),
        ]
    )
    executor = AgentExecutor(agent=create_tool_calling_agent(model, tools, prompt), tools=tools)
    assert executor.invoke({"input": "I live in Rome."})["output"] == "Noted."
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"identity": GIULIA, "identity_from": lambda run: GIULIA}, "identity"),
        ({"identity": Identity("acme", "a/b", "bot")}, "user"),
        ({"identity": ("acme", "giulia", "bot")}, "identity"),
        ({"reader": "support/bot"}, "reader"),
        ({"max_facts": -1}, "max_facts"),
        ({"tool_prefix": "memory tools "}, "tool_prefix"),
        ({"tool_prefix": "x" * 60}, "tool_prefix"),
    ],
)
def test_bad_options_are_refused_when_the_tools_are_made(
    engine: MemoryEngine, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        korely_tools(engine, **options)
    assert refused.value.field == field


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
    with pytest.raises(InvalidRequest, match="context=Identity"):
        remember.invoke({"key": "home-city", "content": "x", "runtime": runtime(context)})


def test_an_identity_the_engine_refuses_is_raised_not_told_to_the_model(
    engine: MemoryEngine,
) -> None:
    [remember, *_] = korely_tools(engine)
    bad = Identity(account="acme", user="a/b", agent="support-copilot")
    with pytest.raises(InvalidRequest, match="user"):
        remember.invoke({"key": "k", "content": "c", "runtime": runtime(bad)})


def test_async_calls_run_the_sync_body_in_a_thread() -> None:
    # One implementation per behaviour: `ainvoke` goes through BaseTool's `_arun`.
    assert KorelyTool._arun is BaseTool._arun
