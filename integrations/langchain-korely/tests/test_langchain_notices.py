"""Notices told exactly once through failures, retries and interrupts; one read per turn.

A change is held when the block is read and acknowledged only after a model
call with the block in its prompt has answered.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

import pytest
import sqlalchemy as sa
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentState,
    HumanInTheLoopMiddleware,
    ModelRetryMiddleware,
    before_model,
)
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from korely_memory import Identity, MemoryEngine
from langchain_korely import KorelyMiddleware

from ._agents import (
    CHANGED,
    NO_INTERRUPT,
    PROMPT,
    agent_with,
    ask,
    calls,
    resume,
    scripted,
    skip_async_on_python_3_10,
    tool_replies,
)

MOVED = "was: Giulia lives in Rome -> now: Giulia lives in Milan"
THREAD = {"configurable": {"thread_id": "t-1"}}


def a_change_waits(engine: MemoryEngine, giulia: Identity) -> None:
    """The reader was handed a fact that another writer then corrected."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="support-bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")


def told(prompts: list[list[BaseMessage]]) -> list[bool]:
    """Whether each prompt tells the change: in its system prompt, or at the start of its latest
    user message (with `"notes"`, the `<memory>` sections of earlier user messages are earlier
    turns' notes, kept in place: they told it before)."""
    return [MOVED in _system_and_latest(prompt) for prompt in prompts]


def _system_and_latest(prompt: list[BaseMessage]) -> str:
    latest = next((m for m in reversed(prompt) if m.type == "human"), None)
    system = [m.text for m in prompt if m.type == "system"]
    return "\n".join([*system, latest.text if latest is not None else ""])


class CountingEngine(MemoryEngine):
    """The real engine, counting the blocks it is asked for."""

    reads = 0

    def get_context(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return super().get_context(*args, **kwargs)

    async def aget_context(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return await super().aget_context(*args, **kwargs)


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order} ships tomorrow"


@pytest.mark.asyncio
async def test_one_read_per_turn_whatever_the_model_calls(
    db_url: str, giulia: Identity, use_async: bool, placement: str
) -> None:
    with CountingEngine(db_url) as engine:
        a_change_waits(engine, giulia)
        engine.reads = 0
        model = scripted(calls("lookup", order="4471"), "It ships tomorrow.")
        model.failures = 1
        agent = create_agent(
            model,
            tools=[lookup],
            system_prompt=PROMPT,
            middleware=[
                ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False),
                KorelyMiddleware(engine, reader="support-bot", placement=placement),
            ],
        )
        await ask(agent, "Where is my order?", giulia, use_async)

        assert len(model.received) == 3  # failed, retried, after the tool
        assert engine.reads == 1
        assert told(model.received) == [True, True, True]
        await ask(agent, "Thanks.", giulia, use_async)
        assert engine.reads == 2
        assert told(model.received[3:]) == [False]


@pytest.mark.asyncio
@pytest.mark.parametrize("retry_first", [True, False])
async def test_a_retried_model_call_tells_the_change_once(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str, retry_first: bool
) -> None:
    a_change_waits(engine, giulia)
    model = scripted("You live in Milan.", "Still Milan.")
    model.failures = 1
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    korely = KorelyMiddleware(engine, reader="support-bot", placement=placement)
    middleware = [retry, korely] if retry_first else [korely, retry]
    agent = create_agent(model, system_prompt=PROMPT, middleware=middleware)

    await ask(agent, "Where do I live?", giulia, use_async)
    await ask(agent, "And now?", giulia, use_async)

    assert told(model.received) == [True, True, False]


