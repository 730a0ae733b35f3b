"""Fixtures for the LlamaIndex adapter: a scripted function-calling LLM, an identity, no network.

The ``engine`` fixture (a real MemoryEngine on SQLite and on PostgreSQL) comes
from the repository's root conftest.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.mock import MockFunctionCallingLLM

from korely_memory import Identity


class ScriptedLLM(MockFunctionCallingLLM):
    """Answers each call with the next scripted message and keeps what every call received."""

    _received: list[list[ChatMessage]] = PrivateAttr(default_factory=list)

    def __init__(self, *script: ChatMessage) -> None:
        super().__init__()
        replies = list(script)

        def respond(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
            self._received.append(copy.deepcopy(list(messages)))
            if not replies:
                raise AssertionError("the LLM was called more often than scripted")
            return replies.pop(0)

        self.response_generator = respond

    @property
    def received(self) -> list[list[ChatMessage]]:
        """The messages of each call, in order."""
        return self._received


class Script:
    """Builds scripted LLMs.

    ``script.llm(script.call("remember", key=..., content=...), script.say("Noted."))``
    """

    @staticmethod
    def llm(*steps: ChatMessage) -> ScriptedLLM:
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


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def giulia() -> Identity:
    return Identity(account="acme", user="giulia", agent="support-copilot")
