"""Where the block goes in a model call's prompt: `"system"` or `"context"`.

`"system"`: the whole block after the agent's own system prompt.

`"context"`: the system prompt stays the same on every call (the agent's own,
then the block's stable note and one sentence saying where the rest is), and
the part that changes (notices, facts, memories) goes into the latest user
message, in a `<memory>` section before the user's words. Everything before
that message is then the same prefix from one call to the next, which is what
a provider's prompt cache keeps.

The volatile part goes into the user's message, not into a message of its own,
because that is the one form every provider takes: LangChain's Anthropic and
Gemini integrations refuse a system message after the first one, and a message
of its own would put two user messages in a row, which several chat templates
refuse. The copy of the message exists for the call only; the conversation
history keeps the user's words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import HumanMessage, SystemMessage

from korely_memory import ContextBlock

Placement = Literal["system", "context"]
PLACEMENTS: tuple[Placement, ...] = ("system", "context")

POINTER = (
    "_When there are any, they come in a <memory> section at the start of the user's latest "
    "message: the application adds it there, the user did not write it._"
)
OPEN, CLOSE = "<memory>", "</memory>"


def with_block(
    request: ModelRequest[Any],
    block: ContextBlock,
    placement: Placement,
    cache_marker: Mapping[str, Any] | None,
) -> ModelRequest[Any]:
    """`request` with `block` placed in its prompt."""
    messages = list(request.messages)
    latest = latest_user_message(messages)
    if placement == "system" or latest is None:
        note, rest = block.stable, block.volatile
        if placement == "context":  # no user message to carry the rest: it stays with the note
            note = f"{block.stable}\n{POINTER}"
        system = _system(request.system_message, note, rest, cache_marker)
        return request.override(system_message=system)
    note = f"{block.stable}\n{POINTER}"
    system = _system(request.system_message, note, "", cache_marker)
    if block.volatile:
        messages[latest] = _framed(messages[latest], block.volatile)
    return request.override(system_message=system, messages=messages)


def volatile_frame(volatile: str) -> str:
    """The `<memory>` section that carries the volatile part in a user message."""
    return f"{OPEN}\n{volatile}\n{CLOSE}"


def latest_user_message(messages: Sequence[Any]) -> int | None:
    """Where the latest message the user wrote is (a summary of the history is not one)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and not _summary(message):
            return index
    return None


def _summary(message: HumanMessage) -> bool:
    # SummarizationMiddleware puts its summary in a HumanMessage marked so.
    return message.additional_kwargs.get("lc_source") == "summarization"


def _framed(message: Any, volatile: str) -> Any:
    frame = volatile_frame(volatile)
    content = message.content
    framed: str | list[str | dict[Any, Any]]
    if isinstance(content, str):
        framed = f"{frame}\n\n{content}" if content else frame
    else:
        framed = [{"type": "text", "text": frame}, *content]
    return message.model_copy(update={"content": framed})


def _system(
    system: SystemMessage | None,
    note: str,
    rest: str,
    cache_marker: Mapping[str, Any] | None,
) -> SystemMessage:
    """The agent's system message, its own content first and where it was, then ours."""
    content: Any = system.content if system is not None else ""
    if cache_marker is None and isinstance(content, str):
        added = f"{note}\n\n{rest}" if rest else note
        merged: Any = f"{content}\n\n{added}" if content else added
    else:
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [*content]
        if blocks == [{"type": "text", "text": ""}]:
            blocks = []
        if cache_marker is None:
            blocks.append({"type": "text", "text": f"{note}\n\n{rest}" if rest else note})
        else:
            blocks.append({"type": "text", "text": note, **cache_marker})
            if rest:
                blocks.append({"type": "text", "text": rest})
        merged = blocks
    if system is None:
        return SystemMessage(content=merged)
    return system.model_copy(update={"content": merged})
