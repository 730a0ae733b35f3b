"""A ready ``Memory`` with the korely block inside: one read per user turn, placed for caching."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal, cast

from llama_index.core.base.llms.types import CacheControl, ChatMessage, TextBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory import Memory
from llama_index.core.memory.memory import (
    DEFAULT_MEMORY_BLOCKS_TEMPLATE,
    DEFAULT_TOKEN_LIMIT,
    InsertMethod,
)
from llama_index.core.storage.chat_store.base_db import MessageStatus

from korely_memory import ContextBlock, Identity, InvalidRequest, MemoryEngine, Note, limits
from korely_memory.capture import DEFAULT_DELAY, CaptureControls, Captures, Extractor, check_capture
from korely_memory.framing import FRAME_TAGS
from korely_memory.limits import MIN_BUDGET

from ._acknowledge import settle, spend
from ._budget import DEFAULT_BLOCK_NAME, block_room, engine_tokenizer, frame, frame_cost
from ._capturing import Said
from ._layout import (
    PLACEMENTS,
    Parts,
    framed,
    marked_before_latest,
    neutralised,
    place,
    with_notes,
)
from ._turns import Conversation, anchors, is_answer, label, last_user_index, text_of
from .block import DEFAULT_TOKEN_BUDGET, KorelyMemoryBlock, shows_something
from .chat_store import DEFAULT_TABLE_NAME, SharedChatStore

Placement = Literal["system", "context", "notes"]
DEFAULT_PLACEMENT: Placement = "context"
DEFAULT_CHAT_HISTORY_TOKEN_RATIO: float = Memory.model_fields["chat_history_token_ratio"].default
_FRAMES = 2  # the stable note and the rest are framed apart
_FITS = 4  # re-renderings tried before a block that will not fit is left out


class KorelyMemory(CaptureControls, Memory):
    """A LlamaIndex ``Memory`` with a :class:`KorelyMemoryBlock` first among its blocks.

    Build it with :meth:`from_defaults`, one per conversation, and pass it to every
    ``agent.run(..., memory=memory)``. Its chat history, flushing and other blocks are
    ``Memory``'s own; what it adds:

    - the korely block is read once per user turn, whatever the agent (``FunctionAgent``,
      ``ReActAgent``, every agent of an ``AgentWorkflow``) or chat engine, and served again
      to the turn's later reads; a turn starts when a user message is stored;
    - its stable note goes at the start of the system message and the rest where
      ``placement`` says (see ``_layout``), never into the chat history;
    - each read is sized to the room the history and the other blocks leave within
      ``token_limit``, and shows less rather than go over it;
    - changes shown are held, and spent once an LLM answered a prompt that carried them;
    - with ``capture=``, each finished turn (a user message, then the answer stored) is
      given to ``MemoryEngine.capture``, in a background thread by default: the turn
      neither waits for it nor fails because of it. ``close()`` (or a ``with`` block)
      ends the background work; ``flush()`` waits for it; ``capture_stats`` counts.
    """

    placement: Placement = Field(
        default=DEFAULT_PLACEMENT,
        description='Where the block\'s changing part goes: "system", "context" or "notes".',
    )
    cache_control: CacheControl | None = Field(
        default=None,
        description="When set, a CachePoint with it follows the block's stable note.",
    )

    _conversation: Conversation = PrivateAttr(default_factory=Conversation)
    _frames: int | None = PrivateAttr(default=None)
    _captures: Captures | None = PrivateAttr(default=None)
    _said: Said = PrivateAttr(default_factory=Said)

    @classmethod
    def class_name(cls) -> str:
        return "KorelyMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        engine: MemoryEngine,
        identity: Identity,
        *,
        reader: str | None = None,
        token_budget: int | None = None,
        changes: str | list[str] | None = None,
        hold: bool | float | dt.timedelta | None = True,
        placement: Placement = DEFAULT_PLACEMENT,
        cache_control: CacheControl | None = None,
        keep_flushed: bool = False,
        block_name: str = DEFAULT_BLOCK_NAME,
        capture: Extractor | None = None,
        capture_inline: bool = False,
        capture_delay: float = DEFAULT_DELAY,
        keep_excerpts: bool = False,
        max_facts: int | None = None,
        hold_for_owner: bool = False,
        **memory_kwargs: Any,
    ) -> KorelyMemory:
        """A ``Memory`` for one conversation of ``identity``.

        Args:
            engine: The engine that keeps the facts.
            identity: Whose memory it is (account, user, agent).
            reader: The reading agent's own name; set it to be told, once, of facts
                that changed since this agent last read them, and not of its own writes.
            token_budget: The most tokens the block may take: by default 800, or less
                when ``token_limit`` leaves less room.
            changes: Which kinds of change to tell (see ``MemoryEngine.get_context``).
            hold: How long a read holds the changes it shows until an LLM answers with
                them: True (10 minutes), seconds, a ``timedelta``; None or False spends
                them at the read, as a read without a hold does.
            placement: ``"context"`` (the default) puts the block's changing part in the
                latest user message, ``"system"`` in a system message before the history;
                ``"notes"`` as ``"context"``, but each turn's part holds only what the
                conversation (its ``session_id``) has not been shown, and earlier turns' parts
                stay at their user messages.
            cache_control: Mark the stable note cacheable (a ``CachePoint`` after it), for
                providers with explicit cache markers.
            keep_flushed: Keep what ``Memory`` flushes from its chat history as memories of
                the identity, one per turn.
            block_name: The block's name, its tag inside ``<memory>``.
            capture: An extractor (``korely_extractor(llm)``, or any callable
                ``MemoryEngine.capture`` takes): each finished turn (the user's messages
                and the answer, no tool traffic) is captured with it, with this
                memory's ``reader`` and ``max_facts``.
            capture_inline: Capture before the answer is stored, instead of in the
                background. Either way a failed capture is logged and counted, never raised.
            capture_delay: Seconds a background capture waits before it starts; a turn
                of this conversation that ends meanwhile joins it (one capture, one
                model call, for both).
            keep_excerpts: Keep each captured turn as a memory too (shown in later blocks as
                quoted speech, found by ``recall``), besides the facts drawn from it. Off by
                default: only the facts are kept, which the person can see, correct and erase
                under their keys.
            max_facts: Refuse a new key to capture once the identity holds this many facts.
            hold_for_owner: Hold what capture draws about the person's own facts for their
                approval (``MemoryEngine.pending``, ``approve``, ``decline``) instead of
                writing it: nothing of it is shown until approved. Needs ``capture``; keeps no
                excerpt, so not with ``keep_excerpts``.
            **memory_kwargs: Passed to ``Memory.from_defaults`` (``session_id``,
                ``token_limit``, ``chat_history_token_ratio``, ``memory_blocks``,
                ``chat_store``, ``async_database_uri``, ...).

        Returns:
            The memory.

        Raises:
            InvalidRequest: An argument the engine would refuse (identity, reader, budget,
                changes, hold, max_facts), capture options it cannot use, an unknown
                placement, ``insert_method=InsertMethod.USER``, or a ``token_limit`` that
                leaves the block less room than it needs.
        """
        identity = limits.check_identity(identity)
        limits.check_reader(reader)
        limits.check_changes(changes)
        period = limits.check_hold(hold)
        limits.check_max_facts(max_facts)
        check_capture(capture, capture_inline, capture_delay, keep_excerpts, hold_for_owner)
        if token_budget is not None:
            limits.check_token_budget(token_budget)
        if placement not in PLACEMENTS:
            raise InvalidRequest(
                "placement", f'must be "system", "context" or "notes", not {placement!r}'
            )
        if memory_kwargs.get("insert_method", InsertMethod.SYSTEM) != InsertMethod.SYSTEM:
            raise InvalidRequest(
                "insert_method", "KorelyMemory places its block by placement=, not insert_method"
            )
        token_limit: int = memory_kwargs.get("token_limit", DEFAULT_TOKEN_LIMIT)
        ratio: float = memory_kwargs.get(
            "chat_history_token_ratio", DEFAULT_CHAT_HISTORY_TOKEN_RATIO
        )
        # Memory counts in the engine's tokens unless told otherwise: one unit for both.
        if memory_kwargs.get("tokenizer_fn") is None:
            memory_kwargs["tokenizer_fn"] = engine_tokenizer(engine)
        tokenizer_fn = memory_kwargs["tokenizer_fn"]
        template = memory_kwargs.get("memory_blocks_template", DEFAULT_MEMORY_BLOCKS_TEMPLATE)
        room = block_room(
            token_limit,
            ratio,
            tokenizer_fn=tokenizer_fn,
            template=template,
            block_name=block_name,
            frames=_FRAMES,
        )
        if token_budget is None:
            if room < MIN_BUDGET:
                raise InvalidRequest(
                    "token_limit",
                    f"{token_limit} with chat_history_token_ratio={ratio} leaves {room} tokens "
                    f"for the memory block, fewer than {MIN_BUDGET}: raise token_limit or lower "
                    "the ratio",
                )
            token_budget = min(DEFAULT_TOKEN_BUDGET, room)
        elif token_budget > room:
            raise InvalidRequest(
                "token_budget",
                f"{token_budget} does not fit: token_limit={token_limit} with "
                f"chat_history_token_ratio={ratio} leaves {room} tokens for the memory block",
            )
        block = KorelyMemoryBlock(
            name=block_name,
            engine=engine,
            identity=identity,
            reader=reader,
            token_budget=token_budget,
            changes=changes,
            hold=period,
            accept_short_term_memory=keep_flushed,
            token_limit=token_limit,
            frame_tokens=frame_cost(template, block_name, tokenizer_fn),
            tokenizer_fn=tokenizer_fn,
        )
        memory_kwargs["memory_blocks"] = [block, *(memory_kwargs.get("memory_blocks") or [])]
        if memory_kwargs.get("chat_store") is None:
            # Memory's own store, made to share its database with other memories at once.
            memory_kwargs["chat_store"] = SharedChatStore(
                memory_kwargs.pop("table_name", DEFAULT_TABLE_NAME),
                async_database_uri=memory_kwargs.pop("async_database_uri", None),
                async_engine=memory_kwargs.pop("async_engine", None),
                db_schema=memory_kwargs.pop("db_schema", None),
            )
        memory = cast(KorelyMemory, super().from_defaults(**memory_kwargs))
        memory.placement = placement
        memory.cache_control = cache_control
        if capture is not None:
            memory._captures = Captures(
                engine, capture, reader=reader, max_facts=max_facts,
                inline=capture_inline, delay=capture_delay, keep_excerpts=keep_excerpts,
                hold_for_owner=hold_for_owner,
            )  # fmt: skip
        return memory

    @property
    def crowded_out(self) -> int:
        """How many reads left the korely block out of the prompt for want of room (the
        history and the other blocks took it): ``korely_block.crowded_out``. A read serves
        every model call of its turn, and is counted (and logged) once."""
        return self.korely_block.crowded_out

    @property
    def in_turn(self) -> bool:
        """True while a turn is open: its user message was read for, its answer not stored yet.
        ``korely_functions`` refuse to act for this memory outside one."""
        turn = self._conversation.turn
        return turn is not None and not turn.answered

    @property
    def korely_block(self) -> KorelyMemoryBlock:
        """The korely block among this memory's blocks (the first, if there are several)."""
        return next(block for block in self.memory_blocks if isinstance(block, KorelyMemoryBlock))

    # -- storing: a stored user message starts a turn ----------------------------------

    async def aput(self, message: ChatMessage) -> None:
        await self.aput_messages([message])

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        await self._settle()
        turn = self._conversation.turn
        self._conversation.stored(messages)
        await super().aput_messages(messages)
        if turn is not None and any(is_answer(m) for m in messages):
            # The turn is answered: what its answered calls were told is spent now.
            turn.answered = True
            spend(turn.showings)
            await settle(turn.showings)
        await self._capture(messages)

    def written(self, *, erased: bool = False) -> None:
        """The agent's own memory tools wrote: the turn's next read reads the memory again
        (the new fact shows), telling again what the turn's block told.

        ``erased``: a fact was erased (``forget`` with ``erase``): the turn, which holds the
        words the person asked to have erased, is not captured.
        """
        if self._conversation.turn is not None:
            self._conversation.turn.stale = True
        if erased:
            self._said.erased()

    async def aset(self, messages: list[ChatMessage]) -> None:
        await self._settle()
        self._conversation.stored(messages)
        self._said.reset()  # a history put in place is no turn finished here
        await super().aset(messages)

    async def areset(self, status: MessageStatus | None = None) -> None:
        await self._settle()
        self._conversation.reset()
        self._said.reset()
        await super().areset(status)

    async def _capture(self, messages: list[ChatMessage]) -> None:
        """Capture each turn these stored messages finished (never raises: see ``Captures``)."""
        if self._captures is None:
            return
        who = self.korely_block.identity
        for turn, pairs, erased in self._said.stored(messages):
            await self._captures.afinished(who, self.session_id, turn, pairs, erased)

    async def _settle(self) -> None:
        """Wait for the acknowledgements of what the last answers were told."""
        if self._conversation.turn is not None:
            await settle(self._conversation.turn.showings)

    # -- reading -------------------------------------------------------------------

    async def aget(
        self, input: str | ChatMessage | None = None, **block_kwargs: Any
    ) -> list[ChatMessage]:
        """The chat history with the memory blocks in place, within ``token_limit``.

        Args:
            input: The user's message when it is not stored yet (chat engines pass it).
            **block_kwargs: Passed to the other blocks.

        Returns:
            The messages for the LLM.
        """
        await self._settle()
        korely = self.korely_block
        history = await self.sql_store.get_messages(self.session_id, status=MessageStatus.ACTIVE)
        messages = await self._with_other_blocks(history, input, **block_kwargs)
        anchored: dict[int, str] = {}
        if self.placement == "notes":
            flushed = await self.sql_store.get_messages(
                self.session_id, status=MessageStatus.ARCHIVED
            )
            anchored = anchors(messages, flushed)
        messages = neutralised(messages, (*FRAME_TAGS, korely.name))
        room = self.token_limit - sum(self._estimate_token_count(m) for m in messages)
        question = None if input is None else text_of(input)
        turn = self._conversation.locate(history, question)
        noting = self.placement == "notes" and turn is not None and turn.stored and anchored
        short = self._read_budget(room) < MIN_BUDGET
        if turn is None:
            # Nobody waits for an answer (a stored conversation being shown): no notices.
            index = last_user_index(history)
            query = question or (text_of(history[index]) if index is not None else None)
            block = await korely.read(query, self._read_budget(room), marking=False)
            shown, left_out = self._within(block, room, user_message=False)
            if short or left_out:
                takers = self._takers(history, messages)
                korely.crowded(self._read_budget(room), self.token_limit, takers)
            return place(messages, shown[1]) if shown else messages
        starts = turn is not self._conversation.turn and self._conversation.start(turn)
        total = self._read_budget(room)  # what the block and the earlier notes may take
        options: dict[str, Any] = {}
        if noting and (starts or turn.stale):
            turn.notes, options = await self._noting(anchored, total)
        frames = self._earlier(turn.notes, anchored) if noting else {}
        budget = total
        if noting:
            # Earlier notes take what this turn's note leaves: it keeps at least its reserve.
            budget = min(total - self._frames_cost(frames), self._reserve(total))
        short = budget < MIN_BUDGET
        if starts:
            turn.block = await korely.read(turn.user, budget, marking=True, **options)
            turn.crowded = False
        elif turn.stale:
            turn.stale = False
            held = turn.block.receipt if turn.block is not None else None
            turn.block = await korely.read(turn.user, budget, marking=True, renew=held, **options)
            turn.crowded = False
        if turn.block is None:
            frames = {}  # no note without the stable note saying what notes are
        while True:
            # Later calls of the turn carry more history (tool calls and their results): the
            # oldest notes leave the prompt before the turn's own does, so all of it fits.
            left = room - self._frames_cost(frames)
            within, left_out = self._within(turn.block, left, user_message=turn.stored)
            stable = (
                self._parts(turn.block, user_message=True)
                if noting and within is None and turn.block is not None
                else None
            )
            over = stable is not None and self._parts_cost(stable) > left
            if not frames or not (left_out or over):
                break
            del frames[min(frames)]
        if (short or left_out) and not turn.crowded:
            # Counted once per read: the turn's later model calls are served the same block.
            turn.crowded = True
            room_left = self._read_budget(room)
            korely.crowded(room_left, self.token_limit, self._takers(history, messages))
        own = frames.pop(max(anchored), []) if noting and max(anchored) in frames else []
        messages = with_notes(messages, frames)
        if within is None:
            if stable is not None and self._parts_cost(stable) <= left:
                # Nothing new: the stable note stays in place, as long as a note is there.
                placed = place(messages, stable)
                return marked_before_latest(self._own(placed, own), self.cache_control)
            return self._own(messages, own) if own else messages
        variant, parts = within
        korely.show(turn, variant, parts.needle, parts.carrier, deferred=True)
        placed = place(messages, parts)
        if not noting:
            return placed
        return marked_before_latest(self._own(placed, own), self.cache_control)

    def _frames_cost(self, frames: dict[int, list[TextBlock]]) -> int:
        return sum(self._estimate_token_count(b.text) for f in frames.values() for b in f)

    def _parts_cost(self, parts: Parts) -> int:
        return self._estimate_token_count([*parts.stable, *parts.system, *parts.user])

    def _reserve(self, total: int) -> int:
        """The room a turn's note keeps whatever the earlier notes take: the block's budget, or
        half of ``total`` when that is less (so that the note fits among the earlier ones
        next turn)."""
        return min(self.korely_block.token_budget, max(MIN_BUDGET, total // 2))

    def _takers(self, history: list[ChatMessage], messages: list[ChatMessage]) -> dict[str, int]:
        """What takes the room of ``token_limit``: the chat history and the other blocks."""
        chat = sum(self._estimate_token_count(m) for m in history)
        return {
            "chat history": chat,
            "other memory blocks": sum(self._estimate_token_count(m) for m in messages) - chat,
        }

    @staticmethod
    def _own(placed: list[ChatMessage], own: list[TextBlock]) -> list[ChatMessage]:
        """``placed`` with the turn's notes read before at the start of its user message, before
        the new one (placing may have put a system message first: the index is found anew)."""
        latest = last_user_index(placed)
        return with_notes(placed, {latest: own}) if own and latest is not None else placed

    def _read_budget(self, room: int) -> int:
        if self._frames is None:
            block = self.korely_block
            self._frames = _FRAMES * frame_cost(
                self.memory_blocks_template, block.name, self.tokenizer_fn
            )
        return room - self._frames

    def _within(
        self, block: ContextBlock | None, room: int, *, user_message: bool
    ) -> tuple[tuple[ContextBlock, Parts] | None, bool]:
        """``block`` framed, re-rendered smaller until it fits ``room`` (None when nothing fits),
        and whether it was left out for want of room.

        ``user_message``: the latest user message is the turn's own (see ``framed``).
        """
        variant = block
        for _ in range(_FITS):
            if variant is None or not shows_something(variant):
                # Left out for room only when it had something to show.
                return None, variant is not block
            parts = self._parts(variant, user_message=user_message)
            cost = self._estimate_token_count([*parts.stable, *parts.system, *parts.user])
            if cost <= room:
                return (variant, parts), False
            assert block is not None
            if block.note is not None:
                break  # a note is kept as it was shown: never fitted to less room
            variant = block.fit(variant.tokens - (cost - room))
        return None, True

    def _parts(self, block: ContextBlock, *, user_message: bool) -> Parts:
        return framed(
            self.memory_blocks_template,
            self.korely_block.name,
            block,
            self.cache_control,
            placement=self.placement,
            user_message=user_message,
        )

    async def _noting(
        self, anchored: dict[int, str], total: int
    ) -> tuple[tuple[Note, ...], dict[str, Any]]:
        """The conversation's earlier notes that stay in the prompt, and the read's options for
        the turn's note (attached to the latest user message).

        The notes whose messages are in the history stay, newest first (this turn's own, read
        before, first of all), while they leave the turn's note its reserve of ``total``; the
        older ones leave the prompt, and what they showed may be shown again.
        """
        korely = self.korely_block
        current = anchored[max(anchored)]
        kept = await korely.engine.anotes(korely.identity, label(self.session_id))
        there = set(anchored.values())
        share = total - self._reserve(total)
        staying: list[Note] = []
        for note in reversed([n for n in kept if n.anchor in there]):
            blocks = frame(self.memory_blocks_template, korely.name, note.text) if note.text else []
            share -= sum(self._estimate_token_count(b.text) for b in blocks)
            if share < 0:
                break
            staying.append(note)
        earlier = tuple(reversed(staying))
        options = {
            "conversation": label(self.session_id),
            "anchor": current,
            "present": [n.seq for n in earlier],
        }
        return earlier, options

    def _earlier(
        self, notes: tuple[Note, ...], anchored: dict[int, str]
    ) -> dict[int, list[TextBlock]]:
        """The earlier notes with something to show, framed, by the index of their message (a
        message read again in its turn has several, in order)."""
        korely = self.korely_block
        texts: dict[str | None, list[str]] = {}
        for note in notes:
            if note.text:
                texts.setdefault(note.anchor, []).append(note.text)
        return {
            index: [
                b for t in texts[anchor] for b in frame(self.memory_blocks_template, korely.name, t)
            ]
            for index, anchor in anchored.items()
            if anchor in texts
        }

    async def _with_other_blocks(
        self, history: list[ChatMessage], input: str | ChatMessage | None, **block_kwargs: Any
    ) -> list[ChatMessage]:
        """The history with every other block in place, as ``Memory`` would place them."""
        korely = self.korely_block
        block_input = history
        if isinstance(input, str):
            block_input = [*history, ChatMessage(role="user", content=input)]
        contents: dict[str, Any] = {}
        for block in sorted(self.memory_blocks, key=lambda b: -b.priority):
            if block is korely:
                continue
            content = await block.aget(block_input, session_id=self.session_id, **block_kwargs)
            if content:
                contents[block.name] = content
        if contents:
            tokens = sum(self._estimate_token_count(c) for c in contents.values())
            contents = await self._truncate_memory_blocks(
                contents, tokens, sum(self._estimate_token_count(m) for m in history)
            )
        data, chat_messages = await self._format_memory_blocks(contents)
        blocks: list[Any] = []
        if data:
            rendered = self.memory_blocks_template.format_messages(memory_blocks=data)
            blocks = rendered[0].blocks if rendered else []
        return self._insert_memory_content(history, blocks, chat_messages)
