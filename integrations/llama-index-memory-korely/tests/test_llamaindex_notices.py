"""Notices are spent only when a model answered with them in its prompt."""

from __future__ import annotations

import asyncio

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory, StaticMemoryBlock

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemory, KorelyMemoryBlock

NOTICE = "- was: Giulia lives in Rome -> now: Giulia lives in Milan"


def moved(engine: MemoryEngine, who: Identity, clock) -> None:
    """Giulia's home city was read by support-bot, then corrected by another agent."""
    engine.remember(who, "home-city", "Giulia lives in Rome")
    engine.get_context(who, reader="support-bot")
    clock.advance(minutes=1)
    engine.correct(who, "home-city", "Giulia lives in Milan")


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


async def test_an_answer_to_a_prompt_without_the_block_spends_nothing(
    timed_engine, giulia, script, clock
) -> None:
    moved(timed_engine, giulia, clock)
    memory = KorelyMemory.from_defaults(timed_engine, giulia, reader="support-bot")
    await memory.aput(user("Where do I live?"))
    assert NOTICE in script.text(await memory.aget())
    # The application answers from a prompt of its own, without the memory.
    llm = script.llm(script.say("I don't know."))
    answer = (await llm.achat([user("Where do I live?")])).message
    await memory.aput(answer)

    clock.advance(minutes=11)  # the read's hold runs out: the change waits for the next read
    assert [
        c.now.content
        for c in timed_engine.get_context(giulia, reader="support-bot").changed
        if c.now
    ] == ["Giulia lives in Milan"]


async def test_the_answer_that_carried_the_block_spends_it(
    timed_engine, giulia, script, clock
) -> None:
    moved(timed_engine, giulia, clock)
    memory = KorelyMemory.from_defaults(timed_engine, giulia, reader="support-bot")
    await memory.aput(user("Where do I live?"))
    llm = script.llm(script.say("In Milan."))
    answer = (await llm.achat(await memory.aget())).message
    await memory.aput(answer)
    clock.advance(minutes=11)
    assert timed_engine.get_context(giulia, reader="support-bot").changed == ()


async def test_a_stream_given_up_before_its_end_spends_nothing(
    timed_engine, giulia, script, clock
) -> None:
    moved(timed_engine, giulia, clock)
    memory = KorelyMemory.from_defaults(timed_engine, giulia, reader="support-bot")
    await memory.aput(user("Where do I live?"))
    llm = script.llm(script.say("You live in Milan, as you told me."))
    stream = await llm.astream_chat(await memory.aget())
    async for _ in stream:
        break  # the user closed the page
    await stream.aclose()
    clock.advance(minutes=11)
    assert len(timed_engine.get_context(giulia, reader="support-bot").changed) == 1


async def test_showing_a_resumed_session_spends_no_notice(
    timed_engine, giulia, script, clock, tmp_path
) -> None:
    moved(timed_engine, giulia, clock)
    chat_store = f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
    earlier = KorelyMemory.from_defaults(
        timed_engine,
        giulia,
        reader="support-bot",
        session_id="conversation-7",
        async_database_uri=chat_store,
    )
    await earlier.aset([user("Hi"), assistant("Hello Giulia.")])

    # Next day, another process shows the conversation before Giulia writes again.
    resumed = KorelyMemory.from_defaults(
        timed_engine,
        giulia,
        reader="support-bot",
        session_id="conversation-7",
        async_database_uri=chat_store,
    )
    shown = await resumed.aget_all()  # the stored messages only: nothing is read
    assert [m.content for m in shown] == ["Hi", "Hello Giulia."]
    with_memory = script.text(await resumed.aget())  # facts, but no notice and nothing held
    assert "- home-city: Giulia lives in Milan" in with_memory
    assert script.CHANGE_HEADER not in with_memory

    llm = script.llm(script.say("In Milan."))
    await FunctionAgent(llm=llm, tools=[]).run(user_msg="Where do I live?", memory=resumed)
    assert NOTICE in script.text(llm.received[0])


async def test_two_conversations_at_once_tell_a_change_once(engine, giulia, script) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="support-bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    llms = [script.llm(script.say("Hi.")) for _ in range(6)]

    async def converse(llm) -> None:
        memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
        await FunctionAgent(llm=llm, tools=[]).run(user_msg="Hi", memory=memory)

    await asyncio.gather(*(converse(llm) for llm in llms))
    told = [NOTICE in script.text(llm.received[0]) for llm in llms]
    assert told.count(True) == 1, told
    assert engine.get_context(giulia, reader="support-bot").changed == ()


