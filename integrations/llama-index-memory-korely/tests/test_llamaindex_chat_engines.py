"""Chat engines read the memory once per turn; their chat store can be erased with the person."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.chat_engine import (
    CondensePlusContextChatEngine,
    ContextChatEngine,
    SimpleChatEngine,
)
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from korely_memory import InvalidRequest, MemoryEngine
from llama_index.memory.korely import (
    KorelyMemory,
    aerase_chat_sessions,
    erase_chat_sessions,
)

NOTICE = "- was: Giulia lives in Rome -> now: Giulia lives in Milan"
LONG_ANSWER = "Here is the next part of the story, told at length. " * 60


class Handbook(BaseRetriever):
    """A retriever that always finds the same page."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text="The office opens at 9."), score=1.0)]


def told_before(engine: MemoryEngine, giulia) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="support-bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")


async def test_a_repeated_continue_after_a_flush_is_a_new_turn(
    engine, giulia, script, engine_reads
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot", token_limit=1200)
    llm = script.llm(*(script.say(LONG_ANSWER) for _ in range(3)))
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    await chat.achat("Tell me a long story.")
    await chat.achat("continue")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    await chat.achat("continue")

    # Each answer is over the history's share: only the latest "continue" is left to read.
    assert [m.content for m in await memory.aget_all()][-1] == LONG_ANSWER
    assert engine_reads == ["Tell me a long story.", "continue", "continue"]
    assert NOTICE in script.text(llm.received[2])


async def test_a_simple_chat_engine_tells_a_change_once(engine, giulia, script) -> None:
    told_before(engine, giulia)
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    llm = script.llm(script.say("In Milan."), script.say("You're welcome."))
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="You help.")
    await chat.achat("Where do I live?")
    await chat.achat("Thanks")
    assert NOTICE in script.text(llm.received[0])
    assert NOTICE not in script.text(llm.received[1])
    assert script.words(llm.received[0][-1]) == "Where do I live?"


def test_a_chat_engine_called_synchronously_tells_a_change_once(engine, giulia, script) -> None:
    told_before(engine, giulia)
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    llm = script.llm(script.say("In Milan."), script.say("You're welcome."))
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    chat.chat("Where do I live?")
    chat.chat("Thanks")
    assert NOTICE in script.text(llm.received[0])
    assert NOTICE not in script.text(llm.received[1])


async def test_a_context_chat_engine_reads_once_per_turn_before_storing_the_question(
    engine, giulia, script, engine_reads
) -> None:
    told_before(engine, giulia)
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    llm = script.llm(script.say("At 9."), script.say("At 9, still."), script.say("Yes."))
    chat = ContextChatEngine.from_defaults(retriever=Handbook(), llm=llm, memory=memory)
    await chat.achat("When does the office open?")
    await chat.achat("When does the office open?")
    await chat.achat("Thanks")
    assert engine_reads == ["When does the office open?"] * 2 + ["Thanks"]
    assert NOTICE in script.text(llm.received[0])
    assert all(NOTICE not in script.text(r) for r in llm.received[1:])
    # The engine adds the question itself: the memory never puts the block in an earlier one.
    for received in llm.received[1:]:
        earlier = [m for m in received[:-1] if m.role == "user"]
        assert all("<korely>" not in (m.content or "") for m in earlier)


async def test_a_condense_plus_context_engine_gets_the_block_in_its_answer(
    engine, giulia, script
) -> None:
    told_before(engine, giulia)
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    llm = script.llm(script.say("At 9."), script.say("Yes."))
    # skip_condense: otherwise LlamaIndex also pastes the memory's messages, block included,
    # into the prompt that rewrites the question (see the README).
    chat = CondensePlusContextChatEngine.from_defaults(
        retriever=Handbook(), llm=llm, memory=memory, skip_condense=True
    )
    await chat.achat("When does the office open?")
    await chat.achat("Thanks")
    assert len(llm.received) == 2
    assert NOTICE in script.text(llm.received[0])
    assert "The office opens at 9." in script.text(llm.received[0])
    assert NOTICE not in script.text(llm.received[1])


# -- erasing the person's words from the chat store --------------------------------------


@pytest.fixture
def chat_store_url(db_url: str, tmp_path: Path) -> str:
    """An async SQLAlchemy URL for LlamaIndex's chat store, on the backend of the engine's."""
    if sa.make_url(db_url).get_backend_name() == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
    return db_url


async def test_erasing_a_persons_sessions_leaves_no_word_of_theirs(
    engine, giulia, script, chat_store_url
) -> None:
    secret = "my passport number is YA4711"
    memories = {}
    for session in ("giulia-1", "giulia-2", "bob-1"):
        memory = KorelyMemory.from_defaults(
            engine, giulia, session_id=session, async_database_uri=chat_store_url
        )
        llm = script.llm(script.say("Noted."))
        await SimpleChatEngine.from_defaults(llm=llm, memory=memory).achat(f"{session}: {secret}")
        memories[session] = memory

    deleted = await aerase_chat_sessions(memories["giulia-1"].sql_store, ["giulia-1", "giulia-2"])
    assert deleted == 4
    report = engine.erase_user("acme", "giulia")
    assert report.pseudonym
    for session, memory in memories.items():
        kept = [m.content for m in await memory.aget_all()]
        assert kept == ([] if session.startswith("giulia") else [f"{session}: {secret}", "Noted."])

    url = sa.make_url(chat_store_url)
    if url.get_backend_name() == "postgresql":
        sync = sa.create_engine(url.set(drivername="postgresql+psycopg"))
        with sync.connect() as conn:
            rows = conn.exec_driver_sql("SELECT key FROM llama_index_memory").scalars().all()
        sync.dispose()
        assert sorted(set(rows)) == ["bob-1"]
    assert erase_chat_sessions(memories["bob-1"].sql_store, "bob-1") == 2


async def test_erasing_sessions_refuses_what_is_no_session_id(engine, giulia) -> None:
    memory = KorelyMemory.from_defaults(engine, giulia, session_id="s1")
    with pytest.raises(InvalidRequest) as refused:
        await aerase_chat_sessions(memory.sql_store, ["s1", ""])
    assert refused.value.field == "session_ids"
