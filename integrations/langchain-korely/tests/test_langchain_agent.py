"""A real `create_agent` agent with KorelyMiddleware, driven by a scripted chat model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelRetryMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import Field

from korely_memory import Identity, InvalidRequest, MemoryEngine
from korely_memory.limits import MAX_BUDGET, MIN_BUDGET
from langchain_korely import KorelyMiddleware

PROMPT = "You are Acme's support agent."
CHANGED = "## Changed since you last read"


class ScriptedChatModel(GenericFakeChatModel):
    """Answers from a script, one reply per call, and records every prompt it receives."""

    received: list[list[BaseMessage]] = Field(default_factory=list)
    failures: int = 0
    """How many calls fail, with a connection error, before the script is followed."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the model is unreachable")
        return super()._generate(messages, *args, **kwargs)

    @property
    def system_prompts(self) -> list[str]:
        """The system message of each call so far, as text."""
        return [m[0].text if isinstance(m[0], SystemMessage) else "" for m in self.received]


def scripted(*replies: AIMessage | str) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter(replies))


def calls(name: str, **args: Any) -> AIMessage:
    """A model reply that calls one tool."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}])


def tool_replies(result: dict[str, Any]) -> list[str]:
    return [m.text for m in result["messages"] if isinstance(m, ToolMessage)]


async def ask(agent: Any, text: str, who: Any, use_async: bool, **config: Any) -> dict[str, Any]:
    """One user turn, in a fresh conversation unless `config` names a thread."""
    state = {"messages": [("user", text)]}
    if use_async:
        return await agent.ainvoke(state, config=config or None, context=who)
    return agent.invoke(state, config=config or None, context=who)


def agent_with(model: ScriptedChatModel, engine: MemoryEngine, **options: Any) -> Any:
    options.setdefault("reader", "support-bot")
    return create_agent(
        model, system_prompt=PROMPT, middleware=[KorelyMiddleware(engine, **options)]
    )


@pytest.mark.asyncio
async def test_a_fact_remembered_in_one_conversation_is_in_the_next_and_its_change_told_once(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    model = scripted(
        calls("remember", key="home-city", content="Giulia lives in Rome"),
        "Noted.",
        "You live in Rome.",
        calls("remember", key="team", content="Giulia works in billing"),
        "You live in Milan now.",
        "Still Milan.",
    )
    agent = agent_with(model, engine)

    first = await ask(agent, "I live in Rome.", giulia, use_async)
    assert tool_replies(first) == ["Remembered home-city: Giulia lives in Rome"]
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]

    await ask(agent, "Where do I live?", giulia, use_async)
    second = model.system_prompts[2]
    assert "home-city: Giulia lives in Rome" in second
    assert CHANGED not in second

    # Another writer corrects the fact this reader was handed.
    engine.correct(giulia, "home-city", "Giulia lives in Milan")

    await ask(agent, "Did anything change?", giulia, use_async)
    third_before_tool, third_after_tool = model.system_prompts[3:5]
    assert CHANGED in third_before_tool
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in third_before_tool
    # The block is built once per run: the second model call of the run sees the same one.
    assert third_after_tool == third_before_tool

    await ask(agent, "Where do I live now?", giulia, use_async)
    fourth = model.system_prompts[5]
    assert CHANGED not in fourth
    assert "home-city: Giulia lives in Milan" in fourth


@pytest.mark.asyncio
async def test_the_agents_own_system_prompt_comes_first(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted("Hello.")
    await ask(agent_with(model, engine), "Hi", giulia, use_async)

    [system] = model.system_prompts
    assert system.startswith(PROMPT + "\n\n")
    assert system.count(PROMPT) == 1
    assert "home-city: Giulia lives in Rome" in system.removeprefix(PROMPT)


@pytest.mark.asyncio
async def test_system_prompt_made_of_content_blocks_keeps_them(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    prompt = SystemMessage(
        content=[{"type": "text", "text": PROMPT, "cache_control": {"type": "ephemeral"}}]
    )
    model = scripted("Hello.")
    agent = create_agent(model, system_prompt=prompt, middleware=[KorelyMiddleware(engine)])
    await ask(agent, "Hi", giulia, use_async)

    first, block = model.received[0][0].content
    assert first == prompt.content[0]
    assert "home-city: Giulia lives in Rome" in block["text"]


@pytest.mark.asyncio
async def test_an_agent_without_system_prompt_gets_the_block_alone(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted("Hello.")
    agent = create_agent(model, middleware=[KorelyMiddleware(engine)])
    await ask(agent, "Hi", giulia, use_async)

    assert model.system_prompts[0] == engine.get_context(giulia, "Hi").text


@pytest.mark.asyncio
async def test_tool_arguments_cannot_choose_whose_memory_is_written(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    forged = {"account": "evil", "user": "mallory", "agent": "other-bot"}
    model = scripted(
        calls(
            "remember",
            key="home-city",
            content="Mallory lives in Rome",
            **forged,
            runtime={"context": forged},
        ),
        "Done.",
    )
    result = await ask(agent_with(model, engine), "Remember this.", giulia, use_async)

    assert tool_replies(result) == ["Remembered home-city: Mallory lives in Rome"]
    assert [f.owner for f in engine.get_facts(giulia)] == ["giulia"]
    for other in (
        Identity("evil", "mallory", "other-bot"),
        Identity("acme", "mallory", "support-copilot"),
        Identity("evil", "giulia", "support-copilot"),
        Identity("acme", "giulia", "other-bot"),
    ):
        assert engine.get_facts(other) == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("call", "reply"),
    [
        (calls("remember", key="!!", content="x"), "Not saved: key"),
        (calls("remember", key="home-city", content=" "), "Not saved: content"),
        (calls("correct", key="pet", content="Giulia has a cat"), "Not corrected: no true fact"),
        (calls("forget", key="pet"), "Not forgotten: no true fact"),
        (calls("remember", key="pet", content="Giulia has a cat"), "Not saved: already 1 facts"),
    ],
)
async def test_a_refused_call_is_told_to_the_model_and_the_run_goes_on(
    engine: MemoryEngine, giulia: Identity, use_async: bool, call: AIMessage, reply: str
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted(call, "Sorry, I could not do that.")
    result = await ask(agent_with(model, engine, max_facts=1), "Please.", giulia, use_async)

    [told] = tool_replies(result)
    assert told.startswith(reply)
    assert result["messages"][-1].text == "Sorry, I could not do that."
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


@pytest.mark.asyncio
async def test_correct_and_forget_through_the_agent(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted(
        calls("correct", key="home-city", content="Giulia lives in Milan"),
        "Updated.",
        calls("forget", key="home-city"),
        "Forgotten.",
    )
    agent = agent_with(model, engine)

    assert tool_replies(await ask(agent, "I moved.", giulia, use_async)) == [
        "Corrected home-city: Giulia lives in Milan"
    ]
    assert tool_replies(await ask(agent, "Forget it.", giulia, use_async)) == ["Forgot home-city."]
    assert engine.get_facts(giulia) == []


@pytest.mark.asyncio
async def test_a_new_turn_in_the_same_thread_reads_memory_again(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted("Hello.", "Noted.")
    agent = create_agent(
        model,
        system_prompt=PROMPT,
        middleware=[KorelyMiddleware(engine, reader="support-bot")],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "t-1"}}

    await ask(agent, "Hi", giulia, use_async, **thread)
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    await ask(agent, "I moved, by the way.", giulia, use_async, **thread)

    assert "Giulia lives in Rome" in model.system_prompts[0]
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in model.system_prompts[1]
    assert len(model.received[1]) == 4  # system, then the thread's three messages


@pytest.mark.asyncio
async def test_concurrent_runs_for_different_users_see_only_their_own_memory(
    engine: MemoryEngine,
) -> None:
    people = [Identity("acme", f"user-{i}", "support-copilot") for i in range(6)]
    for who in people:
        engine.remember(who, "home-city", f"{who.user} lives in city-{who.user}")

    class PerUserModel(ScriptedChatModel):
        """Calls a tool on each run's first model call, answers on the second."""

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            self.received.append(list(messages))
            if isinstance(messages[-1], ToolMessage):
                reply = AIMessage(content="ok")
            else:
                asker = messages[-1].text.removeprefix("I am ")
                reply = calls("remember", key="team", content=f"{asker} works in billing")
            return ChatResult(generations=[ChatGeneration(message=reply)])

    model = PerUserModel(messages=iter(()))
    agent = agent_with(model, engine)

    results = await asyncio.gather(*(ask(agent, f"I am {who.user}", who, True) for who in people))

    assert [tool_replies(r) for r in results] == [
        [f"Remembered team: {who.user} works in billing"] for who in people
    ]
    seen: dict[str, list[str]] = {}
    for prompt in model.received:
        asker = next(m.text for m in prompt if isinstance(m, HumanMessage)).removeprefix("I am ")
        seen.setdefault(asker, []).append(prompt[0].text)
    assert sorted(seen) == sorted(who.user for who in people)
    for asker, blocks in seen.items():
        # Both model calls of a run saw that run's block, read before the tool wrote.
        assert len(blocks) == 2
        assert blocks[0] == blocks[1]
        [fact] = [line for line in blocks[0].splitlines() if line.startswith("- ")]
        assert fact.startswith(f"- home-city: {asker} lives in city-{asker} (since ")


