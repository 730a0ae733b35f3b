"""The block on its own: what it returns, when it reads the engine, what it keeps."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import ValidationError
from llama_index.core.storage.chat_store.sql import MessageStatus

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemory, KorelyMemoryBlock


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


@pytest.fixture
def engine_reads(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The query of every block the engine builds."""
    queries: list[str | None] = []
    read = engine.aget_context

    async def counted(who: Identity, query: str | None = None, **kwargs: Any) -> Any:
        queries.append(query)
        return await read(who, query, **kwargs)

    monkeypatch.setattr(engine, "aget_context", counted)
    return queries


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
    block = KorelyMemoryBlock(engine=engine, identity=giulia)
    await block.aget([user("Hi"), assistant("Hello"), user("Thanks")], session_id="s1")
    # Memory flushed its oldest messages when the answer was stored.
    await block.aget([user("Thanks"), assistant("You're welcome")], session_id="s1")
    assert engine_reads == ["Thanks"]


async def test_turns_are_kept_per_chat_session(engine, giulia, engine_reads) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia)
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
    assert "user: Our northern warehouse moved to Bergamo last spring." in shown.memories[0].content
    assert "Remembered under" not in shown.memories[0].content
