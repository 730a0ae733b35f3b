"""The `"notes"` placement once the message of an earlier note is gone.

A note shows a fact once, as a line with its key; later notes tell its changes as
`was -> now` lines, which name no key. When the message holding the note with the key
leaves the prompt (`RemoveMessage`, a summary), the fact comes back as a line with its key,
in the next note, however it changed meanwhile: the model can still `correct` or `forget` it.
Real agents with a checkpointer and a scripted model; the changes are made by someone else.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain.agents.middleware import SummarizationMiddleware, before_model
from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver

from korely_memory import Identity, MemoryEngine

from ._agents import ScriptedChatModel, agent_with, scripted

_FRAME = re.compile(r"<memory>\n(.*?)\n</memory>", re.DOTALL)
KEYED = re.compile(r"^- home-city: (.*) \(since \d{4}-\d\d-\d\d\)$", re.MULTILINE)


def frames(prompt: list[BaseMessage]) -> list[str]:
    """The `<memory>` sections of a prompt's messages, in order."""
    return [f for m in prompt if m.type != "system" for f in _FRAME.findall(m.text)]


def keyed(prompt: list[BaseMessage]) -> list[str]:
    """What the prompt's notes say under the key `home-city`, on lines that name it."""
    return [said for frame in frames(prompt) for said in KEYED.findall(frame)]


