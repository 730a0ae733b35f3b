"""A real `create_agent` agent with KorelyMiddleware, driven by a scripted chat model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from korely_memory import Identity, InvalidRequest, MemoryEngine
from korely_memory.limits import MAX_BUDGET, MIN_BUDGET
from langchain_korely import KorelyMiddleware

from ._agents import (
    ASYNC_RUNS_LOSE_THE_CONFIG,
    CHANGED,
    NO_CONFIG_IN_MODEL_HOOK,
    PROMPT,
    ScriptedChatModel,
    agent_with,
    ask,
    calls,
    scripted,
    skip_async_on_python_3_10,
    tool_messages,
    tool_replies,
)


@pytest.mark.asyncio
async def test_a_fact_remembered_in_one_conversation_is_in_the_next_and_its_change_told_once(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    model = scripted(
        calls("remember", key="home-city", content="Giulia lives in Rome"),
        "Noted.",
        "You live in Rome.",
        "You live in Milan now.",
        "Still Milan.",
    )
    agent = agent_with(model, engine, placement=placement)

    first = await ask(agent, "I live in Rome.", giulia, use_async)
    assert tool_replies(first) == ["Remembered home-city: Giulia lives in Rome"]
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]

    await ask(agent, "Where do I live?", giulia, use_async)
    assert "home-city: Giulia lives in Rome" in model.prompts[2]
    assert CHANGED not in model.prompts[2]

    # Another writer corrects the fact this reader was handed.
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    await ask(agent, "Did anything change?", giulia, use_async)
    assert CHANGED in model.prompts[3]
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in model.prompts[3]

    await ask(agent, "Where do I live now?", giulia, use_async)
    assert CHANGED not in model.prompts[4]
    assert "home-city: Giulia lives in Milan" in model.prompts[4]


@pytest.mark.asyncio
async def test_the_block_goes_where_the_placement_says(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    in_system, in_context = scripted("Hello."), scripted("Hello.")
    await ask(agent_with(in_system, engine, placement="system"), "Hi", giulia, use_async)
    await ask(agent_with(in_context, engine, placement="context"), "Hi", giulia, use_async)
    block = engine.get_context(giulia, "Hi")

    system, user = in_system.received[0]
    assert system.text == f"{PROMPT}\n\n{block.text}"
    assert user.text == "Hi"

    system, user = in_context.received[0]
    assert system.text.startswith(f"{PROMPT}\n\n{block.stable}\n")
    assert "home-city" not in system.text
    assert user.text == f"<memory>\n{block.volatile}\n</memory>\n\nHi"


@pytest.mark.asyncio
async def test_with_context_placement_the_system_prompt_never_changes(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    model = scripted(calls("remember", key="home-city", content="Giulia lives in Rome"), "Noted.")
    agent = agent_with(model, engine, placement="context")
    await ask(agent, "I live in Rome.", giulia, use_async)
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    await ask(agent, "And now?", giulia, use_async)

    assert len(set(model.system_prompts)) == 1
    assert "Giulia lives" not in model.system_prompts[0]


@pytest.mark.asyncio
async def test_the_history_keeps_the_users_own_words(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    agent = agent_with(scripted("Hello."), engine, placement=placement)
    result = await ask(agent, "Hi", giulia, use_async)
    assert [m.text for m in result["messages"]] == ["Hi", "Hello."]


@pytest.mark.asyncio
async def test_an_agent_without_system_prompt_gets_the_block_alone(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted("Hello.")
    agent = create_agent(model, middleware=[KorelyMiddleware(engine, placement="system")])
    await ask(agent, "Hi", giulia, use_async)
    assert model.system_prompts[0] == engine.get_context(giulia, "Hi").text


@pytest.mark.asyncio
async def test_a_model_call_naming_another_identity_writes_nothing(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    forged = {"account": "evil", "user": "mallory", "agent": "other-bot"}
    model = scripted(
        calls("remember", key="home-city", content="Mallory lives in Rome", **forged),
        "Done.",
    )
    result = await ask(agent_with(model, engine), "Remember this.", giulia, use_async)

    [told] = tool_messages(result)
    assert told.status == "error"
    assert told.text.startswith("Not saved: this tool takes only")
    for who in (giulia, Identity("evil", "mallory", "other-bot")):
        assert engine.get_facts(who) == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("call", "reply"),
    [
        (calls("remember", key="!!", content="x"), "Not saved: key"),
        (calls("remember", key="home-city", content=" "), "Not saved: content"),
        (calls("correct", key="pet", content="Giulia has a cat"), "Not corrected: no true fact"),
        (calls("forget", key="pet"), "Not forgotten: no true fact"),
        (calls("remember", key="pet", content="Giulia has a cat"), "Not saved: already 1 facts"),
        (calls("remember", key="pet", content="x", scope="account"), "Not saved: this tool"),
    ],
)
async def test_a_refused_call_reaches_the_model_as_an_error_and_the_run_goes_on(
    engine: MemoryEngine, giulia: Identity, use_async: bool, call: AIMessage, reply: str
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted(call, "Sorry, I could not do that.")
    result = await ask(agent_with(model, engine, max_facts=1), "Please.", giulia, use_async)

    [told] = tool_messages(result)
    assert told.status == "error"
    assert told.text.startswith(reply)
    assert result["messages"][-1].text == "Sorry, I could not do that."
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


@pytest.mark.asyncio
async def test_correct_forget_and_erase_through_the_agent(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(giulia, "health", "Giulia has type 1 diabetes")
    model = scripted(
        calls("correct", key="home-city", content="Giulia lives in Milan"),
        "Updated.",
        calls("forget", key="home-city"),
        "Forgotten.",
        calls("forget", key="health", erase=True),
        "Erased.",
    )
    agent = agent_with(model, engine)

    assert tool_replies(await ask(agent, "I moved.", giulia, use_async)) == [
        "Corrected home-city: Giulia lives in Milan"
    ]
    assert tool_replies(await ask(agent, "Forget it.", giulia, use_async)) == ["Forgot home-city."]
    assert tool_replies(await ask(agent, "Do not keep my health.", giulia, use_async)) == [
        "Forgot health and erased every version of it."
    ]
    assert engine.get_facts(giulia) == []
    assert all(version.erased for version in engine.history(giulia, "health"))


@pytest.mark.asyncio
async def test_a_new_turn_in_the_same_thread_reads_memory_again(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted("Hello.", "Noted.", "Noted again.")
    agent = agent_with(model, engine, placement=placement, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t-1"}}

    await ask(agent, "Hi", giulia, use_async, **thread)
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    await ask(agent, "I moved, by the way.", giulia, use_async, **thread)
    engine.correct(giulia, "home-city", "Giulia lives in Turin")
    await ask(agent, "I moved, by the way.", giulia, use_async, **thread)  # the same words

    assert "Giulia lives in Rome" in model.prompts[0]
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in model.prompts[1]
    assert "was: Giulia lives in Milan -> now: Giulia lives in Turin" in model.prompts[2]
    assert len(model.received[2]) == 6  # system, then the thread's five messages


@pytest.mark.asyncio
async def test_concurrent_runs_for_different_users_see_only_their_own_memory(
    engine: MemoryEngine, placement: str
) -> None:
    people = [Identity("acme", f"user-{i}", "support-copilot") for i in range(6)]
    for who in people:
        engine.remember(who, "home-city", f"{who.user} lives in city-{who.user}")

    def per_user(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].type == "tool":
            return AIMessage(content="ok")
        asker = messages[-1].text.rsplit("I am ", 1)[1]
        return calls("remember", key="team", content=f"{asker} works in billing")

    model = ScriptedChatModel(replies=[per_user] * 12)
    agent = agent_with(model, engine, placement=placement)

    results = await asyncio.gather(*(ask(agent, f"I am {who.user}", who, True) for who in people))

    assert [tool_replies(r) for r in results] == [
        [f"Remembered team: {who.user} works in billing"] for who in people
    ]
    seen: dict[str, list[str]] = {}
    for prompt in model.received:
        asker = prompt[1].text.rsplit("I am ", 1)[1]
        seen.setdefault(asker, []).append("\n".join(m.text for m in prompt))
    assert sorted(seen) == sorted(who.user for who in people)
    for asker, prompts in seen.items():
        before, after = prompts
        for prompt in prompts:
            facts = [line for line in prompt.splitlines() if line.startswith("- ")]
            assert all(f"{asker} " in fact for fact in facts), facts
        assert f"- home-city: {asker} lives in city-{asker}" in before
        # The run's own write is in the block of its next model call.
        assert f"team: {asker} works in billing" not in before
        assert f"- team: {asker} works in billing" in after


@pytest.mark.asyncio
async def test_a_resolver_can_take_the_identity_from_another_context(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    model = scripted(calls("remember", key="home-city", content="Giulia lives in Rome"), "Noted.")
    middleware = KorelyMiddleware(
        engine,
        identity_from=lambda run: Identity("acme", run.context["user_id"], "support-copilot"),
    )
    agent = create_agent(model, middleware=[middleware])
    await ask(agent, "I live in Rome.", {"user_id": "giulia"}, use_async)
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]


@pytest.mark.asyncio
async def test_a_resolver_reading_the_runs_config_works_in_the_middleware_and_the_tools(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    skip_async_on_python_3_10(use_async, NO_CONFIG_IN_MODEL_HOOK)
    engine.remember(giulia, "team", "Giulia works in billing")

    def from_config(run: Any) -> Identity:
        return Identity("acme", run.config["configurable"]["user_id"], "support-copilot")

    model = scripted(calls("remember", key="home-city", content="Giulia lives in Rome"), "Noted.")
    agent = create_agent(model, middleware=[KorelyMiddleware(engine, identity_from=from_config)])
    config = {"configurable": {"user_id": "giulia"}}
    state = {"messages": [("user", "I live in Rome.")]}
    if use_async:
        await agent.ainvoke(state, config=config)
    else:
        agent.invoke(state, config=config)

    assert "team: Giulia works in billing" in model.prompts[0]
    assert sorted(f.key for f in engine.get_facts(giulia)) == ["home-city", "team"]


@pytest.mark.skipif(not ASYNC_RUNS_LOSE_THE_CONFIG, reason="Python 3.11+ carries the config")
@pytest.mark.asyncio
async def test_on_python_3_10_an_async_resolver_reading_the_config_is_told_why(
    engine: MemoryEngine,
) -> None:
    def from_config(run: Any) -> Identity:
        return Identity("acme", run.config["configurable"]["user_id"], "support-copilot")

    agent = create_agent(
        scripted("Hi."), middleware=[KorelyMiddleware(engine, identity_from=from_config)]
    )
    with pytest.raises(InvalidRequest, match="context=") as refused:
        await agent.ainvoke(
            {"messages": [("user", "Hi")]}, config={"configurable": {"user_id": "giulia"}}
        )
    assert refused.value.field == "identity_from"


@pytest.mark.asyncio
async def test_a_run_without_identity_fails_with_a_clear_message(
    engine: MemoryEngine, use_async: bool
) -> None:
    agent = agent_with(scripted("Hello."), engine)
    with pytest.raises(InvalidRequest, match="context=Identity"):
        await ask(agent, "Hi", None, use_async)


class _NoToolCalling(BaseChatModel):
    """A chat model that cannot call tools: `bind_tools` is BaseChatModel's, which refuses."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "no-tools"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="Hello."))])


