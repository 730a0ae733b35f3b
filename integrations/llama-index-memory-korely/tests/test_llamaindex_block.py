"""The block on its own: what it returns, when it reads the engine, what it keeps."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import ValidationError
from llama_index.core.memory import InsertMethod
from llama_index.core.storage.chat_store.base_db import MessageStatus

from korely_memory import Identity, InvalidRequest
from korely_memory.limits import MAX_MEMORY
from llama_index.memory.korely import KorelyMemory, KorelyMemoryBlock


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


async def test_block_is_the_engine_text_without_a_frame(engine, giulia) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    block = KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")
    text = await block.aget([user("Where do I live?")])
    assert text == engine.get_context(giulia, "Where do I live?").text
    assert "<" not in text


async def test_nothing_to_show_is_an_empty_block(engine, giulia) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia)
    assert await block.aget([user("Hi")]) == ""
    memory = KorelyMemory.from_defaults(engine, giulia)
    await memory.aput(user("Hi"))
    assert [m.role for m in await memory.aget()] == ["user"]


async def test_first_message_over_the_token_limit_with_nothing_to_show(engine, giulia) -> None:
    # A new user: the block is empty, so Memory leaves it out and, over its limit,
    # asks the block to truncate what it does not hold (an empty list).
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot", token_limit=1200)
    question = "summarise the region " * 500
    assert engine.count_tokens(question) > 1200
    await memory.aput(user(question))
    messages = await memory.aget()
    assert [(m.role, m.content) for m in messages] == [("user", question)]


@pytest.mark.parametrize("content", ["", [], None])
async def test_truncating_an_empty_block_leaves_nothing(engine, giulia, content) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia)
    assert await block.atruncate(content, 10) is None


async def test_identity_cannot_be_rebound(engine, giulia) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia)
    with pytest.raises(ValidationError):
        block.identity = Identity(account="acme", user="bob", agent="support-copilot")
    assert block.identity == giulia


async def test_copy_for_another_identity_never_serves_the_first_ones_text(engine, giulia) -> None:
    bob = Identity(account="acme", user="bob", agent="support-copilot")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(bob, "home-city", "Bob lives in Paris")
    block = KorelyMemoryBlock(engine=engine, identity=giulia)
    assert "Giulia lives in Rome" in await block.aget([user("Hi")], session_id="s1")

    # A copy shares the block's private state, its served turns included.
    for_bob = block.model_copy(update={"identity": bob})
    shown = await for_bob.aget([user("Hi")], session_id="s1")
    assert "Bob lives in Paris" in shown
    assert "Giulia" not in shown


async def test_one_engine_read_per_user_turn(engine, giulia, engine_reads) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")
    history: list[ChatMessage] = []

    async def turn(text: str, answer: str) -> None:
        history.append(user(text))
        await block.aget(history, session_id="s1")  # start of the run
        await block.aget(
            [*history, user(text)], session_id="s1"
        )  # after a tool round, with the input again
        history.append(assistant(answer))
        await block.aget(history, session_id="s1")  # after the final answer

    await turn("Hi", "Hello")
    await turn("Where do I live?", "In Rome")
    await turn("yes", "ok")
    await turn("yes", "ok")  # the same words again are a new turn
    assert engine_reads == ["Hi", "Where do I live?", "yes", "yes"]


async def test_flushed_history_does_not_start_a_new_turn(engine, giulia, engine_reads) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")
    await block.aget([user("Hi"), assistant("Hello"), user("Thanks")], session_id="s1")
    # Memory flushed its oldest messages when the answer was stored.
    await block.aget([user("Thanks"), assistant("You're welcome")], session_id="s1")
    assert engine_reads == ["Thanks"]


async def test_turns_are_kept_per_chat_session(engine, giulia, engine_reads) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")
    await block.aget([user("Hi")], session_id="a")
    await block.aget([user("Hi")], session_id="b")
    await block.aget([user("Hi"), assistant("Hello")], session_id="a")
    await block.aget([user("Hi"), assistant("Hello")], session_id="b")
    assert engine_reads == ["Hi", "Hi"]


async def test_flushed_messages_are_kept_as_memories_only_when_asked(engine, giulia) -> None:
    chat = [
        user("Our northern warehouse moved to Bergamo last spring."),
        assistant("Thanks, I will keep that in mind."),
        ChatMessage(role="tool", content="Remembered under 'warehouse'."),
    ]
    for keep in (False, True):
        memory = KorelyMemory.from_defaults(
            engine, giulia, keep_flushed=keep, token_limit=400, token_flush_size=10
        )
        for _ in range(30):
            await memory.aput_messages(chat)
        assert len(await memory.aget_all(status=MessageStatus.ARCHIVED)) > 0
        shown = engine.get_context(giulia, "Where is the northern warehouse?")
        if not keep:
            assert shown.memories == ()
    assert shown.memories
    assert shown.memories[0].content == (
        "user: Our northern warehouse moved to Bergamo last spring.\n\n"
        "assistant: Thanks, I will keep that in mind."
    )


async def test_each_flushed_turn_is_a_memory_of_its_own(engine, giulia, script) -> None:
    """What was said in the third of four flushed turns still reaches the model."""
    filler = "Let me tell you about the northern region and its many offices. " * 40
    memory = KorelyMemory.from_defaults(
        engine, giulia, reader="support-bot", keep_flushed=True, token_limit=2000
    )
    turns = [
        (f"{filler} First part.", "Noted the first part."),
        (f"{filler} Second part.", "Noted the second part."),
        ("The door code of the Bergamo warehouse is 4711.", "Noted the door code."),
        (f"{filler} Fourth part.", "Noted the fourth part."),
        (f"{filler} Fifth part.", "Noted the fifth part."),
    ]
    for said, answer in turns:
        await memory.aput_messages([user(said), assistant(answer)])
    archived = await memory.aget_all(status=MessageStatus.ARCHIVED)
    assert "4711" in script.text(archived)

    kept = engine.search_memories(giulia, "door code Bergamo warehouse", limit=10)
    door = [m.content for m in kept if "4711" in m.content]
    assert door == [
        "user: The door code of the Bergamo warehouse is 4711.\n\nassistant: Noted the door code."
    ]
    assert all(len(m.content) <= MAX_MEMORY for m in kept)

    await memory.aput(user("What is the door code of the Bergamo warehouse?"))
    assert "4711" in script.text(await memory.aget())


async def test_a_turn_longer_than_a_memory_is_split_not_cut(engine, giulia) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia, accept_short_term_memory=True)
    said = " ".join(f"tea{i} tea" for i in range(4000))  # about 40,000 characters
    await block.aput([user(said), assistant("ok tea")], from_short_term_memory=True)
    kept = sorted(engine.search_memories(giulia, "tea", limit=10), key=lambda m: m.id)
    assert len(kept) == 3 and all(len(m.content) <= MAX_MEMORY for m in kept)
    assert all(m.content.startswith("user: ") for m in kept)  # each piece says who spoke
    joined = " ".join(m.content.removeprefix("user: ") for m in kept)
    assert joined == f"{said}\n\nassistant: ok tea"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"identity": Identity("acme", "giulia", "")}, "agent"),
        ({"identity": Identity("acme", "gi/ulia", "a")}, "user"),
        ({"identity": "giulia"}, "who"),
        ({"reader": "support/bot"}, "reader"),
        ({"reader": ""}, "reader"),
        ({"token_budget": 10}, "token_budget"),
        ({"changes": ["renamed"]}, "changes"),
        ({"hold": -5}, "hold"),
        ({"placement": "top"}, "placement"),
        ({"block_name": "korely><system"}, "name"),
        ({"insert_method": InsertMethod.USER}, "insert_method"),
        ({"token_limit": 100}, "token_limit"),
        ({"token_limit": 1000, "token_budget": 800}, "token_budget"),
    ],
)
def test_a_memory_that_would_fail_at_its_first_read_is_refused_when_built(
    engine, giulia, arguments, field
) -> None:
    options = dict(arguments)
    who = options.pop("identity", giulia)
    with pytest.raises(InvalidRequest) as refused:
        KorelyMemory.from_defaults(engine, who, **options)
    assert refused.value.field == field


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"identity": Identity("acme", "giulia", "a\nb")}, "agent"),
        ({"reader": "x" * 300}, "reader"),
        ({"changes": "some"}, "changes"),
        ({"hold": "ten minutes"}, "hold"),
        ({"name": "<korely>"}, "name"),
        ({"engine": "sqlite://"}, "engine"),
    ],
)
def test_a_block_that_would_fail_at_its_first_read_is_refused_when_built(
    engine, giulia, arguments, field
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        KorelyMemoryBlock(**{"engine": engine, "identity": giulia, **arguments})
    assert refused.value.field == field