@pytest.mark.asyncio
async def test_a_resolver_can_take_the_identity_from_another_context(
    engine: MemoryEngine, use_async: bool
) -> None:
    who = Identity("acme", "giulia", "support-copilot")
    model = scripted(calls("remember", key="home-city", content="Giulia lives in Rome"), "Noted.")
    middleware = KorelyMiddleware(
        engine,
        identity_from=lambda runtime: Identity(
            "acme", runtime.context["user_id"], "support-copilot"
        ),
    )
    agent = create_agent(model, middleware=[middleware])
    await ask(agent, "I live in Rome.", {"user_id": "giulia"}, use_async)

    assert [f.content for f in engine.get_facts(who)] == ["Giulia lives in Rome"]


@pytest.mark.asyncio
async def test_a_run_without_identity_fails_with_a_clear_message(
    engine: MemoryEngine, use_async: bool
) -> None:
    agent = agent_with(scripted("Hello."), engine)
    with pytest.raises(ValueError, match="context=Identity"):
        await ask(agent, "Hi", None, use_async)


@pytest.mark.asyncio
async def test_a_retried_model_call_still_tells_the_change(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted("Hello.", "You live in Milan.", "Still Milan.")
    agent = create_agent(
        model,
        system_prompt=PROMPT,
        # Listed first, the retry wraps KorelyMiddleware: each attempt goes through it again.
        middleware=[
            ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False),
            KorelyMiddleware(engine, reader="support-bot"),
        ],
    )
    await ask(agent, "Hi", giulia, use_async)
    engine.correct(giulia, "home-city", "Giulia lives in Milan")

    model.failures = 1
    await ask(agent, "Where do I live?", giulia, use_async)
    failed, answered = model.system_prompts[1:3]
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in answered
    assert answered == failed

    await ask(agent, "And now?", giulia, use_async)
    assert CHANGED not in model.system_prompts[3]
    assert "home-city: Giulia lives in Milan" in model.system_prompts[3]