async def test_other_blocks_that_take_the_room_leave_the_changes_waiting(
    timed_engine, giulia, script, clock
) -> None:
    """In a KorelyMemory, the block gets what the history and the other blocks leave."""
    engine = timed_engine
    for i in range(3):
        engine.remember(giulia, f"site-{i}", f"Giulia's site number {i} is in Rome")
    engine.get_context(giulia, reader="support-bot")
    clock.advance(minutes=1)
    for i in range(3):
        clock.advance(seconds=1)
        engine.correct(giulia, f"site-{i}", f"Giulia's site number {i} moved to Milan")
    instructions = StaticMemoryBlock(
        name="instructions", static_content="Answer in French. " * 150, priority=0
    )
    memory = KorelyMemory.from_defaults(
        engine, giulia, reader="support-bot", token_limit=1200, memory_blocks=[instructions]
    )
    told: list[str] = []
    for turn in range(4):
        llm = script.llm(script.say("D'accord."))
        await FunctionAgent(llm=llm, tools=[]).run(user_msg=f"Question {turn}", memory=memory)
        prompt = llm.received[0]
        told += [line for line in script.text(prompt).splitlines() if line.startswith("- was:")]
        assert sum(len(memory.tokenizer_fn(script.text([m]))) for m in prompt) <= 1200
    assert sorted(told) == sorted(
        f"- was: Giulia's site number {i} is in Rome -> now: Giulia's site number {i} moved to "
        f"Milan ({clock.now:%Y-%m-%d}, corrected)"
        for i in range(3)
    )


async def test_a_block_memory_truncates_keeps_the_changes_it_cut_for_later(
    timed_engine, giulia, script, clock
) -> None:
    """In a Memory of your own, Memory cuts the block to fit; what it cut is not spent."""
    engine = timed_engine
    for i in range(3):
        engine.remember(giulia, f"site-{i}", f"Giulia's site number {i} is in Rome")
    engine.get_context(giulia, reader="support-bot")
    clock.advance(minutes=1)
    for i in range(3):
        clock.advance(seconds=1)
        engine.correct(giulia, f"site-{i}", f"Giulia's site number {i} moved to Milan")
    block = KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")
    instructions = StaticMemoryBlock(
        name="instructions", static_content="Answer in French. " * 220, priority=0
    )
    memory = Memory.from_defaults(
        token_limit=1000, memory_blocks=[block, instructions], tokenizer_fn=block._tokenizer()
    )
    llm = script.llm(script.say("D'accord."))
    await FunctionAgent(llm=llm, tools=[]).run(user_msg="Where are my sites?", memory=memory)
    first = [
        line for line in script.text(llm.received[0]).splitlines() if line.startswith("- was:")
    ]
    assert 0 < len(first) < 3

    clock.advance(minutes=11)  # what Memory cut was held, not spent: it is told again
    later = engine.get_context(giulia, reader="support-bot", token_budget=2000)
    assert len(later.changed) == 3 - len(first)


async def test_an_account_fact_change_is_told_once_per_reader_name(
    timed_engine, script, clock
) -> None:
    """Anna's and Ben's conversations read the account's hours; they change. Under one reader
    name, the first conversation to read is told and the next sees the new hours without a
    notice; under a name per person, both are told."""
    engine = timed_engine
    engine.grant_admin("acme", "root")
    root = Identity("acme", "root", "support-copilot")
    anna = Identity("acme", "anna", "support-copilot")
    ben = Identity("acme", "ben", "support-copilot")
    engine.confirm(root, engine.remember(anna, "hours", "The shop opens at 9", scope="account").id)

    def reader(person: Identity, per_person: bool) -> str:
        return f"support-bot:{person.user}" if per_person else "support-bot"

    async def converse(person: Identity, per_person: bool) -> str:
        llm = script.llm(script.say("Noted."))
        memory = KorelyMemory.from_defaults(engine, person, reader=reader(person, per_person))
        await FunctionAgent(llm=llm, tools=[]).run(user_msg="When do you open?", memory=memory)
        return script.text(llm.received[0])

    for per_person in (False, True):
        for person in (anna, ben):
            assert "The shop opens at" in await converse(person, per_person)
        clock.advance(minutes=1)
        earlier = "9" if not per_person else "8"
        later = "8" if not per_person else "7"
        proposal = engine.remember(ben, "hours", f"The shop opens at {later}", scope="account")
        engine.confirm(root, proposal.id)
        clock.advance(minutes=1)
        notice = f"- was: The shop opens at {earlier} -> now: The shop opens at {later}"
        told = [notice in await converse(person, per_person) for person in (anna, ben)]
        assert told == ([True, False] if not per_person else [True, True])
        # Ben reads what holds now either way.
        assert f"The shop opens at {later}" in await converse(ben, per_person)
