"""The block reaches the model and nothing else: no stream mode, no event, no checkpoint.

The facts are recorded straight into the engine with words that appear nowhere
in the conversation, so any of those words in a stream, an event or a
checkpoint could only have come from the block.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from korely_memory import Identity, MemoryEngine
from langchain_korely._events import HIDDEN

from ._agents import (
    ASYNC_RUNS_LOSE_THE_CONFIG,
    NO_INTERRUPT,
    NO_MODEL_CALLBACKS,
    agent_with,
    calls,
    scripted,
)

SECRETS = ("Zanzibarville", "Quokkaloo")
STREAM_MODES = ["values", "updates", "debug", "checkpoints", "tasks", "messages", "custom"]


def seeded(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Zanzibarville")
    engine.add_memory(giulia, "Giulia named her cat Quokkaloo")


def agent_for(engine: MemoryEngine, placement: str, saver: InMemorySaver) -> tuple[Any, Any]:
    # Each run calls a tool, so the tool node and a second model call are in every stream.
    model = scripted(calls("remember", key="team", content="Giulia works in billing"), "Noted.")
    return agent_with(model, engine, placement=placement, checkpointer=saver), model


def given(model: Any) -> list[str]:
    """What the model was given, call by call."""
    return ["\n".join(m.text for m in prompt) for prompt in model.received]


def leaks(something: Any) -> list[str]:
    text = repr(something)
    return [secret for secret in SECRETS if secret in text]


def everything_checkpointed(saver: InMemorySaver) -> list[Any]:
    return [(c.checkpoint, c.metadata, c.pending_writes) for c in saver.list(None)]


@pytest.mark.parametrize("mode", STREAM_MODES)
def test_no_stream_mode_carries_the_block(
    sqlite_url: str, giulia: Identity, placement: str, mode: str
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        seeded(engine, giulia)
        saver = InMemorySaver()
        agent, model = agent_for(engine, placement, saver)
        config = {"configurable": {"thread_id": "t-1"}}
        chunks = list(
            agent.stream(
                {"messages": [("user", "What do you know?")]},
                config=config,
                context=giulia,
                stream_mode=mode,
            )
        )
        assert chunks or mode == "custom"  # nothing writes to the custom stream
        assert leaks(chunks) == []
        assert all(SECRETS[0] in prompt for prompt in given(model))
        assert leaks(everything_checkpointed(saver)) == []
        assert leaks(agent.get_state(config)) == []


@pytest.mark.asyncio
async def test_no_async_stream_mode_carries_the_block(
    sqlite_url: str, giulia: Identity, placement: str
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        seeded(engine, giulia)
        saver = InMemorySaver()
        agent, _ = agent_for(engine, placement, saver)
        config = {"configurable": {"thread_id": "t-1"}}
        chunks = [
            chunk
            async for chunk in agent.astream(
                {"messages": [("user", "What do you know?")]},
                config=config,
                context=giulia,
                stream_mode=STREAM_MODES,
            )
        ]
        assert {mode for mode, _ in chunks} >= {"values", "updates", "debug", "messages"}
        assert leaks(chunks) == []
        assert leaks(everything_checkpointed(saver)) == []


@pytest.mark.skipif(ASYNC_RUNS_LOSE_THE_CONFIG, reason=f"Python 3.10: {NO_MODEL_CALLBACKS}")
@pytest.mark.asyncio
async def test_no_event_carries_the_block_yet_the_model_had_it(
    sqlite_url: str, giulia: Identity, placement: str
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        seeded(engine, giulia)
        saver = InMemorySaver()
        agent, model = agent_for(engine, placement, saver)
        events = [
            event
            async for event in agent.astream_events(
                {"messages": [("user", "What do you know?")]},
                config={"configurable": {"thread_id": "t-1"}},
                context=giulia,
                version="v2",
            )
        ]
        starts = [e for e in events if e["event"] == "on_chat_model_start"]
        assert len(starts) == 2
        assert all(HIDDEN in repr(start["data"]) for start in starts)
        assert any(e["event"] == "on_chat_model_stream" for e in events)
        assert leaks(events) == []
        assert leaks(everything_checkpointed(saver)) == []

        assert all(SECRETS[0] in prompt for prompt in given(model))


@pytest.mark.skipif(ASYNC_RUNS_LOSE_THE_CONFIG, reason=f"Python 3.10: {NO_INTERRUPT}")
@pytest.mark.asyncio
async def test_an_interrupted_run_keeps_the_block_out_of_the_checkpoint(
    sqlite_url: str, giulia: Identity, placement: str
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        seeded(engine, giulia)
        saver = InMemorySaver()
        model = scripted(calls("remember", key="team", content="Giulia works in billing"), "Noted.")
        agent = agent_with(
            model,
            engine,
            placement=placement,
            checkpointer=saver,
            middleware=[HumanInTheLoopMiddleware(interrupt_on={"remember": True})],
        )
        config = {"configurable": {"thread_id": "t-1"}}
        paused = await agent.ainvoke(
            {"messages": [("user", "Keep this.")]}, config=config, context=giulia
        )
        assert "__interrupt__" in paused
        assert leaks(paused) == []
        assert leaks(everything_checkpointed(saver)) == []
        done = await agent.ainvoke(
            Command(resume={"decisions": [{"type": "approve"}]}), config=config, context=giulia
        )
        assert leaks(done) == []
        assert leaks(everything_checkpointed(saver)) == []
        assert all(SECRETS[0] in prompt for prompt in given(model))


def test_invoke_returns_only_the_conversation(sqlite_url: str, giulia: Identity) -> None:
    with MemoryEngine(sqlite_url) as engine:
        seeded(engine, giulia)
        agent, _ = agent_for(engine, "context", InMemorySaver())
        result = agent.invoke(
            {"messages": [("user", "Hi")]},
            config={"configurable": {"thread_id": "t-1"}},
            context=giulia,
        )
        assert set(result) == {"messages"}
        assert leaks(result) == []
