"""The memory block: korely-memory's context block inside a LlamaIndex ``Memory``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory import BaseMemoryBlock
from llama_index.core.memory.memory import DEFAULT_MEMORY_BLOCKS_TEMPLATE
from llama_index.core.prompts import RichPromptTemplate

from korely_memory import Identity, MemoryEngine
from korely_memory.limits import MAX_BUDGET, MAX_MEMORY, MIN_BUDGET

DEFAULT_BLOCK_NAME = "korely"
DEFAULT_TOKEN_BUDGET = 800

_TURNS_KEPT = 32
# How the block's text may end: a letter or digit, the ')' of a fact line, the '…' of a cut memory,
# other punctuation. Tokens can merge across the frame's edge, so each is measured.
_LAST_CHARACTERS = ("x", "7", ")", "…", ".", "?!", "é")


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

    With ``token_limit`` set (``KorelyMemory.from_defaults`` sets it), each read
    asks the engine for no more than the room the chat history and the frame
    leave, and for nothing when that is under the engine's minimum budget. The
    engine fits change notices inside the budget it is given, so ``Memory``
    never truncates a notice that was reserved for this read.

    Messages that ``Memory`` flushes from its short-term queue are kept as
    memories (searchable text) when ``accept_short_term_memory`` is True.

    The block is bound to one identity, which cannot be changed afterwards;
    build one per (account, user, agent).
    """

    name: str = Field(default=DEFAULT_BLOCK_NAME, description="The name of the memory block.")
    description: str | None = Field(
        default="Facts kept between conversations, and what changed since they were last read.",
        description="A description of the memory block.",
    )
    priority: int = Field(
        default=1,
        description=(
            "Truncation priority; when Memory must make room, the block gives up its last lines."
        ),
    )
    accept_short_term_memory: bool = Field(
        default=False,
        description="Keep messages flushed from short-term memory as memories of this identity.",
    )
    engine: MemoryEngine = Field(
        exclude=True, frozen=True, description="The engine that keeps the facts."
    )
    identity: Identity = Field(frozen=True, description="Whose memory this block shows.")
    reader: str | None = Field(
        default=None,
        description=(
            "The reading agent's own name; without it no read is marked and no change is told."
        ),
    )
    token_budget: int = Field(
        default=DEFAULT_TOKEN_BUDGET,
        ge=MIN_BUDGET,
        le=MAX_BUDGET,
        description="The most tokens the block may take.",
    )
    changes: str | list[str] | None = Field(
        default=None,
        description='Which kinds of change to tell; None for the engine default, "all" for all.',
    )
    token_limit: int | None = Field(
        default=None,
        ge=1,
        description=(
            "The token_limit of the Memory the block is in. With it, each read asks the engine "
            "for no more than the room the chat history leaves, so Memory never truncates it."
        ),
    )
    frame_tokens: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Tokens Memory's template adds around the block's text; None to measure them "
            "for Memory's default template."
        ),
    )
    tokenizer_fn: Callable[[str], Sequence[Any]] | None = Field(
        default=None,
        exclude=True,
        description="The tokenizer_fn of the Memory the block is in; None for the engine's.",
    )

    _turns: OrderedDict[tuple[Identity, str | None], _Turn] = PrivateAttr(
        default_factory=OrderedDict
    )
    _frame: int | None = PrivateAttr(default=None)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        history = _without_repeated_input(messages or [])
        seen = _locate(history)
        if seen is None:
            return await self._read(None, history)
        # The identity is part of the key, so that no copy of this block made for
        # someone else (model_copy shares private state) is served this one's text.
        session = (self.identity, block_kwargs.get("session_id"))
        turn = self._turns.get(session)
        if turn is not None and seen.continues(turn):
            turn.answered = turn.answered or seen.answered
            if self.token_limit is None:
                return turn.text
            # The history grows within a turn (the answer): what no longer fits gives way here.
            return self._fit(turn.text, self._room(history))
        text = await self._read(seen.user, history)
        self._turns[session] = _Turn(seen.user, seen.before, seen.answered, text)
        self._turns.move_to_end(session)
        while len(self._turns) > _TURNS_KEPT:
            self._turns.popitem(last=False)
        return text

    async def _read(self, query: str | None, history: list[ChatMessage]) -> str:
        budget = self._room(history)
        if budget < MIN_BUDGET:
            # Too little room to show anything: read nothing, so no change is spent.
            return ""
        block = await self.engine.aget_context(
            self.identity,
            query or None,
            reader=self.reader,
            token_budget=budget,
            changes=self.changes,
        )
        if not (block.facts or block.memories or block.changed):
            return ""
        return block.text

    def _room(self, history: list[ChatMessage]) -> int:
        """The budget of this read: ``token_budget``, or less when the history leaves less room.

        Change notices are reserved when the engine builds the block; sizing the
        read to the room left means Memory never has to cut a notice it took.
        """
        if self.token_limit is None:
            return self.token_budget
        if self._frame is None:
            self._frame = (
                self.frame_tokens
                if self.frame_tokens is not None
                else frame_cost(DEFAULT_MEMORY_BLOCKS_TEMPLATE, self.name, self._tokenizer())
            )
        left = self.token_limit - history_cost(history, self._tokenizer()) - self._frame
        return min(self.token_budget, left)

    def _tokenizer(self) -> Callable[[str], Sequence[Any]]:
        if self.tokenizer_fn is not None:
            return self.tokenizer_fn
        count = self.engine.count_tokens
        return lambda text: range(count(text))

    async def _aput(self, messages: list[ChatMessage]) -> None:
        for piece in _pieces(_transcript(messages), MAX_MEMORY):
            await self.engine.aadd_memory(self.identity, piece)

    async def atruncate(self, content: Any, tokens_to_truncate: int) -> str | None:
        """Give up whole lines from the end (memories first, then facts) until enough room is freed.

        Change notices open the block, so they are the last to go. Returns None
        when nothing but the block's fixed note would be left, and for an empty
        block (Memory asks for ``[]`` when the block had nothing to show).
        """
        if not isinstance(content, str) or not content:
            return None
        return self._fit(content, self._count(content) - tokens_to_truncate) or None

    def _fit(self, text: str, room: int) -> str:
        """``text`` less as many lines from its end as it takes to fit in ``room`` tokens."""
        lines = text.split("\n")
        over = self._count(text) - room
        while lines and over > 0:
            freed = 0
            while lines and freed < over:
                freed += self._count(lines.pop() + "\n")
            over = self._count("\n".join(lines)) - room
        while lines and (not lines[-1].strip() or lines[-1].startswith("#")):
            lines.pop()
        if not any(line.startswith("- ") for line in lines):
            return ""
        return "\n".join(lines)

    def _count(self, text: str) -> int:
        return len(self._tokenizer()(text))