@pytest.mark.asyncio
async def test_a_run_resumed_after_an_interrupt_still_sees_the_block(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted(calls("forget", key="home-city"), "Forgotten.")
    agent = create_agent(
        model,
        system_prompt=PROMPT,
        middleware=[
            KorelyMiddleware(engine, reader="support-bot"),
            HumanInTheLoopMiddleware(interrupt_on={"forget": True}),
        ],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "t-1"}}
    await ask(agent, "Forget where I live.", giulia, use_async, **thread)
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    if use_async:
        result = await agent.ainvoke(approve, config=thread, context=giulia)
    else:
        result = agent.invoke(approve, config=thread, context=giulia)

    assert tool_replies(result) == ["Forgot home-city."]
    before, after = model.system_prompts
    assert "home-city: Giulia lives in Rome" in before
    # The block is not checkpointed: the resumed run reads it again, after the tool wrote.
    assert after.startswith(PROMPT + "\n\n")
    assert "home-city" not in after


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
    ],
)
def test_bad_options_are_refused_when_the_middleware_is_made(
    options: dict[str, Any], field: str
) -> None:
    with MemoryEngine("sqlite://") as engine, pytest.raises(InvalidRequest, match=field) as refused:
        KorelyMiddleware(engine, **options)
    assert refused.value.field == field


@pytest.mark.parametrize("token_budget", [MIN_BUDGET, MAX_BUDGET])
def test_the_budget_limits_are_accepted(token_budget: int) -> None:
    with MemoryEngine("sqlite://") as engine:
        assert KorelyMiddleware(engine, token_budget=token_budget).token_budget == token_budget
