"""The memory tools: built from the engine's definitions, written for the run's person."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory

from korely_memory import Identity, InvalidRequest, MemoryEngine
from korely_memory.tools import MEMORY_TOOLS, MemoryTool, ToolArgument
from llama_index.memory.korely import KorelyMemory, KorelyMemoryBlock, korely_tools

NOT_THE_PERSON = "It always works on the memory of the person in this conversation."


def tools_by_name(engine: MemoryEngine, who: Identity | None = None, **kwargs: Any) -> dict:
    return {t.metadata.name: t for t in korely_tools(engine, who, **kwargs)}


def test_one_tool_per_definition_with_its_arguments_only(engine) -> None:
    tools = korely_tools(engine)
    assert [t.metadata.name for t in tools] == [t.name for t in MEMORY_TOOLS]
    for tool, definition in zip(tools, MEMORY_TOOLS, strict=True):
        parameters = tool.metadata.get_parameters_dict()
        assert set(parameters["properties"]) == {a.name for a in definition.arguments}
        assert set(parameters.get("required", [])) == {
            a.name for a in definition.arguments if a.required
        }
        assert tool.metadata.description == definition.description
    forget = tools[[t.name for t in MEMORY_TOOLS].index("forget")]
    assert forget.metadata.get_parameters_dict()["properties"]["erase"]["type"] == "boolean"


def test_a_tool_added_to_the_definitions_is_offered_without_change(
    engine, giulia, monkeypatch
) -> None:
    recall = MemoryTool(
        name="recall",
        description="Search what is kept about the user.",
        arguments=(ToolArgument("query", "What to look for."),),
        refusal="Not found",
        perform=lambda engine, who, args, options: f"Looked for {args['query']} for {who.user}.",
    )
    monkeypatch.setattr("llama_index.memory.korely.tools.MEMORY_TOOLS", (*MEMORY_TOOLS, recall))
    tools = tools_by_name(engine, giulia)
    assert list(tools)[-1] == "recall"
    assert set(tools["recall"].metadata.get_parameters_dict()["properties"]) == {"query"}
    output = tools["recall"].call(query="the warehouse")
    assert (output.content, output.is_error) == ("Looked for the warehouse for giulia.", False)


@pytest.mark.parametrize(
    ("tool", "arguments", "answer"),
    [
        ("correct", {"key": "home-city", "content": "Milan"}, "Not corrected: no true fact"),
        ("forget", {"key": "home-city"}, "Not forgotten: no true fact"),
        ("remember", {"key": "no/slashes", "content": "x"}, "Not saved: key"),
        ("remember", {"key": "home-city", "content": ""}, "Not saved: content"),
        ("remember", {"key": "home-city"}, "Not saved: content is required."),
        ("remember", {"key": "home-city", "content": "x", "user": "bob"}, "Not saved: this tool"),
        ("recall", {"query": ""}, "Not found: query: must say what to look for"),
        ("recall", {"query": " \n "}, "Not found: query: must say what to look for"),
        ("recall", {}, "Not found: query is required."),
    ],
)
async def test_a_refused_call_is_an_error_the_model_can_act_on(
    engine, giulia, tool, arguments, answer
) -> None:
    output = await tools_by_name(engine, giulia)[tool].acall(**arguments)
    assert output.is_error
    assert (output.content or "").startswith(answer)
    assert engine.get_facts(giulia, include_invalidated=True) == []


async def test_tool_call_naming_another_user_writes_nothing(engine, giulia, script) -> None:
    llm = script.llm(
        script.call(
            "remember", key="home-city", content="Bob lives in Paris", user="bob", account="globex"
        ),
        script.call(
            "correct", key="home-city", content="Bob lives in Lyon", identity={"user": "bob"}
        ),
        script.call("forget", key="home-city", agent="other-agent"),
        script.say("Done."),
    )
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))
    memory = KorelyMemory.from_defaults(engine, giulia)
    await agent.run(user_msg="Remember for user bob that he lives in Paris.", memory=memory)

    results = [m for m in llm.received[-1] if m.role == "tool"]
    assert [m.content for m in results] == [
        "Not saved: this tool takes only key, content, account_wide and until, not account and "
        "user. " + NOT_THE_PERSON,
        "Not corrected: this tool takes only key, content and until, not identity. "
        + NOT_THE_PERSON,
        "Not forgotten: this tool takes only key and erase, not agent. " + NOT_THE_PERSON,
    ]
    for account in ("acme", "globex"):
        for user in ("bob", "giulia", None):
            for agent_name in ("support-copilot", "other-agent"):
                who = Identity(account, user, agent_name)
                assert engine.get_facts(who, include_invalidated=True) == []


async def test_a_failing_database_is_a_neutral_sentence(engine, giulia, caplog) -> None:
    tools = tools_by_name(engine, giulia)
    assert not (
        await tools["remember"].acall(key="home-city", content="Giulia lives in Rome")
    ).is_error
    mover = sa.create_engine(engine.url)
    with mover.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE korely_facts RENAME TO korely_facts_moved")
    mover.dispose()  # or its pooled connection would be left open for the collector to find
    with caplog.at_level(logging.ERROR, logger="korely_memory"):
        output = await tools["correct"].acall(key="home-city", content="Giulia lives in Milan")
    assert output.is_error
    assert output.content == (
        "Not corrected: the memory could not be reached just now; carry on without it and try "
        "again later."
    )
    assert not re.search(r"korely_facts|exist|no such|port|127\.0\.0\.1", output.content or "")
    assert "could not reach the memory" in caplog.text  # the driver's words go to the log


def test_tool_prefix_names_every_tool(engine) -> None:
    names = [t.metadata.name for t in korely_tools(engine, tool_prefix="memory_")]
    assert names == [f"memory_{t.name}" for t in MEMORY_TOOLS]


@pytest.mark.parametrize("prefix", ["memory tools ", "x" * 60, "<", 3])
def test_a_prefix_that_makes_no_tool_name_is_refused(engine, prefix) -> None:
    with pytest.raises(InvalidRequest) as refused:
        korely_tools(engine, tool_prefix=prefix)
    assert refused.value.field == "tool_prefix"


async def test_a_prefixed_tool_is_called_by_its_name(engine, giulia, script) -> None:
    def forget(key: str) -> str:
        """The application's own tool of that name."""
        return "the application's forget"

    llm = script.llm(
        script.call("memory_remember", key="home-city", content="Giulia lives in Rome"),
        script.call("forget", key="anything"),
        script.say("Done."),
    )
    agent = FunctionAgent(llm=llm, tools=[*korely_tools(engine, tool_prefix="memory_"), forget])
    await agent.run(user_msg="I live in Rome.", memory=KorelyMemory.from_defaults(engine, giulia))
    assert [m.content for m in llm.received[-1] if m.role == "tool"] == [
        "Remembered home-city: Giulia lives in Rome",
        "the application's forget",
    ]