def _text(message: ChatMessage) -> str:
    return message.content or ""


def history_cost(messages: list[ChatMessage], tokenizer_fn: Callable[[str], Sequence[Any]]) -> int:
    """The messages' tokens as ``Memory`` counts them: text blocks and additional kwargs.

    Images, audio and other media, which ``Memory`` counts by estimate, are not counted.
    """
    total = 0
    for message in messages:
        if message.additional_kwargs:
            total += len(tokenizer_fn(str(message.additional_kwargs)))
        for block in message.blocks:
            if isinstance(block, TextBlock):
                total += len(tokenizer_fn(block.text))
    return total


def frame_cost(
    template: RichPromptTemplate, block_name: str, tokenizer_fn: Callable[[str], Sequence[Any]]
) -> int:
    """The most tokens ``template`` adds around a block's text, whatever character it ends in."""

    def framed(text: str) -> int:
        messages = template.format_messages(memory_blocks=[(block_name, [TextBlock(text=text)])])
        return history_cost(messages, tokenizer_fn)

    sample = (
        "_Standing facts._\n\n## Known facts\n- home-city: Giulia lives in Rome (since 2026-01-01"
    )
    return max(
        framed(sample + last) - len(tokenizer_fn(sample + last)) for last in _LAST_CHARACTERS
    )


def _without_repeated_input(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The chat history Memory holds, without the ``input`` it may append to it for its blocks."""
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
    return msgs


def _locate(msgs: list[ChatMessage]) -> _Seen | None:
    """Find the user turn a read belongs to, or None when no user message is in sight."""
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
    """Split ``text`` into pieces of at most ``size`` characters, at paragraph breaks if any."""
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
