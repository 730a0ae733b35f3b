"""Capture in real chat engines and agents: facts drawn from each finished turn, no tool needed.

Both LLMs are scripted: the chat engine's, and the extractor's (a call of the
engine's schema). The chat engines, ``Memory`` and the engine (SQLite and
PostgreSQL) are the real ones. A slow extraction LLM waits for the test to let
it answer, so every test knows, rather than guesses, what has happened when.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import (
    CondensePlusContextChatEngine,
    ContextChatEngine,
    SimpleChatEngine,
)

from korely_memory import Identity, InvalidRequest, MemoryEngine, NotCurrent
from llama_index.memory.korely import CaptureStats, KorelyMemory, korely_extractor, korely_tools
from llama_index.memory.korely._capturing import Said

from .conftest import Script, ScriptedLLM
from .test_llamaindex_chat_engines import Handbook

ROME = {"action": "record", "key": "home-city", "content": "Giulia lives in Rome"}
MILAN = {"action": "replace", "key": "home-city", "content": "Giulia lives in Milan"}
NOTICE = "- was: Giulia lives in Rome -> now: Giulia lives in Milan"


def operations(*items: dict[str, Any]) -> ChatMessage:
    return Script.call("MemoryOperations", operations=list(items))


def excerpt_of(messages: Sequence[ChatMessage]) -> list[str]:
    """The excerpt lines of an extraction prompt."""
    return Script.text(messages).split("Conversation excerpt:\n", 1)[1].splitlines()


class Gate(ScriptedLLM):
    """An extraction LLM whose answer waits until the test opens the gate."""

    def __init__(self, answer: ChatMessage) -> None:
        super().__init__(answer)
        self._gate = (threading.Event(), threading.Event(), threading.Event())
        respond = self.response_generator

        def held(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
            started, opened, finished = self._gate
            started.set()
            opened.wait(30)
            finished.set()
            return respond(messages, **kwargs)

        self.response_generator = held


@pytest.fixture
def memories(engine: MemoryEngine) -> Iterator[Callable[..., KorelyMemory]]:
    """Makes capturing memories of the engine; each is closed before the engine is."""
    made: list[KorelyMemory] = []

    def make(who: Identity, *extraction: Any, **options: Any) -> KorelyMemory:
        options.setdefault("reader", "support-bot")
        if extraction:
            options["capture"] = korely_extractor(ScriptedLLM(*extraction))
        memory = KorelyMemory.from_defaults(engine, who, **options)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        assert memory.close(timeout=30)


@pytest.mark.parametrize("inline", [False, True], ids=["background", "inline"])
async def test_a_fact_captured_in_one_conversation_is_in_the_block_of_the_next(
    engine: MemoryEngine, giulia: Identity, memories: Any, inline: bool
) -> None:
    first = memories(giulia, operations(ROME), capture_inline=inline, keep_excerpts=True)
    chat = SimpleChatEngine.from_defaults(llm=Script.llm(Script.say("Noted.")), memory=first)
    assert str(await chat.achat("I live in Rome.")) == "Noted."
    assert first.flush(timeout=30)
    assert first.capture_stats == CaptureStats(captured=1)

    llm = Script.llm(Script.say("In Rome."))
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memories(giulia))
    await chat.achat("Where do I live?")
    assert "- home-city: Giulia lives in Rome" in Script.text(llm.received[0])
    (fact,) = engine.get_facts(giulia)
    assert fact.source_memory_id is not None  # read from the excerpt it was captured with
    (kept,) = engine.search_memories(giulia, "")
    assert kept.content == "user: I live in Rome.\n\nassistant: Noted."


@pytest.mark.parametrize("inline", [False, True], ids=["background", "inline"])
async def test_with_hold_for_owner_a_captured_fact_waits_for_the_persons_approval(
    engine: MemoryEngine, giulia: Identity, memories: Any, inline: bool
) -> None:
    first = memories(giulia, operations(ROME), capture_inline=inline, hold_for_owner=True)
    chat = SimpleChatEngine.from_defaults(llm=Script.llm(Script.say("Noted.")), memory=first)
    await chat.achat("I live in Rome.")
    assert first.flush(timeout=30)
    assert first.capture_stats == CaptureStats(captured=1)
    (held,) = engine.pending(giulia)
    assert (held.operation, held.key, held.content) == ("remember", "home-city", ROME["content"])
    assert engine.get_facts(giulia) == [] and engine.search_memories(giulia, "") == []

    llm = Script.llm(Script.say("I do not know."), Script.say("In Rome."))
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memories(giulia))
    await chat.achat("Where do I live?")
    assert "Giulia lives in Rome" not in Script.text(llm.received[0])

    engine.approve(giulia, held.id, reader="support-bot")
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memories(giulia))
    await chat.achat("Where do I live?")
    assert "- home-city: Giulia lives in Rome" in Script.text(llm.received[1])
    assert engine.pending(giulia) == []


async def test_a_held_capture_is_not_approved_over_what_was_written_since(
    engine: MemoryEngine, giulia: Identity, memories: Any
) -> None:
    """An agent captures "Rome", held for Giulia; the CRM then writes Naples. Approving the old
    hold is refused, and the agent's next turns see Naples. Two captures under one key: the
    newer supersedes the older."""
    first = memories(giulia, operations(ROME), capture_inline=True, hold_for_owner=True)
    agent = FunctionAgent(llm=Script.llm(Script.say("Noted.")), tools=[])
    await agent.run(user_msg="I live in Rome.", memory=first)
    (rome,) = engine.pending(giulia)
    naples = engine.remember(giulia, "home-city", "Giulia lives in Naples")  # the CRM

    with pytest.raises(NotCurrent) as refused:
        engine.approve(giulia, rome.id, reader="support-bot")
    assert refused.value.current_fact_id == naples.id
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Naples"]

    milan = {"action": "replace", "key": "home-city", "content": "Giulia lives in Milan"}
    turin = {"action": "replace", "key": "home-city", "content": "Giulia lives in Turin"}
    later = memories(
        giulia, operations(milan), operations(turin), capture_inline=True, hold_for_owner=True
    )
    llm = Script.llm(Script.say("Noted."), Script.say("Noted again."), Script.say("In Naples."))
    agent = FunctionAgent(llm=llm, tools=[])
    await agent.run(user_msg="I moved to Milan.", memory=later)
    await agent.run(user_msg="No, to Turin.", memory=later)
    (turin_held,) = engine.pending(giulia)  # Rome's and Milan's were superseded
    assert (turin_held.content, turin_held.drawn_against) == ("Giulia lives in Turin", naples.id)
    await agent.run(user_msg="Where do I live?", memory=later)
    assert "- home-city: Giulia lives in Naples" in Script.text(llm.received[-1])
    written = engine.approve(giulia, turin_held.id, reader="support-bot")
    assert written is not None and written.content == "Giulia lives in Turin"


async def test_a_correction_is_captured_as_a_replacement_and_told_once_to_other_readers(
    engine: MemoryEngine, giulia: Identity, memories: Any
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="support-bot")
    engine.get_context(giulia, reader="billing-bot")

    capturing = memories(giulia, operations(MILAN))
    chat = SimpleChatEngine.from_defaults(llm=Script.llm(Script.say("Noted.")), memory=capturing)
    await chat.achat("I moved to Milan.")
    assert capturing.flush(timeout=30)
    (prompt,) = capturing._captures._extractor.llm.received  # type: ignore[union-attr]
    assert "- home-city: Giulia lives in Rome" in Script.text(prompt)  # it reused the key
    (old, new) = engine.history(giulia, "home-city")
    assert (old.end_cause, old.replaced_by_id, new.content) == (
        "read_from_memory",
        new.id,
        "Giulia lives in Milan",
    )

    # Another reader is told, once; the reader that captured it is not told its own change.
    llm = Script.llm(Script.say("Milan."), Script.say("Yes."))
    other = memories(giulia, reader="billing-bot")
    chat = CondensePlusContextChatEngine.from_defaults(
        retriever=Handbook(), llm=llm, memory=other, skip_condense=True
    )
    await chat.achat("Where do I live?")
    await chat.achat("Thanks")
    assert NOTICE in Script.text(llm.received[0])
    assert NOTICE not in Script.text(llm.received[1])
    own = Script.llm(Script.say("Milan."))
    await SimpleChatEngine.from_defaults(llm=own, memory=memories(giulia)).achat("Where?")
    assert NOTICE not in Script.text(own.received[0])
    assert "- home-city: Giulia lives in Milan" in Script.text(own.received[0])


async def test_the_excerpt_is_the_turn_without_tool_traffic(
    engine: MemoryEngine, giulia: Identity, memories: Any
) -> None:
    memory = memories(giulia, operations(), capture_inline=True)
    llm = Script.llm(
        Script.call("remember", key="pet", content="Giulia has a cat"),
        Script.say("Noted, a cat."),
    )
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))
    await agent.run("I have a cat.", memory=memory)
    (prompt,) = memory._captures._extractor.llm.received  # type: ignore[union-attr]
    assert excerpt_of(prompt) == ["user: I have a cat.", "assistant: Noted, a cat."]
    assert memory.capture_stats == CaptureStats(captured=1)


async def test_the_turn_does_not_wait_for_a_slow_capture(
    engine: MemoryEngine, giulia: Identity, memories: Any
) -> None:
    gate = Gate(operations(ROME))
    memory = memories(giulia, capture=korely_extractor(gate), capture_delay=0)
    chat = SimpleChatEngine.from_defaults(llm=Script.llm(Script.say("Noted.")), memory=memory)
    started, opened, finished = gate._gate

    assert str(await chat.achat("I live in Rome.")) == "Noted."
    assert started.wait(30)  # the capture is under way...
    assert not finished.is_set()  # ...and the turn has returned without it
    assert memory.capture_stats == CaptureStats(pending=1)
    assert not memory.flush(timeout=0.1)

    opened.set()
    assert memory.flush(timeout=30)
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]
    assert memory.capture_stats == CaptureStats(captured=1)


FAILURES: dict[str, Any] = {
    "the LLM fails": ConnectionError("unreachable"),
    "a malformed answer": Script.say("Keep: Giulia lives in Rome."),
}


@pytest.mark.parametrize("inline", [False, True], ids=["background", "inline"])
@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
def test_a_failed_capture_is_logged_and_counted_never_raised(
    engine: MemoryEngine,
    giulia: Identity,
    memories: Any,
    failure: Any,
    inline: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = memories(giulia, failure, operations(ROME), capture_inline=inline)
    llm = Script.llm(Script.say("Noted."), Script.say("Noted."))
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)

    with caplog.at_level(logging.WARNING):
        assert str(chat.chat("I live in Rome.")) == "Noted."  # the synchronous path
        assert memory.flush(timeout=30)
    assert memory.capture_stats == CaptureStats(failed=1)
    (logged,) = [r for r in caplog.records if "could not capture" in r.getMessage()]
    unreachable = isinstance(failure, Exception)
    assert bool(logged.exc_info) == unreachable  # a malformed answer says what is wrong
    assert engine.get_facts(giulia) == [] and engine.search_memories(giulia, "") == []

    # Nothing was kept of the failed capture: the next turn captures both.
    chat.chat("Yes, Rome.")
    assert memory.flush(timeout=30)
    assert memory.capture_stats == CaptureStats(captured=1, failed=1)
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]


async def test_a_later_turn_of_the_conversation_takes_over_the_waiting_capture(
    engine: MemoryEngine, giulia: Identity, memories: Any
) -> None:
    memory = memories(giulia, operations(ROME), capture_delay=60)
    llm = Script.llm(Script.say("Hello!"), Script.say("Noted."))
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    await chat.achat("Hi.")
    await chat.achat("I live in Rome.")
    assert memory.capture_stats == CaptureStats(superseded=1, pending=1)
    assert engine.get_facts(giulia) == []  # nothing runs before its time...

    assert memory.flush(timeout=30)  # ...unless asked to
    (prompt,) = memory._captures._extractor.llm.received  # type: ignore[union-attr]
    assert excerpt_of(prompt) == [
        "user: Hi.",
        "assistant: Hello!",
        "user: I live in Rome.",
        "assistant: Noted.",
    ]
    assert memory.capture_stats == CaptureStats(captured=1, superseded=1)


def test_close_finishes_the_waiting_capture_and_stops_capturing(
    engine: MemoryEngine, giulia: Identity
) -> None:
    extractor = korely_extractor(ScriptedLLM(operations(ROME)))
    llm = Script.llm(Script.say("Noted."), Script.say("You live in Rome."))
    with KorelyMemory.from_defaults(
        engine, giulia, reader="support-bot", capture=extractor, capture_delay=60
    ) as memory:
        chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
        chat.chat("I live in Rome.")
        assert memory.capture_stats.pending == 1
    # Leaving the block closed it: the waiting capture ran at once.
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]

    chat.chat("Where do I live?")
    assert "- home-city: Giulia lives in Rome" in Script.text(llm.received[1])  # still read
    assert memory.capture_stats == CaptureStats(captured=1, dropped=1)
    assert memory.close() and memory.flush(timeout=0)


def test_without_capture_there_is_nothing_to_count_or_wait_for(
    engine: MemoryEngine, giulia: Identity
) -> None:
    memory = KorelyMemory.from_defaults(engine, giulia)
    SimpleChatEngine.from_defaults(llm=Script.llm(Script.say("Hi!")), memory=memory).chat("Hi.")
    assert memory.capture_stats == CaptureStats()
    assert memory.flush(timeout=0) and memory.close()
    assert engine.search_memories(giulia, "") == []


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"capture": "gpt-4o-mini"}, "capture"),
        ({"capture_inline": True}, "capture_inline"),
        ({"capture": lambda m, f: [], "capture_inline": "yes"}, "capture_inline"),
        ({"capture": lambda m, f: [], "capture_delay": -1}, "capture_delay"),
        ({"max_facts": -1}, "max_facts"),
        ({"capture": lambda m, f: [], "hold_for_owner": 1}, "hold_for_owner"),
        ({"hold_for_owner": True}, "hold_for_owner"),
        (
            {"capture": lambda m, f: [], "hold_for_owner": True, "keep_excerpts": True},
            "hold_for_owner",
        ),
    ],
    ids=[
        "not an extractor",
        "inline without capture",
        "inline not a flag",
        "delay",
        "ceiling",
        "hold not a flag",
        "hold without capture",
        "hold with excerpts",
    ],
)
def test_bad_capture_options_are_refused_by_name(
    engine: MemoryEngine, giulia: Identity, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        KorelyMemory.from_defaults(engine, giulia, **options)
    assert refused.value.field == field


@pytest.mark.parametrize("engine_kind", ["context", "simple"])
async def test_a_turn_with_an_empty_response_is_captured_with_the_persons_words(
    engine: MemoryEngine, giulia: Identity, memories: Any, engine_kind: str
) -> None:
    pet = {"action": "record", "key": "pet", "content": "Giulia has a cat"}
    memory = memories(giulia, operations(ROME), operations(pet), capture_inline=True)
    llm = Script.llm(Script.say(""), Script.say("Noted."))
    if engine_kind == "context":
        chat: Any = ContextChatEngine.from_defaults(retriever=Handbook(), llm=llm, memory=memory)
    else:
        chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    empty = str(await chat.achat("I live in Rome."))
    assert empty == ("Empty Response" if engine_kind == "context" else "")
    assert memory.capture_stats == CaptureStats(captured=1)
    assert str(await chat.achat("And I have a cat.")) == "Noted."
    assert memory.capture_stats == CaptureStats(captured=2)
    first, second = memory._captures._extractor.llm.received  # type: ignore[union-attr]
    # The empty answer is left out; the next turn's excerpt holds only its own words.
    assert excerpt_of(first) == ["user: I live in Rome."]
    assert excerpt_of(second) == ["user: And I have a cat.", "assistant: Noted."]
    assert sorted(f.key for f in engine.get_facts(giulia)) == ["home-city", "pet"]


def test_an_empty_answer_stored_again_finishes_its_turn_once() -> None:
    said = Said()
    question = ChatMessage(role="user", content="I moved to Oslo, remember that")
    empty = ChatMessage(role="assistant", content="Empty Response")
    assert said.stored([question, empty]) == [(0, (("user", question.content),), False)]
    assert said.stored([empty]) == []