@pytest.mark.parametrize(
    ("identity", "max_facts", "field"),
    [(Identity("acme", "giulia", "a/b"), None, "agent"), (None, -1, "max_facts")],
)
def test_bad_arguments_are_refused_when_the_tools_are_made(
    engine, identity, max_facts, field
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        korely_tools(engine, identity, max_facts=max_facts)
    assert refused.value.field == field


# -- whose memory: the run's ------------------------------------------------------------


class Receptionist(MockFunctionCallingLLM):
    """A model shared by every conversation: 'I am NAME from CITY' becomes a remember call."""

    def __init__(self) -> None:
        super().__init__()
        self.response_generator = self._respond

    @staticmethod
    def _respond(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
        last = messages[-1]
        if last.role == "tool":
            return ChatMessage(role="assistant", content=f"Noted: {last.content}")
        said = re.search(r"I am (\w+) from (\w+)", last.content or "")
        assert said is not None
        name, city = said.groups()
        call = ToolCallBlock(
            tool_call_id=f"call-{name}",
            tool_name="remember",
            tool_kwargs={"key": "home-city", "content": f"{name} lives in {city}"},
        )
        return ChatMessage(role="assistant", blocks=[call])


async def test_one_agent_many_people_at_once_each_write_is_their_own(engine) -> None:
    # The server pattern: one agent, its tools made once, a memory per request.
    agent = FunctionAgent(llm=Receptionist(), tools=korely_tools(engine))
    people = {f"user{n:02d}": f"City{n:02d}" for n in range(16)}
    people.update(alice="Paris", bob="Lyon")

    async def converse(user: str, city: str) -> str:
        who = Identity("acme", user, "support-copilot")
        memory = KorelyMemory.from_defaults(engine, who, reader="support-bot")
        output = await agent.run(user_msg=f"I am {user} from {city}", memory=memory)
        return str(output.response.content)

    answers = await asyncio.gather(*(converse(u, c) for u, c in people.items()))
    assert answers == [f"Noted: Remembered home-city: {u} lives in {c}" for u, c in people.items()]
    for user, city in people.items():
        facts = engine.get_facts(
            Identity("acme", user, "support-copilot"), include_invalidated=True
        )
        assert [f.content for f in facts] == [f"{user} lives in {city}"]


async def test_tools_bound_to_one_person_refuse_a_run_of_someone_else(
    engine, giulia, bob, script, caplog
) -> None:
    llm = script.llm(
        script.call("remember", key="home-city", content="Bob lives in Lyon"), script.say("Hm.")
    )
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine, giulia))
    with caplog.at_level(logging.ERROR, logger="llama_index.memory.korely"):
        await agent.run(user_msg="I live in Lyon.", memory=KorelyMemory.from_defaults(engine, bob))
    [result] = [m for m in llm.received[-1] if m.role == "tool"]
    assert result.content == (
        "Not saved: these memory tools were made for another person than the one this "
        "conversation's memory belongs to, so nothing was written."
    )
    assert "bob" not in (result.content or "")
    assert "bound to" in caplog.text
    assert engine.get_facts(giulia, include_invalidated=True) == []
    assert engine.get_facts(bob, include_invalidated=True) == []


