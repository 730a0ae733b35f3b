"""A real FunctionAgent, a real engine and a scripted LLM: what the model sees, when it is read."""

from __future__ import annotations

import warnings

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context
from workflows.context.state_store import UnserializableKeyWarning

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemory, KorelyMemoryBlock, korely_tools

# Building a FunctionAgent makes the workflow library inspect pydantic's deprecated attributes.
NOTICE = "- was: Giulia lives in Rome -> now: Giulia lives in Milan"


async def run(agent: FunctionAgent, text: str, memory: KorelyMemory) -> str:
    output = await agent.run(user_msg=text, memory=memory)
    return str(output.response.content)


@pytest.mark.parametrize("placement", ["system", "context", "notes"])
async def test_fact_remembered_in_one_session_is_shown_in_the_next(
    engine, giulia, script, placement
) -> None:
    first = script.llm(
        script.call("remember", key="home-city", content="Giulia lives in Rome"),
        script.say("Noted."),
    )
    agent = FunctionAgent(llm=first, tools=korely_tools(engine), system_prompt="You help Giulia.")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot", placement=placement)
    assert await run(agent, "I live in Rome.", memory) == "Noted."

    tool_result = first.received[1][-1]
    assert (tool_result.role, tool_result.content) == (
        "tool",
        "Remembered home-city: Giulia lives in Rome",
    )
    [fact] = engine.get_facts(giulia)
    assert (fact.account, fact.owner, fact.agent) == ("acme", "giulia", "support-copilot")
    for other in (
        Identity("acme", "bob", "support-copilot"),
        Identity("acme", "giulia", "other-agent"),
        Identity("globex", "giulia", "support-copilot"),
        Identity("acme", None, "support-copilot"),
    ):
        assert engine.get_facts(other, include_invalidated=True) == []

    second = script.llm(script.say("You live in Rome."))
    agent = FunctionAgent(llm=second, tools=korely_tools(engine), system_prompt="You help Giulia.")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot", placement=placement)
    await run(agent, "Where do I live?", memory)

    prompt = second.received[0]
    assert [m.role for m in prompt][:2] == ["system", "system"]
    assert prompt[0].content == "You help Giulia."
    assert script.STABLE_START in (prompt[1].content or "")
    assert "home-city" not in (prompt[1].content or "")  # the note alone: the same every time
    carrier = prompt[-1] if placement != "system" else prompt[2]
    assert carrier.role == ("user" if placement != "system" else "system")
    assert "<memory>\n<korely>" in (carrier.content or "")
    assert "- home-city: Giulia lives in Rome" in (carrier.content or "")
    assert script.words(prompt[-1]) == "Where do I live?"


