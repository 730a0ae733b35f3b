"""What the adapter's tests share: a scripted chat model, and a few words to drive an agent.

Only the model is scripted; the agent (`create_agent`), the graph, the
checkpointer, the tools and the engine are the real ones.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from korely_memory import MemoryEngine
from langchain_korely import KorelyMiddleware

PROMPT = "You are Acme's support agent."

ASYNC_RUNS_LOSE_THE_CONFIG = sys.version_info < (3, 11)
"""Python 3.10: asyncio tasks take no context, so an async LangGraph run does not carry its config
(a context variable) into its nodes, and what reads it from there finds none."""
NO_INTERRUPT = (
    "LangGraph's interrupt() reads the run's config from a context variable, which an async run "
    "does not carry before Python 3.11: a middleware hook that interrupts (LangChain's own "
    "HumanInTheLoopMiddleware too) raises 'Called get_config outside of a runnable context' "
    "under ainvoke (langchain-ai/langchain#34974)"
)
NO_MODEL_CALLBACKS = (
    "create_agent calls the model without the run's config, which an async run does not carry "
    "before Python 3.11: the model call gets none of the run's callbacks, so astream_events has "
    "no on_chat_model_* event and stream_mode='messages' no chunk of the model's"
)
NO_CONFIG_IN_MODEL_HOOK = (
    "LangChain calls a middleware's model hook without the run's config, which an async run does "
    "not carry before Python 3.11: a resolver reading run.config gets InvalidRequest there"
)


def skip_async_on_python_3_10(use_async: bool, reason: str) -> None:
    """Skip a test's ainvoke variant on Python 3.10, for a limitation of LangChain or LangGraph."""
    if use_async and ASYNC_RUNS_LOSE_THE_CONFIG:
        pytest.skip(f"Python 3.10: {reason}")


CHANGED = "## Changed since you last read"

Reply = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]


class ScriptedChatModel(BaseChatModel):
    """Answers from a script, one reply per call, and records every prompt it receives.

    A reply may be a function of the prompt. Streaming (`astream_events`,
    `stream_mode="messages"`) gets the reply as one chunk, tool calls included.
    """

    replies: list[Any] = Field(default_factory=list)
    received: list[list[BaseMessage]] = Field(default_factory=list)
    failures: int = 0
    """How many calls fail, with a connection error, before the script is followed."""
    bound: list[Any] = Field(default_factory=list)
    """The tools offered to the model, each time they were bound."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        self.bound.append(list(tools))
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        self.received.append(list(messages))
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the model is unreachable")
        reply = self.replies.pop(0) if self.replies else "OK."
        if callable(reply):
            reply = reply(messages)
        return AIMessage(content=reply) if isinstance(reply, str) else reply

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages)
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=reply.content,
                tool_call_chunks=[
                    {
                        "name": call["name"],
                        "args": json.dumps(call["args"]),
                        "id": call["id"],
                        "index": index,
                        "type": "tool_call_chunk",
                    }
                    for index, call in enumerate(reply.tool_calls)
                ],
            )
        )

    @property
    def system_prompts(self) -> list[str]:
        """The system message of each call so far, as text."""
        return [m[0].text if isinstance(m[0], SystemMessage) else "" for m in self.received]

    @property
    def prompts(self) -> list[str]:
        """Each call's whole prompt as one text."""
        return [prompt_text(m) for m in self.received]


class RecordingFakeChatModel(GenericFakeChatModel):
    """LangChain's `GenericFakeChatModel` (its replies from `messages`), keeping every prompt.

    It takes any tools offered (`GenericFakeChatModel` binds none), as a model with tool
    calling would; its replies may call them.
    """

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingFakeChatModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def fake(*replies: AIMessage | str) -> RecordingFakeChatModel:
    return RecordingFakeChatModel(messages=iter(replies))


def scripted(*replies: Reply) -> ScriptedChatModel:
    return ScriptedChatModel(replies=list(replies))


def calls(name: str, **args: Any) -> AIMessage:
    """A model reply that calls one tool."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}])


def operations(*found: dict[str, Any]) -> AIMessage:
    """A structured answer to the extraction prompt: the call of the `MemoryOperations` schema."""
    call = {"name": "MemoryOperations", "args": {"operations": list(found)}, "id": "call-ops"}
    return AIMessage(content="", tool_calls=[call])


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(f"[{m.type}] {m.text}" for m in messages)


def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def tool_replies(result: dict[str, Any]) -> list[str]:
    return [m.text for m in tool_messages(result)]


def user_messages(result: dict[str, Any]) -> list[str]:
    return [m.text for m in result["messages"] if isinstance(m, HumanMessage)]


async def ask(agent: Any, text: str, who: Any, use_async: bool, **config: Any) -> dict[str, Any]:
    """One user turn, in a fresh conversation unless `config` names a thread."""
    state = {"messages": [("user", text)]}
    if use_async:
        return await agent.ainvoke(state, config=config or None, context=who)  # type: ignore[no-any-return]
    return agent.invoke(state, config=config or None, context=who)  # type: ignore[no-any-return]


async def resume(agent: Any, command: Any, who: Any, use_async: bool, **config: Any) -> Any:
    if use_async:
        return await agent.ainvoke(command, config=config, context=who)
    return agent.invoke(command, config=config, context=who)


def agent_with(
    model: ScriptedChatModel,
    engine: MemoryEngine,
    *,
    middleware: Sequence[Any] = (),
    **options: Any,
) -> Any:
    """A real agent with the scripted model, our middleware (then any other) and the prompt."""
    options.setdefault("reader", "support-bot")
    checkpointer = options.pop("checkpointer", None)
    system_prompt = options.pop("system_prompt", PROMPT)
    return create_agent(
        model,
        system_prompt=system_prompt,
        middleware=[KorelyMiddleware(engine, **options), *middleware],
        checkpointer=checkpointer,
    )
