"""Where the parts of a block go in the messages a ``KorelyMemory`` returns.

The block's stable note (the same words in every block) goes at the start of
the system message, so that it sits in the cached prefix of every prompt. The
rest of the block (notices, facts, memories: what changes with the question)
goes, by ``placement``:

- ``"system"``: its notices and facts into a system message of its own, right
  after the first one, before the chat history; its memories, what people said
  in earlier conversations, into the latest user message as in ``"context"``:
  quoted speech never goes into a system message;
- ``"notes"``: as ``"context"``, but what goes into the latest user message is
  a note holding only what the conversation had not been shown (the engine
  keeps it, read with ``conversation=`` the memory's session), and each earlier
  turn's note goes back at the start of its own user message, byte for byte;
- ``"context"``: into the latest user message, as a text block before the
  user's words, after the history: everything before it stays the same from one
  call to the next. A user message is the one kind of message every LLM
  integration passes on where it stands: a system message in the middle of the
  conversation is not (LlamaIndex's Anthropic integration lifts every system
  message's text into its one system prompt), and a user message of its own
  would make two user messages in a row, which not every provider takes.
  When the user's message is not among the messages yet (``ContextChatEngine``
  and ``CondensePlusContextChatEngine`` read before they store it, and add it
  themselves), the notices and facts go where ``"system"`` puts them, and the
  memories are left out.

What the user wrote and what tools returned is passed through
``korely_memory.framing.neutralise`` in the copy the LLM gets, so that nothing
in it can open, close or imitate the block's frame.

Both parts are framed like any ``Memory`` block (``<memory><korely>``), and
neither is ever stored in the chat history: each read makes them anew.
"""

from __future__ import annotations

from collections.abc import Sequence
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

from korely_memory import ContextBlock, framing

from ._budget import frame
from ._turns import last_user_index

PLACEMENTS = ("system", "context", "notes")


@dataclass(frozen=True)
class Parts:
    """A block's text, framed for the places it goes."""

    stable: list[ContentBlock]
    """The note, at the start of the system message."""
    system: list[TextBlock]
    """Framed text for a system message of its own after the first: changes and facts."""
    user: list[TextBlock]
    """Framed text for the start of the latest user message."""
    needle: str
    """The text that carries the block's changes: an answered call with it told them."""
    carrier: TextBlock | None
    """The text block that carries ``needle``, for recognising it in an LLM call."""


def framed(
    template: RichPromptTemplate,
    name: str,
    block: ContextBlock,
    cache_control: CacheControl | None,
    *,
    placement: str,
    user_message: bool,
) -> Parts:
    """The block's parts, each framed by ``template``; a cache point after the note.

    ``user_message``: the latest user message is the turn's own, and may carry a part.
    Memories (quoted speech) go only into it: without it they are left out.
    """
    stable_blocks: list[ContentBlock] = list(frame(template, name, block.stable))
    if cache_control is not None:
        stable_blocks.append(CachePoint(cache_control=cache_control))
    facts, memories = block.facts_text, block.memories_text
    if not user_message:
        system_text, user_text = facts, ""
    elif placement in ("context", "notes"):
        system_text, user_text = "", block.volatile
    else:
        system_text, user_text = facts, memories
    system_blocks = frame(template, name, system_text) if system_text else []
    user_blocks = frame(template, name, user_text) if user_text else []
    needle = facts or user_text
    carrier = next((b for b in [*system_blocks, *user_blocks] if needle and needle in b.text), None)
    return Parts(stable_blocks, system_blocks, user_blocks, needle, carrier)


def place(messages: list[ChatMessage], parts: Parts) -> list[ChatMessage]:
    """``messages`` with the block's parts in place; the messages given are not changed.

    Args:
        messages: The chat history, with what other blocks added.
        parts: The framed parts.
    """
    result = list(messages)
    system = next((i for i, m in enumerate(result) if m.role == MessageRole.SYSTEM), None)
    if system is None:
        result.insert(0, ChatMessage(role=MessageRole.SYSTEM, blocks=list(parts.stable)))
        system = 0
    else:
        result[system] = _with_blocks(result[system], [*parts.stable, *result[system].blocks])
    user = last_user_index(result) if parts.user else None
    if user is not None:
        result[user] = _with_blocks(result[user], [*parts.user, *result[user].blocks])
    if parts.system:
        result.insert(system + 1, ChatMessage(role=MessageRole.SYSTEM, blocks=parts.system))
    return result


def with_notes(
    messages: list[ChatMessage], frames: dict[int, list[TextBlock]]
) -> list[ChatMessage]:
    """``messages`` with each of ``frames`` (earlier notes, framed) at the start of the user
    message at its index; the messages given are not changed."""
    result = list(messages)
    for index, blocks in frames.items():
        result[index] = _with_blocks(result[index], [*blocks, *result[index].blocks])
    return result


def marked_before_latest(
    messages: list[ChatMessage], cache_control: CacheControl | None
) -> list[ChatMessage]:
    """With ``cache_control``, ``messages`` with a ``CachePoint`` at the end of the message before
    the latest user message (a user or assistant message): the end of what the previous call
    sent, with ``"notes"``."""
    latest = last_user_index(messages)
    if cache_control is None or not latest:
        return messages
    before = messages[latest - 1]
    if before.role not in (MessageRole.USER, MessageRole.ASSISTANT):
        return messages
    result = list(messages)
    point = CachePoint(cache_control=cache_control)
    result[latest - 1] = _with_blocks(before, [*before.blocks, point])
    return result


def neutralised(messages: list[ChatMessage], tags: Sequence[str]) -> list[ChatMessage]:
    """The messages as the LLM may read them: what a user wrote or a tool returned cannot open,
    close or imitate the block's frame (``korely_memory.framing``). A message with nothing to
    change is passed on as it is."""
    result = []
    for message in messages:
        if message.role in (MessageRole.USER, MessageRole.TOOL):
            blocks: list[ContentBlock] = []
            for block in message.blocks:
                if isinstance(block, TextBlock):
                    text = framing.neutralise(block.text, tags)
                    if text != block.text:
                        block = TextBlock(text=text)
                blocks.append(block)
            if any(a is not b for a, b in zip(blocks, message.blocks, strict=True)):
                message = _with_blocks(message, blocks)
        result.append(message)
    return result


def _with_blocks(message: ChatMessage, blocks: list[ContentBlock]) -> ChatMessage:
    # A copy: the message may be one another block or the chat store still holds.
    return message.model_copy(update={"blocks": blocks})
