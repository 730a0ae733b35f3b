"""The memory block: korely-memory's context block inside a LlamaIndex ``Memory``."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from korely_memory import Identity, MemoryEngine
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory import BaseMemoryBlock

DEFAULT_BLOCK_NAME = "korely"
DEFAULT_TOKEN_BUDGET = 800
MEMORY_CHARS = 16_000
"""The most text one kept memory may hold; longer transcripts are kept in pieces."""

_TURNS_KEPT = 32


@dataclass
class _Turn:
    """One user turn of one chat session, and the block served for it."""

    user: str
    before: str | None
    answered: bool
    text: str


@dataclass(frozen=True)
class _Seen:
    """Where a read stands in the conversation."""

    user: str
    """Text of the turn's user message."""
    before: str | None
    """The message right before it (the answer it follows), None when none is left."""
    answered: bool
    """Whether a reply follows the user message."""

    def continues(self, turn: _Turn) -> bool:
        """True when this read belongs to ``turn``, not to a new one."""
        if self.user != turn.user:
            return False
        # Memory flushes its oldest messages, so what came before may vanish within a turn.
        if self.before is not None and self.before != turn.before:
            return False
        # An answered turn whose user message comes back unanswered is the user saying it again.
        return not (turn.answered and not self.answered)


class KorelyMemoryBlock(BaseMemoryBlock[str]):
    """The facts an identity keeps between conversations, for ``llama_index.core.memory.Memory``.

    Returns the engine's context block as text, without a frame of its own
    (``Memory`` puts it between ``<memory>`` tags). The block is read once per
    user turn and served again to the later reads of that turn: an agent reads
    its memory blocks at the start of a run, after each tool round and once more
    after the final answer, which the model never sees, so no change notice is
    spent on a read the model does not see.

    Messages that ``Memory`` flushes from its short-term queue are kept as
    memories (searchable text) when ``accept_short_term_memory`` is True.

    The block is bound to one identity; build one per (account, user, agent).
    """

    name: str = Field(default=DEFAULT_BLOCK_NAME, description="The name of the memory block.")
    description: str | None = Field(
        default="Facts kept between conversations, and what changed since they were last read.",
        description="A description of the memory block.",
    )
    priority: int = Field(
        default=1,
        description="Truncation priority; when Memory must make room, the block gives up its last lines.",
    )
    accept_short_term_memory: bool = Field(
        default=False,
        description="Keep messages flushed from short-term memory as memories of this identity.",
    )
    engine: MemoryEngine = Field(exclude=True, description="The engine that keeps the facts.")
    identity: Identity = Field(description="Whose memory this block shows.")
    reader: str | None = Field(
        default=None,
        description="The reading agent's own name; without it no read is marked and no change is told.",
    )
    token_budget: int = Field(
        default=DEFAULT_TOKEN_BUDGET, ge=50, le=8000, description="The most tokens the block may take."
    )
    changes: str | list[str] | None = Field(
        default=None, description='Which kinds of change to tell; None for the engine default, "all" for all.'
    )

    _turns: OrderedDict[str | None, _Turn] = PrivateAttr(default_factory=OrderedDict)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        seen = _locate(messages or [])
        if seen is None:
            return await self._read(None)
        session = block_kwargs.get("session_id")
        turn = self._turns.get(session)
        if turn is not None and seen.continues(turn):
            turn.answered = turn.answered or seen.answered
            return turn.text
        text = await self._read(seen.user)
        self._turns[session] = _Turn(seen.user, seen.before, seen.answered, text)
        self._turns.move_to_end(session)
        while len(self._turns) > _TURNS_KEPT:
            self._turns.popitem(last=False)
        return text

    async def _read(self, query: str | None) -> str:
        block = await self.engine.aget_context(
            self.identity,
            query or None,
            reader=self.reader,
            token_budget=self.token_budget,
            changes=self.changes,
        )
        if not (block.facts or block.memories or block.changed):
            return ""
        return block.text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        for piece in _pieces(_transcript(messages), MEMORY_CHARS):
            await self.engine.aadd_memory(self.identity, piece)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Give up whole lines from the end (memories first, then facts) until enough room is freed.

        Change notices open the block, so they are the last to go. Returns None
        when nothing but the block's fixed note would be left.
        """
        lines = content.split("\n")
        freed = 0
        while lines and freed < tokens_to_truncate:
            freed += self.engine.count_tokens(lines.pop() + "\n")
        while lines and (not lines[-1].strip() or lines[-1].startswith("#")):
            lines.pop()
        if not any(line.startswith("- ") for line in lines):
            return None
        return "\n".join(lines)


def _text(message: ChatMessage) -> str:
    return message.content or ""


def _locate(messages: list[ChatMessage]) -> _Seen | None:
    """Find the user turn a read belongs to, or None when no user message is in sight."""
    msgs = list(messages)
    if (
        len(msgs) >= 2
        and msgs[-1].role == MessageRole.USER
        and msgs[-2].role == MessageRole.USER
        and _text(msgs[-1]) == _text(msgs[-2])
    ):
        # After a tool round an agent passes the turn's user text as ``input``,
        # which Memory appends after the stored user message: the same message twice.
        msgs.pop()
    for index in range(len(msgs) - 1, -1, -1):
        if msgs[index].role == MessageRole.USER:
            before = msgs[index - 1] if index else None
            return _Seen(
                user=_text(msgs[index]),
                before=f"{before.role.value}\x00{_text(before)}" if before is not None else None,
                answered=index < len(msgs) - 1,
            )
    return None


def _transcript(messages: list[ChatMessage]) -> str:
    """The user's and the assistant's words, one message a paragraph; tool traffic left out."""
    lines = [
        f"{message.role.value}: {_text(message).strip()}"
        for message in messages
        if message.role in (MessageRole.USER, MessageRole.ASSISTANT) and _text(message).strip()
    ]
    return "\n\n".join(lines)


def _pieces(text: str, size: int) -> list[str]:
    """Split ``text`` into pieces of at most ``size`` characters, at paragraph breaks where possible."""
    pieces: list[str] = []
    while len(text) > size:
        cut = text.rfind("\n\n", 0, size)
        if cut <= 0:
            cut = size
        pieces.append(text[:cut].strip())
        text = text[cut:].strip()
    if text:
        pieces.append(text)
    return pieces