def removing(before_turns: set[int], keep: int = 1) -> Any:
    """A middleware that, at the start of the turns named (1 is the first), removes every
    message but the last `keep` (the turn's own, and those just before it) with
    `RemoveMessage`."""
    turns = {"n": 0}

    @before_model
    def remove(state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        if messages[-1].type != "human":
            return None  # a model call after a tool call: the same turn
        turns["n"] += 1
        if turns["n"] not in before_turns:
            return None
        return {"messages": [RemoveMessage(id=m.id) for m in messages[:-keep]]}

    return remove


def corrected_by_someone_else(engine: MemoryEngine, who: Identity, content: str) -> None:
    engine.correct(who, "home-city", content, reader="crm-sync")


def test_a_change_after_the_note_with_the_key_was_removed_shows_the_fact_again(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    model = ScriptedChatModel(replies=["One.", "Two.", "Three."])
    agent = agent_with(
        model, engine, placement="notes", checkpointer=InMemorySaver(),
        middleware=[removing({2})],
    )  # fmt: skip
    config = {"configurable": {"thread_id": "removed-then-changed"}}
    agent.invoke({"messages": [("user", "Where do I live?")]}, config=config, context=giulia)
    corrected_by_someone_else(engine, giulia, "Giulia lives in Turin")
    for said in ("Did anything change?", "Thanks."):
        agent.invoke({"messages": [("user", said)]}, config=config, context=giulia)

    first, second, third = model.received
    assert keyed(first) == ["Giulia lives in Milan"]
    assert "Where do I live?" not in "\n".join(m.text for m in second)  # turn 1 was removed
    assert len(frames(second)) == 1  # its note with it
    assert "- was: Giulia lives in Milan -> now: Giulia lives in Turin" in frames(second)[0]
    assert keyed(second) == ["Giulia lives in Turin"]  # the change, and the fact under its key
    assert keyed(third) == ["Giulia lives in Turin"]  # kept in its note, not shown again
    assert "\n".join(frames(third)).count("Turin") == 2


def test_a_fact_whose_key_left_with_an_older_note_is_shown_again(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """Turn 2's note tells the change (the key is in turn 1's note); turn 1 is then removed:
    turn 2's note is still there, with the change but no key, so turn 3 shows the fact."""
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    model = ScriptedChatModel(replies=["One.", "Two.", "Three."])
    agent = agent_with(
        model, engine, placement="notes", checkpointer=InMemorySaver(),
        middleware=[removing({3}, keep=3)],
    )  # fmt: skip
    config = {"configurable": {"thread_id": "key-left"}}
    agent.invoke({"messages": [("user", "Where do I live?")]}, config=config, context=giulia)
    corrected_by_someone_else(engine, giulia, "Giulia lives in Turin")
    for said in ("Did anything change?", "And now?"):
        agent.invoke({"messages": [("user", said)]}, config=config, context=giulia)

    first, second, third = model.received
    assert keyed(first) == ["Giulia lives in Milan"]
    assert keyed(second) == ["Giulia lives in Milan"]  # turn 1's note, put back
    assert "-> now: Giulia lives in Turin" in frames(second)[-1]
    assert "Turin" not in "\n".join(keyed(second))  # the key is in the prompt: the change alone
    assert "Where do I live?" not in "\n".join(m.text for m in third)  # turn 1 was removed
    assert "-> now: Giulia lives in Turin" in frames(third)[0]  # turn 2's note, put back
    assert keyed(third) == ["Giulia lives in Turin"]


def test_each_change_after_the_key_left_names_the_key(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """Two changes by someone else, each told after the note holding the key was removed."""
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    model = ScriptedChatModel(replies=["One.", "Two.", "Three."])
    agent = agent_with(
        model, engine, placement="notes", checkpointer=InMemorySaver(),
        middleware=[removing({2, 3})],
    )  # fmt: skip
    config = {"configurable": {"thread_id": "twice"}}
    agent.invoke({"messages": [("user", "Where do I live?")]}, config=config, context=giulia)
    corrected_by_someone_else(engine, giulia, "Giulia lives in Turin")
    agent.invoke({"messages": [("user", "Anything new?")]}, config=config, context=giulia)
    corrected_by_someone_else(engine, giulia, "Giulia lives in Naples")
    agent.invoke({"messages": [("user", "And now?")]}, config=config, context=giulia)

    assert keyed(model.received[1]) == ["Giulia lives in Turin"]
    third = model.received[2]
    assert "-> now: Giulia lives in Naples" in frames(third)[0]
    assert keyed(third) == ["Giulia lives in Naples"]


def test_while_the_key_stays_in_the_prompt_a_change_is_told_without_the_fact_again(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """Nothing removed: the change's line alone, the fact's key being in turn 1's note."""
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    model = ScriptedChatModel(replies=["One.", "Two."])
    agent = agent_with(model, engine, placement="notes", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "kept"}}
    agent.invoke({"messages": [("user", "Where do I live?")]}, config=config, context=giulia)
    corrected_by_someone_else(engine, giulia, "Giulia lives in Turin")
    agent.invoke({"messages": [("user", "Anything new?")]}, config=config, context=giulia)

    second = model.received[1]
    assert keyed(second) == ["Giulia lives in Milan"]
    assert "-> now: Giulia lives in Turin" in frames(second)[-1]


def test_a_summary_that_replaced_the_note_with_the_key_brings_the_fact_back(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    model = ScriptedChatModel(replies=["One.", "Two.", "Three."])
    summarizer = SummarizationMiddleware(
        scripted("Giulia asked where she lives."), trigger=("messages", 4), keep=("messages", 1)
    )
    agent = agent_with(
        model, engine, placement="notes", checkpointer=InMemorySaver(), middleware=[summarizer]
    )
    config = {"configurable": {"thread_id": "summarised"}}
    agent.invoke({"messages": [("user", "Where do I live?")]}, config=config, context=giulia)
    agent.invoke({"messages": [("user", "Thanks.")]}, config=config, context=giulia)
    corrected_by_someone_else(engine, giulia, "Giulia lives in Turin")
    agent.invoke({"messages": [("user", "Anything new?")]}, config=config, context=giulia)

    third = model.received[2]
    text = "\n".join(m.text for m in third)
    assert "Giulia asked where she lives." in text  # the history was summarised...
    assert "Where do I live?" not in text
    assert "-> now: Giulia lives in Turin" in frames(third)[-1]  # ...the change is told...
    assert keyed(third) == ["Giulia lives in Turin"]  # ...and the fact is there with its key


@pytest.mark.asyncio
async def test_the_async_run_shows_the_fact_again_too(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    model = ScriptedChatModel(replies=["One.", "Two."])
    agent = agent_with(
        model, engine, placement="notes", checkpointer=InMemorySaver(),
        middleware=[removing({2})],
    )  # fmt: skip
    config = {"configurable": {"thread_id": "async"}}
    await agent.ainvoke({"messages": [("user", "Where?")]}, config=config, context=giulia)
    corrected_by_someone_else(engine, giulia, "Giulia lives in Turin")
    await agent.ainvoke({"messages": [("user", "New?")]}, config=config, context=giulia)
    assert keyed(model.received[1]) == ["Giulia lives in Turin"]


def test_without_a_reader_a_fact_whose_key_left_is_shown_again(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """No reader: the notes tell the change themselves (from the version turn 1 showed); once
    turn 1 is removed, the fact comes back under its key."""
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    model = ScriptedChatModel(replies=["One.", "Two.", "Three."])
    agent = agent_with(
        model, engine, placement="notes", checkpointer=InMemorySaver(), reader=None,
        middleware=[removing({3}, keep=3)],
    )  # fmt: skip
    config = {"configurable": {"thread_id": "no-reader"}}
    agent.invoke({"messages": [("user", "Where do I live?")]}, config=config, context=giulia)
    corrected_by_someone_else(engine, giulia, "Giulia lives in Turin")
    for said in ("Where do I live now?", "And now?"):
        agent.invoke({"messages": [("user", said)]}, config=config, context=giulia)

    first, second, third = model.received
    assert keyed(first) == keyed(second) == ["Giulia lives in Milan"]
    assert "-> now: Giulia lives in Turin" in frames(second)[-1]
    assert "Where do I live?" not in "\n".join(m.text for m in third)
    assert keyed(third) == ["Giulia lives in Turin"]
