"""Many conversations at once on one chat store database: forty FunctionAgents, each its own
KorelyMemory, started together on one SQLite file and on one PostgreSQL schema. LlamaIndex's
own store fails there: each memory creates the table at once, and SQLite's writers wait five
seconds at most."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.memory import Memory

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemory, SharedChatStore

CONVERSATIONS = 40
TURNS = 3


@pytest.fixture
def chat_store_uri(db_url: str, tmp_path: Path) -> str:
    """An async URI for LlamaIndex's chat store on the test's database: a SQLite file of its
    own, or the test's PostgreSQL schema (dropped afterwards, as a schema with a table the
    engine did not make is)."""
    if db_url.startswith("sqlite"):
        return f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
    return db_url  # postgresql+psycopg, which is async too


async def test_forty_conversations_start_together_on_one_chat_store(
    engine: MemoryEngine, script: Any, chat_store_uri: str
) -> None:
    uri = chat_store_uri
    people = [Identity("acme", f"user-{i}", "support-copilot") for i in range(CONVERSATIONS)]
    for person in people:
        engine.remember(person, "name", f"{person.user} is the person's name")

    async def converse(person: Identity) -> list[str]:
        memory = KorelyMemory.from_defaults(
            engine, person, reader="support-bot", session_id=person.user,
            async_database_uri=uri,
        )  # fmt: skip
        assert isinstance(memory.sql_store, SharedChatStore)
        llm = script.llm(*(script.say(f"answer {t}") for t in range(TURNS)))
        agent = FunctionAgent(llm=llm, tools=[])
        answers = []
        for turn in range(TURNS):
            output = await agent.run(user_msg=f"question {turn}", memory=memory)
            answers.append(str(output.response.content))
        # What each prompt carried was this person's block, and their own history.
        last = script.text(llm.received[-1])
        assert f"{person.user} is the person's name" in last
        assert "question 1" in last and "answer 1" in last
        history = await memory.aget_all()
        assert [m.content for m in history] == [
            text for t in range(TURNS) for text in (f"question {t}", f"answer {t}")
        ]
        await memory.sql_store._async_engine.dispose()  # type: ignore[union-attr]
        return answers

    results = await asyncio.gather(*(converse(p) for p in people), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert failures == [], failures[:3]
    assert all(r == [f"answer {t}" for t in range(TURNS)] for r in results)


def test_a_chat_store_given_is_used_as_it_is(engine: MemoryEngine, giulia: Identity) -> None:
    store = SharedChatStore("my_table")
    memory = KorelyMemory.from_defaults(engine, giulia, chat_store=store)
    assert memory.sql_store is store
    plain = Memory.from_defaults()
    mine = KorelyMemory.from_defaults(engine, giulia, table_name="conversations")
    assert type(plain.sql_store).__name__ == "SQLAlchemyChatStore"
    assert isinstance(mine.sql_store, SharedChatStore)
    assert mine.sql_store.table_name == "conversations"
