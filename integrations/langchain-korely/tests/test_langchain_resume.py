"""A run resumed from its checkpoint needs no `context=` again: the identity is in the thread.

The identity the run was given (never its memory) is kept in the graph's state
by the middleware; a resumed run (`Command(resume=...)` after a person's
approval or an `interrupt()` in a tool, `invoke(None, config)` after a
failure) takes it from there. Some resumes go through an agent built anew on
the same checkpointer, as another process would, where nothing of the paused
run is in the process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from korely_memory import Identity, InvalidRequest, MemoryEngine
from langchain_korely import KorelyMiddleware

from ._agents import (
    CHANGED,
    NO_INTERRUPT,
    PROMPT,
    RecordingFakeChatModel,
    calls,
    fake,
    skip_async_on_python_3_10,
)

THREAD = {"configurable": {"thread_id": "t-1"}}
APPROVE = Command(resume={"decisions": [{"type": "approve"}]})
MOVED = "was: Giulia lives in Rome -> now: Giulia lives in Milan"


@tool
def send_parcel(address: str) -> str:
    """Send the parcel to an address, once a person has said yes."""
    answer = interrupt(f"Send the parcel to {address}?")
    return f"sent to {address}" if answer == "yes" else "not sent"


def unreachable() -> Iterator[AIMessage]:
    """The replies of a model that cannot be reached."""
    raise ConnectionError("the model is unreachable")
    yield AIMessage("")


def agent_on(
    saver: InMemorySaver, engine: MemoryEngine, model: RecordingFakeChatModel, **options: Any
) -> Any:
    middleware = [KorelyMiddleware(engine, reader="support-bot"), *options.pop("middleware", [])]
    return create_agent(
        model, system_prompt=PROMPT, middleware=middleware, checkpointer=saver, **options
    )


async def run(agent: Any, given: Any, use_async: bool, **context: Any) -> Any:
    if use_async:
        return await agent.ainvoke(given, config=THREAD, **context)
    return agent.invoke(given, config=THREAD, **context)


@pytest.fixture
def engine(sqlite_url: str) -> Iterator[MemoryEngine]:
    """Where the identity is kept is the adapter's alone: one database is enough."""
    with MemoryEngine(sqlite_url) as memory:
        yield memory