@pytest.mark.asyncio
async def test_read_only_gives_the_block_to_a_model_without_tool_calling(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = _NoToolCalling()
    with_tools = create_agent(model, middleware=[KorelyMiddleware(engine)])
    with pytest.raises(NotImplementedError):
        await ask(with_tools, "Hi", giulia, use_async)

    middleware = KorelyMiddleware(engine, read_only=True)
    assert middleware.tools == []
    result = await ask(create_agent(model, middleware=[middleware]), "Hi", giulia, use_async)
    assert result["messages"][-1].text == "Hello."
    assert "home-city: Giulia lives in Rome" in "\n".join(m.text for m in model.received[-1])


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"token_budget": MIN_BUDGET - 1}, "token_budget"),
        ({"token_budget": MAX_BUDGET + 1}, "token_budget"),
        ({"token_budget": "800"}, "token_budget"),
        ({"reader": ""}, "reader"),
        ({"reader": "support/bot"}, "reader"),
        ({"reader": "x" * 256}, "reader"),
        ({"changes": "renamed"}, "changes"),
        ({"placement": "prompt"}, "placement"),
        ({"on_error": "ignore"}, "on_error"),
        ({"read_only": "yes"}, "read_only"),
        ({"tool_prefix": "a b"}, "tool_prefix"),
        ({"name": "Korely:1"}, "name"),
        ({"cache_marker": "ephemeral"}, "cache_marker"),
        ({"max_facts": -1}, "max_facts"),
        ({"max_facts": -1, "read_only": True}, "max_facts"),  # checked without tools too
        ({"identity_from": "context"}, "identity_from"),
    ],
)
def test_bad_options_are_refused_when_the_middleware_is_made(
    options: dict[str, Any], field: str
) -> None:
    with MemoryEngine("sqlite://") as engine, pytest.raises(InvalidRequest) as refused:
        KorelyMiddleware(engine, **options)
    assert refused.value.field == field


