"""Fixtures for the LlamaIndex adapter: a scripted function-calling LLM, identities, no network.

The ``engine`` fixture (a real MemoryEngine on SQLite and on PostgreSQL) comes
from the repository's root conftest.
"""

from __future__ import annotations

import copy
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemoryBlock


class ScriptedLLM(MockFunctionCallingLLM):
    """Answers each call with the next scripted step and keeps what every call received.

    A step that is an exception is raised instead: a provider error.
    """

    _received: list[list[ChatMessage]] = PrivateAttr(default_factory=list)

    def __init__(self, *script: ChatMessage | Exception) -> None:
        # A chat model: chat engines that predict() then send messages, not one prompt string.
        super().__init__(is_chat_model=True)
        steps = list(script)

        def respond(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
            self._received.append(copy.deepcopy(list(messages)))
            if not steps:
                raise AssertionError("the LLM was called more often than scripted")
            step = steps.pop(0)
            if isinstance(step, Exception):
                raise step
            return step

        self.response_generator = respond

    @property
    def received(self) -> list[list[ChatMessage]]:
        """The messages of each call, in order."""
        return self._received


class Script:
    """Builds scripted LLMs, and reads what they received.

    ``script.llm(script.call("remember", key=..., content=...), script.say("Noted."))``
    """

    STABLE_START = "_Standing facts kept between conversations"
    CHANGE_HEADER = "## Changed since you last read"

    @staticmethod
    def llm(*steps: ChatMessage | Exception) -> ScriptedLLM:
        return ScriptedLLM(*steps)

    @staticmethod
    def say(text: str) -> ChatMessage:
        """A final answer."""
        return ChatMessage(role="assistant", content=text)

    @staticmethod
    def call(tool: str, **arguments: Any) -> ChatMessage:
        """A tool call."""
        return ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(
                    tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
                    tool_name=tool,
                    tool_kwargs=arguments,
                )
            ],
        )

    @staticmethod
    def text(messages: Sequence[ChatMessage]) -> str:
        """Every word of a prompt, messages in order: what the model read."""
        return "\n".join(
            block.text for m in messages for block in m.blocks if isinstance(block, TextBlock)
        )

    @staticmethod
    def words(message: ChatMessage) -> str:
        """A message's last text block: the user's own words when the block comes before them."""
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)]
        return texts[-1] if texts else ""


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def bob() -> Identity:
    return Identity(account="acme", user="bob", agent="support-copilot")


@pytest.fixture
def engine_reads(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The query of every block the engine builds for a reader (a read that can tell)."""
    queries: list[str | None] = []
    read = engine.aget_context

    async def counted(who: Identity, query: str | None = None, **kwargs: Any) -> Any:
        if kwargs.get("reader") is not None:
            queries.append(query)
        return await read(who, query, **kwargs)

    monkeypatch.setattr(engine, "aget_context", counted)
    return queries


@pytest.fixture
def block_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per read Memory makes of a korely block in a Memory of your own."""
    reads: list[int] = []
    read = KorelyMemoryBlock.aget

    async def counted(self: KorelyMemoryBlock, *args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return await read(self, *args, **kwargs)

    monkeypatch.setattr(KorelyMemoryBlock, "aget", counted)
    return reads


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def timed_engine(db_url: str, clock: Clock) -> Iterator[MemoryEngine]:
    """An engine on SQLite and on PostgreSQL whose clock the test moves."""
    with MemoryEngine(db_url, clock=clock) as engine:
        yield engine


@pytest.fixture(autouse=True)
async def chat_stores_closed(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Close the database of every LlamaIndex chat store a test opened.

    ``Memory`` opens an in-memory SQLite chat store of its own by default and never
    closes it; its connection would warn when garbage-collected, in a later test.
    """
    opened: list[SQLAlchemyChatStore] = []
    init = SQLAlchemyChatStore.__init__

    def tracked(self: SQLAlchemyChatStore, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(SQLAlchemyChatStore, "__init__", tracked)
    yield
    for store in opened:
        engine = store._async_engine
        if engine is not None:
            await engine.dispose()
