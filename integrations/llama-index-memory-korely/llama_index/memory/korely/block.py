"""The memory block: korely-memory's context block inside a LlamaIndex ``Memory``."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory import BaseMemoryBlock
from llama_index.core.memory.memory import DEFAULT_MEMORY_BLOCKS_TEMPLATE

from korely_memory import ContextBlock, Identity, InvalidRequest, MemoryEngine, limits
from korely_memory.limits import DEFAULT_HOLD, MAX_BUDGET, MIN_BUDGET
from korely_memory.tools import exchange_memories

from ._acknowledge import Showing, settle, watch
from ._budget import DEFAULT_BLOCK_NAME, frame_cost, history_cost
from ._turns import Turn, locate, text_of, without_repeated_input

DEFAULT_TOKEN_BUDGET = limits.DEFAULT_BUDGET

logger = logging.getLogger("llama_index.memory.korely")

_TURNS_KEPT = 32
_SERVED_KEPT = 64
_TAG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


class KorelyMemoryBlock(BaseMemoryBlock[str]):
    """The facts an identity keeps between conversations, for ``llama_index.core.memory.Memory``.

    In a :class:`~llama_index.memory.korely.KorelyMemory` (what ``KorelyMemory.from_defaults``
    builds), the memory decides what the block reads and where its parts go. In a ``Memory``
    of your own, the block returns the engine's context block as text, which ``Memory``
    puts between ``<memory><korely>`` tags in the system message; it is read once per user
    turn, recognised from the messages it is given, and served again to the turn's later reads.

    Every read that can tell changes holds them (``hold``) instead of spending them: they are
    spent once an LLM answered a prompt that carried them, and told again otherwise.

    Raises:
        InvalidRequest: at construction, an identity, reader, budget, ``changes`` or ``hold``
            the engine would refuse, or a name that cannot be a tag.
    """

    name: str = Field(default=DEFAULT_BLOCK_NAME, description="The name of the memory block.")
    description: str | None = Field(
        default="Facts kept between conversations, and what changed since they were last read.",
        description="A description of the memory block.",
    )
    priority: int = Field(
        default=1,
        description="Truncation priority; when Memory must make room, the block shows less.",
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
        description="The reading agent's own name; without it nothing is marked or told.",
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
    hold: dt.timedelta | None = Field(
        default=DEFAULT_HOLD,
        description="How long a read holds the changes it shows for its model to answer.",
    )
    token_limit: int | None = Field(
        default=None,
        ge=1,
        description="In a Memory of your own: its token_limit, so each read fits the room left.",
    )
    frame_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Tokens the Memory's template adds around the block; None to measure them.",
    )
    tokenizer_fn: Callable[[str], Sequence[Any]] | None = Field(
        default=None,
        exclude=True,
        description="The tokenizer_fn of the Memory the block is in; None for the engine's.",
    )

    _turns: OrderedDict[tuple[Identity, str | None], Turn] = PrivateAttr(
        default_factory=OrderedDict
    )
    _served: OrderedDict[str, ContextBlock] = PrivateAttr(default_factory=OrderedDict)
    _frame: int | None = PrivateAttr(default=None)
    _crowded_out: int = PrivateAttr(default=0)

    def __init__(self, **data: Any) -> None:
        if "identity" in data:
            data["identity"] = limits.check_identity(data["identity"])
        if not isinstance(data.get("engine"), MemoryEngine):
            raise InvalidRequest("engine", "must be a korely_memory.MemoryEngine")
        limits.check_reader(data.get("reader"))
        if "token_budget" in data:
            limits.check_token_budget(data["token_budget"])
        limits.check_changes(data.get("changes"))
        if "hold" in data:
            data["hold"] = limits.check_hold(data["hold"])
        name = data.get("name", DEFAULT_BLOCK_NAME)
        if not isinstance(name, str) or not _TAG_NAME.fullmatch(name):
            raise InvalidRequest(
                "name", "must be a tag name: a letter or '_', then letters, digits, '_', '.', '-'"
            )
        super().__init__(**data)

    # -- reading, for this block and for KorelyMemory ---------------------------------

    async def read(
        self,
        query: str | None,
        budget: int,
        *,
        marking: bool,
        renew: str | None = None,
        **noting: Any,
    ) -> ContextBlock | None:
        """The engine's block for ``query`` in ``budget`` tokens; None when it shows nothing.

        Args:
            query: What the turn is about (the user's message).
            budget: The most tokens it may take; under the engine's minimum nothing is read,
                so nothing is marked or held.
            marking: False for a read no model will answer (a resumed session shown to
                someone): nothing is marked, held or told.
            renew: The receipt of the turn's block before, read again after the agent
                wrote: the changes it holds are told again.
            **noting: ``conversation``, ``anchor`` and ``present``, for a note (the
                ``"notes"`` placement): see ``MemoryEngine.get_context``.
        """
        if budget < MIN_BUDGET:
            return None
        held = marking and self.reader is not None
        block = await self.engine.aget_context(
            self.identity,
            query or None,
            reader=self.reader if marking else None,
            token_budget=min(budget, self.token_budget),
            changes=self.changes,
            hold=self.hold if held else None,
            renew=renew if held else None,
            **noting,
        )
        if noting:  # a note is kept, even one with nothing new: what it showed is known
            return block
        return block if shows_something(block) else None

    def show(
        self,
        turn: Turn,
        block: ContextBlock,
        needle: str,
        carrier: TextBlock | None,
        *,
        deferred: bool = False,
    ) -> None:
        """Watch for ``needle`` (a text ``block`` was served as) in the prompts LLMs answer.

        ``deferred``: spend it when the turn is answered, not at the call that carried it.
        """
        if block.receipt is None:
            return
        if any(s.receipt == block.receipt and s.needle == needle for s in turn.showings):
            return
        showing = Showing(self.engine, block.receipt, needle, carrier, deferred=deferred)
        turn.showings.append(showing)
        watch(showing)

    @property
    def crowded_out(self) -> int:
        """How many reads left the block out for want of room: the chat history and the other
        blocks left it too few tokens of ``token_limit``, so no model call of those reads saw
        the person's facts or notices. Each is also logged (warning)."""
        return self._crowded_out

    def crowded(self, room: int, token_limit: int, takers: dict[str, int] | None = None) -> None:
        """Count and log a read that left the block out: ``room`` tokens were left for it;
        ``takers``: what took the rest, by name (the chat history, the other blocks)."""
        self._crowded_out += 1
        taken = takers or {"the chat history and the other memory blocks": token_limit - room}
        said = ", ".join(f"{what} {n}" for what, n in taken.items() if n > 0) or "nothing"
        largest = max(taken, key=lambda what: taken[what]) if taken else ""
        advice = (
            "lower chat_history_token_ratio or token_flush_size, or raise token_limit"
            if "chat history" in largest
            else "give the other memory blocks less room, or raise token_limit"
        )
        logger.warning(
            "the %s memory block of %s was left out of the prompt: of token_limit=%d tokens, "
            "%s take the room, leaving it %d, too few to show it (%d so far); %s",
            self.name,
            self.identity,
            token_limit,
            said,
            max(room, 0),
            self._crowded_out,
            advice,
        )

    # -- in a Memory of your own -------------------------------------------------------

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        history = without_repeated_input(messages or [])
        seen = locate(history)
        session = (self.identity, block_kwargs.get("session_id"))
        turn = self._turns.get(session)
        if turn is not None:
            await settle(turn.showings)
        room = self._room(history)
        if self.token_limit is not None and room < MIN_BUDGET:
            self.crowded(room, self.token_limit)
        if seen is None or (seen.answered and (turn is None or not seen.continues(turn))):
            # Nobody waits for an answer (a resumed session being shown): no notices.
            return self._remember_served(await self.read(None, room, marking=False))
        if turn is None or not seen.continues(turn):
            if turn is not None and not (turn.holds_changes and turn.user == seen.user):
                turn.end()
                turn = None
            if turn is None:
                # A retry of a turn no model answered keeps that turn's block and its changes.
                turn = Turn(seen.user, block=await self.read(seen.user, room, marking=True))
            turn.before = seen.before
            self._turns[session] = turn
            self._turns.move_to_end(session)
            while len(self._turns) > _TURNS_KEPT:
                self._turns.popitem(last=False)[1].end()
        turn.answered = turn.answered or seen.answered
        if turn.block is None:
            return ""
        served = turn.block.fit(room) if self.token_limit is not None else turn.block
        if not shows_something(served):
            return ""
        self.show(turn, served, served.text, None)
        return self._remember_served(served)

    async def atruncate(self, content: Any, tokens_to_truncate: int) -> str | None:
        """Show less when ``Memory`` must make room: memories go first, then facts, then changes.

        The block is re-rendered by the engine (``ContextBlock.fit``), so a change cut
        here is not spent: it waits for a later turn. Returns None when only the block's
        fixed note would be left (counted in ``crowded_out``, and logged), and for content
        this block did not serve.
        """
        if not isinstance(content, str) or not content:
            return None
        served = self._served.get(content)
        if served is None:
            return None
        smaller = served.fit(served.tokens - tokens_to_truncate)
        if not shows_something(smaller):
            self.crowded(served.tokens - tokens_to_truncate, self.token_limit or 0)
            return None
        for turn in self._turns.values():
            if any(s.needle == content for s in turn.showings):
                self.show(turn, smaller, smaller.text, None)
        return self._remember_served(smaller)

    def _remember_served(self, block: ContextBlock | None) -> str:
        if block is None:
            return ""
        self._served[block.text] = block
        self._served.move_to_end(block.text)
        while len(self._served) > _SERVED_KEPT:
            self._served.popitem(last=False)
        return block.text

    def _room(self, history: list[ChatMessage]) -> int:
        """This read's budget: ``token_budget``, or less when the history leaves less room."""
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

    # -- flushed messages ------------------------------------------------------------

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Keep flushed messages as memories: one per turn, split (never cut) to the size limit.

        Tool calls and tool results are left out: only what the user and the assistant said.
        """
        said = [
            (message.role.value, text_of(message))
            for message in messages
            if message.role in (MessageRole.USER, MessageRole.ASSISTANT)
        ]
        for piece in exchange_memories(said):
            await self.engine.aadd_memory(self.identity, piece)


def shows_something(block: ContextBlock) -> bool:
    """True when a block has more than its fixed note: a fact, a memory or a change."""
    return bool(block.facts or block.memories or block.changed)