@pytest.mark.parametrize("token_budget", [MIN_BUDGET, MAX_BUDGET])
def test_the_budget_limits_are_accepted(token_budget: int) -> None:
    with MemoryEngine("sqlite://") as engine:
        assert KorelyMiddleware(engine, token_budget=token_budget).token_budget == token_budget


def test_the_default_placement_is_context() -> None:
    with MemoryEngine("sqlite://") as engine:
        assert KorelyMiddleware(engine).placement == "context"


@pytest.mark.asyncio
async def test_a_system_prompt_of_content_blocks_keeps_its_cache_markers(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    marked = {"type": "text", "text": PROMPT, "cache_control": {"type": "ephemeral"}}
    model = scripted("Hello.")
    agent = create_agent(
        model,
        system_prompt=SystemMessage(content=[marked]),
        middleware=[KorelyMiddleware(engine, placement=placement)],
    )
    await ask(agent, "Hi", giulia, use_async)

    first, *ours = model.received[0][0].content
    assert first == marked
    assert all("cache_control" not in block for block in ours)  # type: ignore[operator]


@pytest.mark.asyncio
async def test_the_stable_note_can_carry_a_cache_marker(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    marker = {"cache_control": {"type": "ephemeral"}}
    model = scripted("Hello.")
    agent = agent_with(model, engine, placement=placement, cache_marker=marker)
    await ask(agent, "Hi", giulia, use_async)
    block = engine.get_context(giulia, "Hi")

    system, user = model.received[0]
    own, note, *rest = system.content
    assert own == {"type": "text", "text": PROMPT}
    assert note["cache_control"] == {"type": "ephemeral"}  # type: ignore[index]
    assert note["text"].startswith(block.stable)  # type: ignore[index]
    if placement == "system":
        assert rest == [{"type": "text", "text": block.volatile}]
    else:
        assert rest == []
        assert isinstance(user, HumanMessage) and block.volatile in user.text


@pytest.mark.asyncio
async def test_a_fact_the_model_records_until_a_day_expires_then(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    model = scripted(
        calls("remember", key="leave", content="Giulia is on leave", until="2999-12-15"),
        "Noted.",
        calls("correct", key="leave", content="Giulia is on leave, reachable by email"),
        "Noted.",
        calls("remember", key="trip", content="Giulia travels", until="2000-01-01"),
        "I could not note that.",
    )
    agent = agent_with(model, engine)

    first = await ask(agent, "I am on leave until 15 December 2999.", giulia, use_async)
    assert tool_replies(first) == ["Remembered leave: Giulia is on leave (until 2999-12-15)"]
    (leave,) = engine.get_facts(giulia)
    assert leave.valid_until is not None and leave.valid_until.date().isoformat() == "2999-12-16"
    # Left out, until is null: the correction holds until something changes it.
    second = await ask(agent, "You can email me meanwhile.", giulia, use_async)
    assert tool_replies(second) == ["Corrected leave: Giulia is on leave, reachable by email"]
    assert engine.get_facts(giulia)[0].valid_until is None
    third = await ask(agent, "I travelled in 1999.", giulia, use_async)
    assert tool_replies(third) == ["Not saved: until: must be in the future"]
    assert [f.key for f in engine.get_facts(giulia)] == ["leave"]