@pytest.mark.asyncio
async def test_a_run_that_failed_and_is_resumed_tells_the_change(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    a_change_waits(engine, giulia)
    model = scripted("You live in Milan.", "Still Milan.")
    agent = agent_with(model, engine, placement=placement, checkpointer=InMemorySaver())

    model.failures = 1
    with pytest.raises(ConnectionError):
        await ask(agent, "Where do I live?", giulia, use_async, **THREAD)
    result = await resume(agent, None, giulia, use_async, **THREAD)  # the run again
    assert result["messages"][-1].text == "You live in Milan."
    await ask(agent, "And now?", giulia, use_async, **THREAD)

    assert told(model.received) == [True, True, False]


@pytest.mark.asyncio
async def test_a_message_sent_again_after_a_failure_tells_the_change(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    a_change_waits(engine, giulia)
    model = scripted("You live in Milan.", "Still Milan.")
    agent = agent_with(model, engine, placement=placement)

    model.failures = 1
    with pytest.raises(ConnectionError):
        await ask(agent, "Where do I live?", giulia, use_async)
    await ask(agent, "Where do I live?", giulia, use_async)  # the user sends it again
    await ask(agent, "And now?", giulia, use_async)

    assert told(model.received) == [True, True, False]


@pytest.mark.asyncio
async def test_a_change_a_failed_run_held_is_told_once_the_hold_runs_out(
    db_url: str, giulia: Identity, use_async: bool
) -> None:
    now = [dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)]
    with MemoryEngine(db_url, clock=lambda: now[0]) as engine:
        a_change_waits(engine, giulia)
        model = scripted("Hello.", "You live in Milan.")
        agent = agent_with(model, engine)

        model.failures = 1
        with pytest.raises(ConnectionError):
            await ask(agent, "Where do I live?", giulia, use_async)
        await ask(agent, "Something else.", giulia, use_async)  # other words: a new turn
        now[0] += dt.timedelta(minutes=11)
        await ask(agent, "Hello again.", giulia, use_async)

        assert told(model.received) == [True, False, True]


@pytest.mark.asyncio
async def test_an_interrupt_and_its_resumption_tell_each_change_once(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    skip_async_on_python_3_10(use_async, NO_INTERRUPT)
    a_change_waits(engine, giulia)
    engine.remember(giulia, "pet", "Giulia has a cat")
    engine.remember(giulia, "team", "Giulia works in billing")
    model = scripted(calls("forget", key="pet"), "Done.", "Anything else?")
    agent = agent_with(
        model,
        engine,
        placement=placement,
        checkpointer=InMemorySaver(),
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"forget": True})],
    )

    paused = await ask(agent, "Forget my cat.", giulia, use_async, **THREAD)
    assert "__interrupt__" in paused
    # While the run waits for a person, another writer corrects a fact the agent was handed...
    engine.correct(giulia, "team", "Giulia works in sales")
    model.failures = 1  # ...and the resumed run's model call fails once.
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    with pytest.raises(ConnectionError):
        await resume(agent, approve, giulia, use_async, **THREAD)
    done = await resume(agent, None, giulia, use_async, **THREAD)
    await ask(agent, "Thanks.", giulia, use_async, **THREAD)

    assert tool_replies(done) == ["Forgot pet."]
    # One turn, paused and resumed: what it told is in each of its model calls, and spent once
    # its run finished; the next turn tells none of it again.
    assert told(model.received) == [True, True, True, False]
    team = "was: Giulia works in billing -> now: Giulia works in sales"
    assert [team in _system_and_latest(p) for p in model.received] == [False, True, True, False]
    interrupted, _, answered, _ = model.prompts
    assert "pet:" in interrupted
    if placement == "notes":  # the turn's first note stays; the one read after the write adds
        assert "pet:" not in engine.notes(giulia, "t-1")[-1].text  # what is new, and no pet
    else:
        assert "pet:" not in answered
    assert engine.get_context(giulia, reader="support-bot").changed == ()


@before_model
def ask_a_person_first(state: AgentState[Any], runtime: Runtime[Any]) -> None:
    interrupt("May the agent answer?")