async def test_change_is_told_once_although_memory_is_read_three_times(
    engine, giulia, script, engine_reads
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
    engine_reads.clear()
    await run(agent, "What's the weather where I live?", memory)

    # The memory is read at the start, after the tool round and after the answer: one engine read.
    assert engine_reads == ["What's the weather where I live?"]
    for received in llm.received:
        assert script.CHANGE_HEADER in script.text(received)
        assert NOTICE in script.text(received)

    later = script.llm(script.say("Noted."), script.say("Noted."))
    agent = FunctionAgent(llm=later, tools=[])
    await run(agent, "Thanks", memory)
    shown = script.text(later.received[0])
    assert "Giulia lives in Rome" not in shown
    assert "- was: Giulia lives in Milan -> now: Giulia lives in Turin" in shown

    await run(agent, "Thanks again", memory)
    assert script.CHANGE_HEADER not in script.text(later.received[1])
    assert "- home-city: Giulia lives in Turin" in script.text(later.received[1])


async def test_the_block_is_never_stored_in_the_chat_history(engine, giulia, script) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    for placement in ("system", "context"):
        memory = KorelyMemory.from_defaults(
            engine, giulia, reader="support-bot", placement=placement
        )
        llm = script.llm(script.say("In Rome."), script.say("You're welcome."))
        agent = FunctionAgent(llm=llm, tools=[])
        await run(agent, "Where do I live?", memory)
        await run(agent, "Thanks", memory)
        assert "<korely>" in script.text(llm.received[1])
        stored = await memory.aget_all()
        assert [(m.role, m.content) for m in stored] == [
            ("user", "Where do I live?"),
            ("assistant", "In Rome."),
            ("user", "Thanks"),
            ("assistant", "You're welcome."),
        ]


async def test_the_same_memory_on_every_run_is_what_the_agent_reads(engine, giulia, script) -> None:
    """``FunctionAgent(memory=...)`` is not a field of the agent: the run's ``memory=`` is."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    llm = script.llm(script.say("Hi."), script.say("Hi."))
    agent = FunctionAgent(llm=llm, tools=[], memory=memory)  # silently ignored by LlamaIndex
    await agent.run(user_msg="Hello")
    assert "Giulia" not in script.text(llm.received[0])
    await agent.run(user_msg="Hello", memory=memory)
    assert "Giulia lives in Rome" in script.text(llm.received[1])


async def test_an_unanswered_turn_told_again_when_the_run_is_retried(
    engine: MemoryEngine, giulia, script
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    await run(FunctionAgent(llm=script.llm(script.say("Hi.")), tools=[]), "Hi", memory)
    engine.correct(giulia, "home-city", "Giulia lives in Milan")

    failing = script.llm(RuntimeError("the provider is overloaded"))
    with pytest.raises(RuntimeError, match="overloaded"):
        await run(FunctionAgent(llm=failing, tools=[]), "Where do I live?", memory)
    assert NOTICE in script.text(failing.received[0])

    retry = script.llm(script.say("In Milan."), script.say("Noted."))
    agent = FunctionAgent(llm=retry, tools=[])
    await run(agent, "Where do I live?", memory)
    assert NOTICE in script.text(retry.received[0])
    await run(agent, "Thanks", memory)
    assert NOTICE not in script.text(retry.received[1])
    assert engine.get_context(giulia, reader="support-bot").changed == ()


async def test_a_model_that_fails_leaves_the_change_for_the_next_conversation(
    timed_engine: MemoryEngine, giulia, script, clock
) -> None:
    engine = timed_engine
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="support-bot")
    clock.advance(minutes=1)
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    failing = script.llm(TimeoutError("no answer"))
    with pytest.raises(TimeoutError):
        await run(FunctionAgent(llm=failing, tools=[]), "Hi", memory)
    assert NOTICE in script.text(failing.received[0])

    # The user gave up; another conversation, once the failed read's hold ran out, is told.
    clock.advance(minutes=11)
    later = script.llm(script.say("Noted."))
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    await run(FunctionAgent(llm=later, tools=[]), "Hi again", memory)
    assert NOTICE in script.text(later.received[0])


async def test_two_system_messages_and_the_users_words_last(engine, giulia, script) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    llm = script.llm(script.say("Hi."))
    agent = FunctionAgent(llm=llm, tools=[], system_prompt="You help Giulia.")
    await run(agent, "Hello", KorelyMemory.from_defaults(engine, giulia, reader="support-bot"))
    roles = [m.role for m in llm.received[0]]
    assert roles == ["system", "system", "user"]
    last: ChatMessage = llm.received[0][-1]
    assert script.words(last) == "Hello"


@pytest.mark.parametrize("stock", [False, True], ids=["korely", "stock-memory"])
async def test_a_reused_context_keeps_no_memory_each_run_takes_its_own(
    engine, giulia, bob, script, stock
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(bob, "home-city", "Bob lives in Lyon")
    llm = script.llm(
        script.say("Hello Giulia."),
        script.say("Hello Bob."),
        script.call("remember", key="pet", content="has a cat"),
        script.say("Hm."),
    )
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))
    ctx = Context(agent)

    def memory_of(who: Identity) -> Memory:
        if stock:
            return Memory.from_defaults(
                memory_blocks=[KorelyMemoryBlock(engine=engine, identity=who)]
            )
        return KorelyMemory.from_defaults(engine, who)

    first, second = memory_of(giulia), memory_of(bob)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", UnserializableKeyWarning)
        await agent.run(user_msg="Hi, I am Giulia.", memory=first, ctx=ctx)
        await agent.run(user_msg="Hi, I am Bob.", memory=second, ctx=ctx)
    # The workflow keeps its Context without the memory between runs, and says so.
    assert any("unserializable key: memory" in str(w.message) for w in warned)
    # The second run read and stored into the memory it was given, not the first run's.
    assert "Bob lives in Lyon" in script.text(llm.received[1])
    assert "Giulia" not in script.text(llm.received[1])
    assert [m.content for m in await first.aget_all()] == ["Hi, I am Giulia.", "Hello Giulia."]
    assert [m.content for m in await second.aget_all()] == ["Hi, I am Bob.", "Hello Bob."]

    # Without memory=, the same Context gives the run a fresh memory: no block, no person.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnserializableKeyWarning)
        await agent.run(user_msg="I have a cat.", ctx=ctx)
    assert "lives in" not in script.text(llm.received[2])
    assert [m.content for m in llm.received[3] if m.role == "tool"] == [
        "Not saved: this conversation has no memory of a person to write to, so nothing was "
        "written."
    ]
    assert len(await first.aget_all()) == len(await second.aget_all()) == 2