async def test_tools_without_an_identity_refuse_a_run_without_a_korely_memory(
    engine, script
) -> None:
    llm = script.llm(script.call("remember", key="home-city", content="Lyon"), script.say("Hm."))
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))
    await agent.run(user_msg="I live in Lyon.")  # LlamaIndex's default memory: no person in it
    [result] = [m for m in llm.received[-1] if m.role == "tool"]
    assert result.content == (
        "Not saved: this conversation has no memory of a person to write to, so nothing was "
        "written."
    )
    direct = await korely_tools(engine)[0].acall(key="home-city", content="Lyon")
    assert direct.is_error and direct.content == result.content


async def test_a_block_in_a_memory_of_your_own_says_whose_memory_it_is(
    engine, giulia, script
) -> None:
    llm = script.llm(
        script.call("remember", key="home-city", content="Giulia lives in Rome"),
        script.say("Noted."),
    )
    memory = Memory.from_defaults(
        memory_blocks=[KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")]
    )
    await FunctionAgent(llm=llm, tools=korely_tools(engine)).run(user_msg="Rome", memory=memory)
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]


# -- what a write tells the writer -------------------------------------------------------


async def test_the_agent_is_not_told_its_own_change_but_is_told_what_follows(
    engine, giulia, script
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    llm = script.llm(
        script.say("You live in Rome."),
        script.call("correct", key="home-city", content="Giulia lives in Milan"),
        script.say("Noted."),
        script.say("You live in Milan."),
        script.say("You live in Turin now."),
    )
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))
    await agent.run(user_msg="Where do I live?", memory=memory)
    await agent.run(user_msg="I moved to Milan.", memory=memory)
    await agent.run(user_msg="Where do I live?", memory=memory)
    told = script.text(llm.received[3])
    assert "- home-city: Giulia lives in Milan" in told
    assert "## Changed since you last read" not in told

    engine.correct(giulia, "home-city", "Giulia lives in Turin")  # another agent of the team
    await agent.run(user_msg="And now?", memory=memory)
    assert "- was: Giulia lives in Milan -> now: Giulia lives in Turin" in script.text(
        llm.received[4]
    )


async def test_forget_can_erase_when_the_person_asks_it_not_be_kept(engine, giulia, script) -> None:
    engine.remember(giulia, "health", "Giulia has type 1 diabetes")
    llm = script.llm(script.call("forget", key="health", erase=True), script.say("Done."))
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))
    await agent.run(
        user_msg="Please do not keep anything about my health.",
        memory=KorelyMemory.from_defaults(engine, giulia, reader="support-bot"),
    )
    [result] = [m for m in llm.received[-1] if m.role == "tool"]
    assert result.content == "Forgot health and erased every version of it."
    assert all(version.erased for version in engine.history(giulia, "health"))
    assert "diabetes" not in engine.get_context(giulia, reader="other-bot").text


async def test_the_ceiling_refuses_a_new_key_but_not_a_correction(engine, giulia, script) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    llm = script.llm(
        script.call("remember", key="favourite-colour", content="Giulia likes green"),
        script.call("remember", key="home-city", content="Giulia lives in Milan"),
        script.say("Done."),
    )
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine, max_facts=1))
    await agent.run(
        user_msg="I like green, and I moved to Milan.",
        memory=KorelyMemory.from_defaults(engine, giulia),
    )
    refused, replaced = [m.content or "" for m in llm.received[-1] if m.role == "tool"]
    assert refused.startswith("Not saved: already 1 facts kept (max_facts); correct or forget one")
    assert replaced == "Remembered home-city: Giulia lives in Milan"
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Milan"]


async def test_a_fact_the_model_records_until_a_day_expires_then(engine, giulia, script) -> None:
    llm = script.llm(
        script.call("remember", key="leave", content="Giulia is on leave", until="2999-12-15"),
        script.call("correct", key="leave", content="Giulia is on leave, reachable by email"),
        script.call("remember", key="trip", content="Giulia travels", until="yesterday"),
        script.say("Done."),
    )
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))
    memory = KorelyMemory.from_defaults(engine, giulia)
    await agent.run(user_msg="I am on leave until 15 December 2999.", memory=memory)

    results = [m.content for m in llm.received[-1] if m.role == "tool"]
    assert results == [
        "Remembered leave: Giulia is on leave (until 2999-12-15)",
        "Corrected leave: Giulia is on leave, reachable by email",
        "Not saved: until: must be a date (2026-03-01) or an ISO 8601 time "
        "(2026-03-01T09:30:00Z), got 'yesterday'",
    ]
    first, second = engine.history(giulia, "leave")
    assert first.valid_until is not None and first.valid_until.date().isoformat() == "2999-12-16"
    assert second.valid_until is None and second.is_current
