"""Where the parts of a block go in the messages a ``KorelyMemory`` returns.

The block's stable note (the same words in every block) goes at the start of
the system message, so that it sits in the cached prefix of every prompt. The
rest of the block (notices, facts, memories: what changes with the question)
goes, by ``placement``:

- ``"system"``: into a system message of its own, right after the first one,
  before the chat history;
- ``"context"``: into the latest user message, as a text block before the
  user's words, after the history: everything before it stays the same from one
  call to the next. A user message is the one kind of message every LLM
  integration passes on where it stands: a system message in the middle of the
  conversation is not (LlamaIndex's Anthropic integration lifts every system
  message's text into its one system prompt), and a user message of its own
  would make two user messages in a row, which not every provider takes.
  When the user's message is not among the messages yet (``ContextChatEngine``
  and ``CondensePlusContextChatEngine`` read before they store it, and add it
  themselves), the part goes where ``"system"`` puts it.

Both parts are framed like any ``Memory`` block (``<memory><korely>``), and
neither is ever stored in the chat history: each read makes them anew.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.base.llms.types import (
    CacheControl,
    CachePoint,
    ChatMessage,
    ContentBlock,
    MessageRole,
    TextBlock,
)
from llama_index.core.prompts import RichPromptTemplate

from ._budget import frame
from ._turns import last_user_index

PLACEMENTS = ("system", "context")


@dataclass(frozen=True)
class Parts:
    """A block's text, framed for the places it goes."""

    stable: list[ContentBlock]
    volatile: list[TextBlock]
    carrier: TextBlock | None
    """The text block that carries the volatile part, for recognising it in an LLM call."""


def framed(
    template: RichPromptTemplate,
    name: str,
    stable: str,
    volatile: str,
    cache_control: CacheControl | None,
) -> Parts:
    """The block's two parts, each framed by ``template``; a cache point after the note."""
    stable_blocks: list[ContentBlock] = list(frame(template, name, stable))
    if cache_control is not None:
        stable_blocks.append(CachePoint(cache_control=cache_control))
    volatile_blocks = frame(template, name, volatile)
    carrier = next((b for b in volatile_blocks if volatile in b.text), None)
    return Parts(stable_blocks, volatile_blocks, carrier)


def place(messages: list[ChatMessage], parts: Parts, *, in_user_message: bool) -> list[ChatMessage]:
    """``messages`` with the block's parts in place; the messages given are not changed.

    Args:
        messages: The chat history, with what other blocks added.
        parts: The framed parts.
        in_user_message: Put the volatile part into the latest user message (``"context"``
            when that message is the turn's own).
    """
    result = list(messages)
    system = next((i for i, m in enumerate(result) if m.role == MessageRole.SYSTEM), None)
    if system is None:
        result.insert(0, ChatMessage(role=MessageRole.SYSTEM, blocks=list(parts.stable)))
        system = 0
    else:
        result[system] = _with_blocks(result[system], [*parts.stable, *result[system].blocks])
    user = last_user_index(result) if in_user_message else None
    if user is not None:
        result[user] = _with_blocks(result[user], [*parts.volatile, *result[user].blocks])
    else:
        result.insert(system + 1, ChatMessage(role=MessageRole.SYSTEM, blocks=parts.volatile))
    return result


def _with_blocks(message: ChatMessage, blocks: list[ContentBlock]) -> ChatMessage:
    # A copy: the message may be one another block or the chat store still holds.
    return message.model_copy(update={"blocks": blocks})