@pytest.fixture
def moved(engine: MemoryEngine, giulia: Identity) -> MemoryEngine:
    """The agent was handed Giulia's city, which another writer then corrected."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="support-bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    return engine


@pytest.mark.asyncio
async def test_a_run_approved_by_a_person_resumes_without_context(
    moved: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    skip_async_on_python_3_10(use_async, NO_INTERRUPT)
    review = HumanInTheLoopMiddleware(interrupt_on={"remember": True})
    model = fake(calls("remember", key="pet", content="Giulia has a cat"), "Noted: a cat.")
    agent = agent_on(InMemorySaver(), moved, model, middleware=[review])
    paused = await run(agent, {"messages": [("user", "I have a cat.")]}, use_async, context=giulia)
    assert "__interrupt__" in paused

    done = await run(agent, APPROVE, use_async)

    replies = ["Remembered pet: Giulia has a cat", "Noted: a cat."]
    assert [m.text for m in done["messages"][2:]] == replies
    assert sorted(f.key for f in moved.get_facts(giulia)) == ["home-city", "pet"]
    asked, answered = ("\n".join(m.text for m in prompt) for prompt in model.received)
    assert MOVED in asked and MOVED in answered and "pet: Giulia has a cat" in answered
    # The resumed run finished: the change it told is spent, as with context= given again.
    assert moved.get_context(giulia, reader="support-bot").changed == ()
    assert set(done) == {"messages"}


@pytest.mark.asyncio
async def test_a_run_approved_resumes_in_another_process(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    skip_async_on_python_3_10(use_async, NO_INTERRUPT)
    saver = InMemorySaver()
    review = HumanInTheLoopMiddleware(interrupt_on={"remember": True})
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    asked = fake(calls("remember", key="pet", content="Giulia has a cat"))
    first = agent_on(saver, engine, asked, middleware=[review])
    await run(first, {"messages": [("user", "I have a cat.")]}, use_async, context=giulia)

    answering = fake("Noted: a cat.")
    await run(agent_on(saver, engine, answering, middleware=[review]), APPROVE, use_async)

    assert sorted(f.key for f in engine.get_facts(giulia)) == ["home-city", "pet"]
    [answered] = ("\n".join(m.text for m in prompt) for prompt in answering.received)
    assert "Giulia lives in Milan" in answered and "pet: Giulia has a cat" in answered


@pytest.mark.asyncio
async def test_a_tool_that_interrupts_resumes_without_context(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    saver = InMemorySaver()
    asked = fake(calls("send_parcel", address="Via Roma 1, Milan"))
    paused = await run(
        agent_on(saver, engine, asked, tools=[send_parcel]),
        {"messages": [("user", "Send my parcel home, I live at Via Roma 1 in Milan.")]},
        use_async,
        context=giulia,
    )
    assert "__interrupt__" in paused

    answering = fake(calls("remember", key="home", content="Via Roma 1, Milan"), "Sent.")
    resumed = agent_on(saver, engine, answering, tools=[send_parcel])
    done = await run(resumed, Command(resume="yes"), use_async)

    assert [m.text for m in done["messages"][2:]] == [
        "sent to Via Roma 1, Milan",
        "",
        "Remembered home: Via Roma 1, Milan",
        "Sent.",
    ]
    assert [f.content for f in engine.get_facts(giulia)] == ["Via Roma 1, Milan"]
    after = "\n".join(m.text for m in answering.received[1])
    assert "home: Via Roma 1, Milan" in after  # read again after the write


@pytest.mark.asyncio
async def test_a_failed_run_resumed_without_context_tells_the_change_once(
    moved: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    failing = RecordingFakeChatModel(messages=unreachable())
    agent = agent_on(InMemorySaver(), moved, failing)
    with pytest.raises(ConnectionError):
        await run(
            agent,
            {"messages": [("user", "Where do I live?")]},
            use_async,
            context=giulia,
        )

    failing.messages = iter(["In Milan."])
    await run(agent, None, use_async)

    failed, answered = ("\n".join(m.text for m in prompt) for prompt in failing.received)
    assert MOVED in failed and MOVED in answered
    assert moved.get_context(giulia, reader="support-bot").changed == ()


@pytest.mark.asyncio
async def test_a_new_message_without_context_is_not_given_the_threads_identity(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    saver = InMemorySaver()
    agent = agent_on(saver, engine, fake("Hello.", "Hello again."))
    await run(agent, {"messages": [("user", "Hi.")]}, use_async, context=giulia)

    with pytest.raises(InvalidRequest, match="needs the run's identity") as refused:
        await run(agent, {"messages": [("user", "Hi again.")]}, use_async)
    assert refused.value.field == "context"
    # Nor is a run resumed after that one: the thread kept no identity from it.
    with pytest.raises(InvalidRequest, match="needs the run's identity"):
        await run(agent, None, use_async)


@pytest.mark.asyncio
async def test_a_context_given_on_resume_takes_precedence(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    saver = InMemorySaver()
    marco = Identity("acme", "marco", "support-copilot")
    engine.remember(marco, "home-city", "Marco lives in Turin")
    failing = RecordingFakeChatModel(messages=unreachable())
    with pytest.raises(ConnectionError):
        await run(
            agent_on(saver, engine, failing),
            {"messages": [("user", "Where do I live?")]},
            use_async,
            context=giulia,
        )

    answering = fake("In Turin.")
    await run(agent_on(saver, engine, answering), None, use_async, context=marco)

    assert "Marco lives in Turin" in "\n".join(m.text for m in answering.received[0])
    assert CHANGED not in answering.received[0][0].text


@pytest.mark.asyncio
async def test_an_identity_put_in_the_state_on_resume_is_refused(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    skip_async_on_python_3_10(use_async, NO_INTERRUPT)
    saver = InMemorySaver()
    marco = Identity("acme", "marco", "support-copilot")
    engine.remember(marco, "pin", "Marco's PIN is 4321")
    review = HumanInTheLoopMiddleware(interrupt_on={"remember": True})
    model = fake(calls("remember", key="pet", content="has a cat"), "Noted.")
    agent = agent_on(saver, engine, model, middleware=[review])
    await run(agent, {"messages": [("user", "I have a cat.")]}, use_async, context=giulia)
    forged = {"account": "acme", "user": "marco", "agent": "support-copilot"}

    for kept in (forged, {**forged, "seal": "0" * 64}):
        forging = Command(resume=APPROVE.resume, update={"korely_identity": kept})
        with pytest.raises(InvalidRequest, match="seal does not verify") as refused:
            await run(agent_on(saver, engine, model, middleware=[review]), forging, use_async)
        assert refused.value.field == "korely_identity"

    assert [f.key for f in engine.get_facts(marco)] == ["pin"]
    assert engine.get_facts(giulia) == []
    assert all("4321" not in m.text for prompt in model.received for m in prompt)


@pytest.mark.asyncio
async def test_an_identity_kept_for_one_thread_is_refused_in_another(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    skip_async_on_python_3_10(use_async, NO_INTERRUPT)
    saver = InMemorySaver()
    review = HumanInTheLoopMiddleware(interrupt_on={"remember": True})
    model = fake(
        calls("remember", key="pet", content="has a cat"),
        calls("remember", key="pet", content="has a dog"),
        "Noted.",
    )
    agent = agent_on(saver, engine, model, middleware=[review])
    await run(agent, {"messages": [("user", "I have a cat.")]}, use_async, context=giulia)
    sealed = agent.get_state(THREAD).values["korely_identity"]
    other = {"configurable": {"thread_id": "t-2"}}
    marco = Identity("acme", "marco", "support-copilot")
    agent.invoke({"messages": [("user", "I have a dog.")]}, other, context=marco)

    moved = Command(resume=APPROVE.resume, update={"korely_identity": sealed})
    with pytest.raises(InvalidRequest, match="seal does not verify"):
        if use_async:
            await agent.ainvoke(moved, other)
        else:
            agent.invoke(moved, other)
    assert engine.get_facts(giulia) == [] and engine.get_facts(marco) == []
    done = await run(agent, APPROVE, use_async)  # the thread it was kept for resumes
    assert [f.content for f in engine.get_facts(giulia)] == ["has a cat"]
    assert "Remembered pet: has a cat" in [m.text for m in done["messages"]]
