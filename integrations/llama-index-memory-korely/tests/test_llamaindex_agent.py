"""A real FunctionAgent, a real engine and a scripted LLM: what the model sees, what tools write."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.tools import FunctionTool

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemory, KorelyMemoryBlock, korely_tools

# Building a FunctionAgent makes the workflow library inspect pydantic's deprecated attributes.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]

CHANGE_HEADER = "## Changed since you last read"


def memory_text(messages: list[ChatMessage]) -> str:
    """The ``<memory>`` part of what the model received."""
    for message in messages:
        if message.role == "system" and "<memory>" in (message.content or ""):
            return message.content or ""
    return ""


async def run(agent: FunctionAgent, text: str, memory: KorelyMemory) -> str:
    output = await agent.run(user_msg=text, memory=memory)
    return str(output.response.content)


@pytest.fixture
def counted_reads(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the engine built a block and how often Memory read the korely block."""
    counts = {"engine": 0, "block": 0}
    engine_read = engine.aget_context
    block_read = KorelyMemoryBlock.aget

    async def count_engine(*args: Any, **kwargs: Any) -> Any:
        counts["engine"] += 1
        return await engine_read(*args, **kwargs)

    async def count_block(self: KorelyMemoryBlock, *args: Any, **kwargs: Any) -> Any:
        counts["block"] += 1
        return await block_read(self, *args, **kwargs)

    monkeypatch.setattr(engine, "aget_context", count_engine)
    monkeypatch.setattr(KorelyMemoryBlock, "aget", count_block)
    return counts


async def test_fact_remembered_in_one_session_is_shown_in_the_next(engine, giulia, script) -> None:
    first = script.llm(
        script.call("remember", key="home-city", content="Giulia lives in Rome"),
        script.say("Noted."),
    )
    agent = FunctionAgent(
        llm=first, tools=korely_tools(engine, giulia), system_prompt="You help Giulia."
    )
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    assert await run(agent, "I live in Rome.", memory) == "Noted."

    tool_result = first.received[1][-1]
    assert tool_result.role == "tool"
    assert tool_result.content == "Remembered home-city: Giulia lives in Rome"
    [fact] = engine.get_facts(giulia)
    assert (fact.account, fact.owner, fact.agent) == ("acme", "giulia", "support-copilot")
    assert (fact.key, fact.content) == ("home-city", "Giulia lives in Rome")
    for other in (
        Identity("acme", "bob", "support-copilot"),
        Identity("acme", "giulia", "other-agent"),
        Identity("globex", "giulia", "support-copilot"),
        Identity("acme", None, "support-copilot"),
    ):
        assert engine.get_facts(other, include_invalidated=True) == []

    second = script.llm(script.say("You live in Rome."))
    agent = FunctionAgent(
        llm=second, tools=korely_tools(engine, giulia), system_prompt="You help Giulia."
    )
    await run(
        agent, "Where do I live?", KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    )

    shown = memory_text(second.received[0])
    assert "<korely>" in shown
    assert "- home-city: Giulia lives in Rome" in shown


async def test_change_is_shown_once_although_the_block_is_read_three_times(
    engine, giulia, script, counted_reads
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    await run(FunctionAgent(llm=script.llm(script.say("Hello Giulia.")), tools=[]), "Hi", memory)

    # Another agent of the same definition learns of the move.
    engine.correct(giulia, "home-city", "Giulia lives in Milan")

    def lookup_weather(city: str) -> str:
        """The weather in a city."""
        # Meanwhile yet another agent learns something: this change happens after the
        # turn's block was built, so the model must be told of it at its next turn.
        engine.correct(giulia, "home-city", "Giulia lives in Turin")
        return f"Sunny in {city}."

    llm = script.llm(script.call("lookup_weather", city="Milan"), script.say("Sunny in Milan."))
    agent = FunctionAgent(llm=llm, tools=[FunctionTool.from_defaults(lookup_weather)])
    counted_reads.update(engine=0, block=0)
    await run(agent, "What's the weather where I live?", memory)

    assert counted_reads == {
        "engine": 1,
        "block": 3,
    }  # start, after the tool round, after the answer
    for received in llm.received:
        shown = memory_text(received)
        assert CHANGE_HEADER in shown
        assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan" in shown

    later = script.llm(script.say("Noted."), script.say("Noted."))
    agent = FunctionAgent(llm=later, tools=[])
    await run(agent, "Thanks", memory)
    shown = memory_text(later.received[0])
    assert "Giulia lives in Rome" not in shown
    assert "- was: Giulia lives in Milan -> now: Giulia lives in Turin" in shown

    await run(agent, "Thanks again", memory)
    assert CHANGE_HEADER not in memory_text(later.received[1])
    assert "- home-city: Giulia lives in Turin" in memory_text(later.received[1])
