"""`KorelyMiddleware`: memory for any `langchain.agents.create_agent` agent."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, Optional

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import Runtime
from sqlalchemy.exc import SQLAlchemyError

from korely_memory import ContextBlock, Identity, KorelyError, MemoryEngine, Note, limits
from korely_memory.capture import DEFAULT_DELAY, CaptureControls, Captures, Extractor, check_capture
from korely_memory.sealing import seal
from korely_memory.tools import FORGET
from langchain_korely._capturing import Pairs, Speaker, run_turn, said_by_the_person
from langchain_korely._checks import (
    check_capture_from,
    check_options,
    check_reached,
    check_tool_names,
)
from langchain_korely._events import watching
from langchain_korely._identity import (
    KEPT,
    IdentityResolver,
    KeptOrContext,
    KorelyState,
    RunView,
    identity_to_keep,
    resolver_for,
)
from langchain_korely._placement import Placement, label, placed_texts, placing
from langchain_korely._turns import Turn, TurnKey, Turns, thread_of, turn_of
from langchain_korely.tools import KorelyTool, check_tool_prefix, korely_tools

logger = logging.getLogger("langchain_korely")


class KorelyMiddleware(CaptureControls, AgentMiddleware[KorelyState, Any]):
    """Gives an agent the identity's memory in its prompt, and the memory tools.

    The block (changes since this reader last read, known facts, relevant
    memories) is read once per user turn, at the run's first model call, with
    the latest user message as the query; every model call of the turn, a
    retry and the run resumed after an interrupt get the same block, until the
    agent's own tools write (the next model call then reads again). The block
    is never put in the graph's state: no stream mode, no event and no
    checkpoint carries it. The run's identity is (`KorelyState`): a run resumed
    from its checkpoint needs no `context=` again.

    Changes shown are held, not spent, and acknowledged when the run finishes,
    once a model call with the block in its prompt has answered: they are in
    every model call of the turn, and a failed run, a retried one or an
    interrupted one never resumed tells them again, once.

    With `capture=`, each finished run's user turn is given to
    `MemoryEngine.capture`, in a background thread by default: the run neither
    waits for it nor fails because of it. `close()` (or a `with` block) ends
    the background work; `flush()` waits for it.

    Example:
        ```python
        from korely_memory import Identity, MemoryEngine
        from langchain.agents import create_agent
        from langchain_korely import KorelyMiddleware

        engine = MemoryEngine()
        agent = create_agent(model, system_prompt="You are a support agent.",
                             middleware=[KorelyMiddleware(engine, reader="support-bot")])
        who = Identity(account="acme", user="giulia", agent="support-copilot")
        agent.invoke({"messages": [("user", "Where do I live?")]}, context=who)
        ```
    """

    state_schema = KorelyState

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        reader: str | None = None,
        token_budget: int = limits.DEFAULT_BUDGET,
        changes: str | Sequence[str] | None = None,
        max_facts: int | None = None,
        identity_from: IdentityResolver | None = None,
        placement: Placement = "context",
        cache_marker: Mapping[str, Any] | None = None,
        read_only: bool = False,
        on_error: str = "raise",
        tool_prefix: str = "",
        name: str | None = None,
        capture: Extractor | None = None,
        capture_inline: bool = False,
        capture_delay: float = DEFAULT_DELAY,
        keep_excerpts: bool = False,
        capture_from: Speaker | None = None,
        hold_for_owner: bool = False,
    ) -> None:
        """Configure the middleware.

        Args:
            engine: The memory to read and write.
            reader: This agent's own name as a reader. With a reader, the engine
                keeps what it handed over and tells the agent, once, when a fact
                it read has changed; the tools pass it to every write, so the
                agent is not told its own changes. Without one, no notices.
            token_budget: The most tokens the block may take (50 to 8000).
            changes: Which kinds of change to tell, as `engine.get_context` takes
                them (`None`: the engine's default; `"all"`: every kind).
            max_facts: Ceiling passed to the `remember` tool.
            identity_from: Where the identity comes from, given the run (see
                `IdentityResolver`); by default the run's context
                (`agent.invoke(..., context=Identity(...))`).
            placement: `"context"` (the system prompt stays the same on every
                call; the part that changes goes in the latest user message),
                `"system"` (the whole block after the system prompt) or `"notes"`
                (as `"context"`, but each turn's part holds only what the thread
                has not been shown, and earlier turns' parts stay in their messages).
            cache_marker: Keys added to the content block of the stable note,
                e.g. `{"cache_control": {"type": "ephemeral"}}`, so that the
                provider caches the system prompt up to it.
            read_only: Give the block only, no tools (for models without tool
                calling, or agents that must not write).
            on_error: `"raise"` (a database failure fails the run) or
                `"continue"` (the model answers without memory; a warning is
                logged).
            tool_prefix: Put before the tools' names (`"memory_"`: `memory_remember`,
                ...), when the agent has tools of those names or a second
                `KorelyMiddleware`.
            name: The middleware's name in the graph; by default `KorelyMiddleware`,
                followed by `_<tool_prefix>` when there is one.
            capture: An extractor (`korely_extractor(model)`, or any callable
                `MemoryEngine.capture` takes): after each run, the run's user turn
                (user and assistant messages, no tool traffic) is captured with
                it, with this middleware's `reader` and `max_facts`.
            capture_inline: Capture before the run returns, instead of in the
                background. Either way a failed capture is logged and counted,
                never raised.
            capture_delay: Seconds a background capture waits before it starts;
                a run of the same thread that ends meanwhile joins it (one
                capture, one model call, for both).
            keep_excerpts: Keep each captured turn as a memory too (shown in later
                blocks as quoted speech, found by `recall`), besides the facts drawn
                from it. Off by default: only the facts are kept, which the person
                can see, correct and erase under their keys.
            capture_from: Which user messages are the run's person's words, the only ones
                captured: a function `(message, identity) -> bool`. By default a message
                without a `name`, or named after the identity's user; in a group chat
                (`HumanMessage(..., name=...)`) the others' words are left out, and a turn
                in which the person said nothing is not captured.
            hold_for_owner: Hold what capture draws about the person's own facts for their
                approval (`MemoryEngine.pending`, `approve`, `decline`) instead of writing it:
                nothing of it is shown until approved. Needs `capture`; keeps no excerpt, so
                not with `keep_excerpts`.

        Raises:
            InvalidRequest: An argument is not one the middleware takes; `field`
                names which.
        """
        super().__init__()
        limits.check_reader(reader)
        limits.check_token_budget(token_budget)
        limits.check_changes(changes)
        limits.check_max_facts(max_facts)
        check_tool_prefix(tool_prefix)
        check_capture(capture, capture_inline, capture_delay, keep_excerpts, hold_for_owner)
        check_capture_from(capture_from, capture)
        name = check_options(
            placement, on_error, read_only, cache_marker, identity_from, name, tool_prefix
        )
        self.engine = engine
        self.reader = reader
        self.token_budget = token_budget
        self.changes = changes
        self.placement: Placement = placement
        self.cache_marker = dict(cache_marker) if cache_marker is not None else None
        self.read_only = read_only
        self.on_error = on_error
        self._name = name
        self.identity_from: IdentityResolver = resolver_for(engine, identity_from)
        if isinstance(self.identity_from, KeptOrContext):
            with contextlib.suppress(SQLAlchemyError):  # read now, not in the first run
                seal(engine, "")
        self.tools: list[KorelyTool] = []
        if not read_only:
            self.tools = korely_tools(
                engine,
                max_facts,
                identity_from=self.identity_from,
                reader=reader,
                tool_prefix=tool_prefix,
            )
        for tool in self.tools:
            tool._written = self._written
        self._forget_tools = frozenset(t.name for t in self.tools if t.definition is FORGET)
        self._turns = Turns()
        self.max_facts = max_facts
        self.capture, self.capture_inline = capture, capture_inline
        self.capture_delay = capture_delay
        self.keep_excerpts = keep_excerpts
        self.hold_for_owner = hold_for_owner
        self.capture_from: Speaker = capture_from or said_by_the_person
        self._captures = None
        self._warned_skip = False
        if capture is not None:
            self._captures = Captures(
                engine, capture, reader=reader, max_facts=max_facts,
                inline=capture_inline, delay=capture_delay, keep_excerpts=keep_excerpts,
                hold_for_owner=hold_for_owner,
            )  # fmt: skip

    @property
    def name(self) -> str:
        """The middleware's name in the graph (its nodes are named after it)."""
        return self._name

    def before_agent(self, state: KorelyState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Keep the identity the run was given in its state, sealed for the thread: a run
        resumed from the checkpoint without `context=` takes it from there (see
        `KeptOrContext`). Only with the default resolver; a resolver of the application's is
        asked on every run."""
        if not isinstance(self.identity_from, KeptOrContext):
            return None
        thread = thread_of(None, runtime)
        try:
            return identity_to_keep(self.engine, state, runtime.context, thread)
        except SQLAlchemyError:  # the seal's secret could not be read: keep nothing
            if self.on_error == "raise":
                raise
            _log_unavailable()
            return {KEPT: None}

    async def abefore_agent(
        self, state: KorelyState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        return self.before_agent(state, runtime)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Call the model with the turn's block in its prompt."""
        key = self._turn_key(request)
        turn = self._turns.find(key) or self._read(key, self._turns.held(key), request)
        if turn.block is None:
            return handler(request)
        with (
            watching(*self._watched(turn, request)) as watch,
            placing(
                request, turn.block, self.placement, self.cache_marker, key.who, turn.notes
            ) as placed,
        ):
            try:
                response = handler(placed)
            except BaseException:
                self._turns.failed(key, turn)
                raise
        if check_reached(watch, response.result, self.name):
            self._turns.reached(key, turn)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        key = self._turn_key(request)
        turn = self._turns.find(key) or await self._aread(key, self._turns.held(key), request)
        if turn.block is None:
            return await handler(request)
        with (
            watching(*self._watched(turn, request)) as watch,
            placing(
                request, turn.block, self.placement, self.cache_marker, key.who, turn.notes
            ) as placed,
        ):
            try:
                response = await handler(placed)
            except BaseException:
                self._turns.failed(key, turn)
                raise
        if check_reached(watch, response.result, self.name):
            self._turns.reached(key, turn)
        return response

    # LangGraph passes a node the run's config through a parameter annotated exactly
    # `RunnableConfig` or `Optional[RunnableConfig]`; `RunnableConfig | None` is not passed.
    def after_agent(
        self,
        state: KorelyState,
        runtime: Runtime[Any],
        config: Optional[RunnableConfig] = None,  # noqa: UP045
    ) -> None:
        """Spend what the turn's block told, now that the turn is answered; forget the block
        (nothing of it stays in the process); capture."""
        finished = self._finished(state, runtime, config)
        if finished is None:
            return
        who, seen, messages, receipt = finished
        if receipt is not None:
            try:
                self.engine.acknowledge(receipt)
            except Exception:
                logger.warning("could not acknowledge a korely-memory block", exc_info=True)
        if self._captures is not None:
            self._captures.finished(who, *self._run_turn(who, seen, messages))

    async def aafter_agent(
        self,
        state: KorelyState,
        runtime: Runtime[Any],
        config: Optional[RunnableConfig] = None,  # noqa: UP045
    ) -> None:
        """Async twin of `after_agent`."""
        finished = self._finished(state, runtime, config)
        if finished is None:
            return
        who, seen, messages, receipt = finished
        if receipt is not None:
            try:
                await self.engine.aacknowledge(receipt)
            except Exception:
                logger.warning("could not acknowledge a korely-memory block", exc_info=True)
        if self._captures is not None:
            await self._captures.afinished(who, *self._run_turn(who, seen, messages))

    def _finished(
        self, state: KorelyState, runtime: Runtime[Any], config: RunnableConfig | None
    ) -> tuple[Identity, Mapping[str, Any], list[Any], str | None] | None:
        """The finished run's identity, config and messages, and the receipt to spend: that of
        the turn's block, when a model answered with it."""
        if config is None:
            config = var_child_runnable_config.get()
        try:
            who = self.identity_from(RunView(runtime, config, state))
        except KorelyError:  # a run without identity never read a block
            return None
        messages = _messages(state)
        turn = self._turns.finished(turn_of(messages, thread_of(config, runtime), who))
        receipt = None
        if turn is not None and turn.reached and turn.block is not None:
            receipt = turn.block.receipt
        return who, config or {}, messages, receipt

    def _run_turn(
        self, who: Identity, config: Mapping[str, Any], messages: list[Any]
    ) -> tuple[Hashable | None, Hashable, Pairs, bool]:
        """What the finished run gives capture: the person's words only (`capture_from`)."""
        refused: list[HumanMessage] = []

        def said(message: HumanMessage) -> bool:
            if self.capture_from(message, who):
                return True
            refused.append(message)
            return False

        thread, turn, pairs, erased = run_turn(config, messages, self._forget_tools, said)
        if refused and not erased and all(role != "user" for role, _ in pairs):
            self._skipped(who, refused)
        return thread, turn, pairs, erased

    def _skipped(self, who: Identity, refused: list[HumanMessage]) -> None:
        """A run in which none of the user messages was the person's: counted; with the default
        filter, the first one is logged (names that are display names would skip every run)."""
        assert self._captures is not None
        self._captures.skipped()
        if self.capture_from is not said_by_the_person or self._warned_skip:
            return
        self._warned_skip = True
        names = sorted({str(m.name) for m in refused})
        logger.warning(
            "korely-memory captured nothing of a run: none of its user messages is the "
            "person's (named %s; the identity's user is %r). If the application names "
            "messages otherwise than by user id, say which are the person's with "
            "KorelyMiddleware(capture_from=...). Skipped runs are counted in "
            "capture_stats.skipped; this is logged once per middleware.",
            ", ".join(repr(n) for n in names),
            who.user,
        )

    def _turn_key(self, request: ModelRequest[Any]) -> TurnKey:
        check_tool_names(self.tools, request.tools, self.name)
        # No config reaches this hook; the context variable has it, except in an async
        # run on Python 3.10 (None: see RunView).
        config = var_child_runnable_config.get()
        who = self.identity_from(RunView(request.runtime, config, request.state))
        messages = _messages(request.state) or request.messages
        return turn_of(messages, thread_of(config, request.runtime), who)

    def _read(
        self, key: TurnKey, renew: str | None = None, request: ModelRequest[Any] | None = None
    ) -> Turn:
        block: ContextBlock | None = None
        notes: tuple[Note, ...] | None = None
        try:
            options = self._options(renew)
            conversation = self._conversation(key)
            if conversation is not None and request is not None:
                kept = self.engine.notes(key.who, conversation)
                notes, options = self._noting(key, conversation, kept, request, options)
            block = self.engine.get_context(key.who, key.query, **options)
        except SQLAlchemyError:
            if self.on_error == "raise":
                raise
            _log_unavailable()
            notes = None
        return self._kept(key, block, notes)

    async def _aread(
        self, key: TurnKey, renew: str | None = None, request: ModelRequest[Any] | None = None
    ) -> Turn:
        block: ContextBlock | None = None
        notes: tuple[Note, ...] | None = None
        try:
            options = self._options(renew)
            conversation = self._conversation(key)
            if conversation is not None and request is not None:
                kept = await self.engine.anotes(key.who, conversation)
                notes, options = self._noting(key, conversation, kept, request, options)
            block = await self.engine.aget_context(key.who, key.query, **options)
        except SQLAlchemyError:
            if self.on_error == "raise":
                raise
            _log_unavailable()
            notes = None
        return self._kept(key, block, notes)

    def _conversation(self, key: TurnKey) -> str | None:
        """The conversation whose notes the turn reads: its thread, with `"notes"` (a digest of
        it when it is no id the engine takes: empty, longer than 255 characters, or with a
        control character)."""
        if self.placement != "notes" or key.thread is None:
            return None
        return label(str(key.thread))

    @staticmethod
    def _noting(
        key: TurnKey,
        conversation: str,
        kept: Sequence[Note],
        request: ModelRequest[Any],
        options: dict[str, Any],
    ) -> tuple[tuple[Note, ...], dict[str, Any]]:
        """The earlier notes still in the prompt (their message is among the request's), and
        the read's options for the turn's note."""
        ids = {label(m.id) for m in request.messages if isinstance(m, HumanMessage) and m.id}
        earlier = tuple(n for n in kept if n.anchor in ids)  # this turn's own, read before, too
        present = [n.seq for n in earlier]
        anchor = label(key.anchor) if key.anchor is not None else None
        noting = {"conversation": conversation, "anchor": anchor, "present": present}
        return earlier, {**options, **noting}

    def _options(self, renew: str | None) -> dict[str, Any]:
        return {
            "reader": self.reader,
            "token_budget": self.token_budget,
            "changes": self.changes,
            "hold": True,
            "renew": renew if self.reader is not None else None,
        }

    def _kept(
        self, key: TurnKey, block: ContextBlock | None, notes: tuple[Note, ...] | None = None
    ) -> Turn:
        turn = Turn(block, key.query, self._turns.now(), notes=notes)
        self._turns.keep(key, turn)
        return turn

    def _watched(self, turn: Turn, request: ModelRequest[Any]) -> tuple[list[str], list[str]]:
        """What must reach the model (the block's pieces, as placed), and what events must not
        show (all of them but the stable note, and the earlier notes put back)."""
        assert turn.block is not None
        block = turn.block
        placed = placed_texts(block, self.placement, request.messages)
        earlier = [n.text for n in turn.notes or () if n.text]
        return placed, [text for text in placed if text != block.stable] + earlier

    def _written(self, runtime: Any) -> None:
        """A tool of this middleware wrote: the turn's next model call reads the memory again."""
        config = getattr(runtime, "config", None)
        who = self.identity_from(runtime)
        self._turns.written(turn_of(_messages(runtime.state), thread_of(config, runtime), who))


def _messages(state: Any) -> list[Any]:
    """The messages of a graph state, a mapping or an object."""
    found = (
        state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    )
    return list(found or [])


def _log_unavailable() -> None:
    logger.warning(
        "korely-memory could not be read; the model answers without memory", exc_info=True
    )