@pytest.mark.asyncio
async def test_a_run_interrupted_before_the_model_answered_tells_the_change_when_resumed(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    skip_async_on_python_3_10(use_async, NO_INTERRUPT)
    a_change_waits(engine, giulia)
    model = scripted("You live in Milan.", "Still Milan.")
    agent = agent_with(
        model,
        engine,
        placement=placement,
        checkpointer=InMemorySaver(),
        middleware=[ask_a_person_first],
    )
    paused = await ask(agent, "Where do I live?", giulia, use_async, **THREAD)
    assert "__interrupt__" in paused and model.received == []
    await resume(agent, Command(resume="yes"), giulia, use_async, **THREAD)
    await ask(agent, "And now?", giulia, use_async, **THREAD)
    await resume(agent, Command(resume="yes"), giulia, use_async, **THREAD)

    assert told(model.received) == [True, False]


@pytest.mark.asyncio
@pytest.mark.parametrize("thread", [{}, THREAD], ids=["no thread", "a thread"])
async def test_the_agents_own_write_is_in_its_next_model_call_and_never_told_back(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str, thread: Any
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    model = scripted(
        calls("correct", key="home-city", content="Giulia lives in Milan"),
        "Noted: Milan.",
        "You live in Milan.",
        "You live in Turin now.",
    )
    agent = agent_with(model, engine, placement=placement)

    await ask(agent, "I moved to Milan.", giulia, use_async, **thread)
    await ask(agent, "Where do I live?", giulia, use_async, **thread)
    engine.correct(giulia, "home-city", "Giulia lives in Turin")  # someone else
    await ask(agent, "Where do I live now?", giulia, use_async, **thread)

    before_tool, after_tool, next_turn, after_other = model.prompts
    assert "home-city: Giulia lives in Rome" in before_tool
    assert "home-city: Giulia lives in Milan" in after_tool
    if placement == "notes" and thread:  # read again: a note after the turn's first, in place
        assert after_tool.index("Giulia lives in Rome") < after_tool.index("Giulia lives in Milan")
    else:
        assert "home-city: Giulia lives in Rome" not in after_tool  # read again, not the old block
    assert CHANGED not in after_tool and CHANGED not in next_turn  # its own change
    assert "was: Giulia lives in Milan -> now: Giulia lives in Turin" in after_other


@pytest.mark.asyncio
async def test_concurrent_runs_of_one_reader_tell_a_change_once(
    engine: MemoryEngine, giulia: Identity, placement: str
) -> None:
    a_change_waits(engine, giulia)
    model = scripted(*["Hello."] * 6)
    agent = agent_with(model, engine, placement=placement)
    await asyncio.gather(*(ask(agent, f"Hi {i}", giulia, True) for i in range(6)))
    assert sum(told(model.received)) == 1


@pytest.mark.asyncio
async def test_an_acknowledgement_that_fails_is_logged_and_the_run_goes_on(
    outage: Any, giulia: Identity, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    a_change_waits(outage.engine, giulia)

    def answer_then_lose_the_database(messages: Any) -> str:
        outage.cut()
        return "You live in Milan."

    model = scripted(answer_then_lose_the_database)
    agent = agent_with(model, outage.engine)
    with caplog.at_level(logging.WARNING, logger="langchain_korely"):
        result = await ask(agent, "Where do I live?", giulia, use_async)

    assert result["messages"][-1].text == "You live in Milan."
    assert told(model.received) == [True]
    assert "could not acknowledge" in caplog.text


@pytest.mark.asyncio
async def test_with_on_error_continue_a_database_down_leaves_the_model_without_memory(
    outage: Any, giulia: Identity, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    outage.engine.remember(giulia, "home-city", "Giulia lives in Rome")
    outage.cut()
    model = scripted(calls("remember", key="pet", content="Giulia has a cat"), "Sorry.")
    agent = agent_with(model, outage.engine, on_error="continue")
    with caplog.at_level(logging.WARNING, logger="langchain_korely"):
        result = await ask(agent, "I have a cat.", giulia, use_async)

    assert result["messages"][-1].text == "Sorry."
    assert "home-city" not in model.prompts[0]
    assert model.prompts[0].startswith(f"[system] {PROMPT}")
    [reply] = tool_replies(result)
    assert reply.startswith("Not saved: the memory could not be reached")
    assert "could not be read" in caplog.text


@pytest.mark.asyncio
async def test_by_default_a_database_down_fails_the_run(
    outage: Any, giulia: Identity, use_async: bool
) -> None:
    outage.cut()
    model = scripted("Hello.")
    with pytest.raises(sa.exc.OperationalError):
        await ask(agent_with(model, outage.engine), "Hi", giulia, use_async)
    assert model.received == []
