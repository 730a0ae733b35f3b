"""Capture of finished turns, the part every adapter shares: what an extractor and a capture count,
how a turn's excerpt is split, joined and handed to `MemoryEngine.capture`, inline or in the
background. Public for adapters (the LangChain and LlamaIndex ones are built on it); an
application uses its adapter's `capture=` instead. The extractor's side is here too, defined
once for every framework: the prompt (`extraction_prompt`), the answer's schema
(`OPERATIONS_SCHEMA`) and its check (`operations_from`).

An adapter only says when a turn is finished and what it said, as `(role, text)`
pairs: the user's messages and the assistant's answers, no tool traffic. A
turn is captured in a background thread by default (`_background`), or inline;
whatever happens to the capture (the model fails, its answer is malformed, the
database is down), the turn is not told: it is logged and counted.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ._engine import MemoryEngine
from ._engine.background import EXIT_WAIT, Background
from ._store._capture_writes import chunks
from ._text._extraction import (
    ACTIONS,
    OPERATIONS_SCHEMA,
    Extractor,
    extraction_prompt,
    operations_from,
)
from ._values._errors import InvalidRequest
from ._values._identity import Identity
from ._values._types import Fact, Operation

__all__ = [
    "ACTIONS",
    "DEFAULT_DELAY",
    "MAX_DELAY",
    "OPERATIONS_SCHEMA",
    "CaptureControls",
    "CaptureStats",
    "Captures",
    "Extractor",
    "ExtractorStats",
    "Job",
    "ModelExtractor",
    "Operation",
    "check_capture",
    "chunks",
    "extraction_prompt",
    "operations_from",
]

logger = logging.getLogger("korely_memory")

Pairs = tuple[tuple[str, str], ...]

DEFAULT_DELAY = 2.0
"""Seconds a background capture waits for more turns of its conversation to join it."""
MAX_DELAY = 3600.0


@dataclass(frozen=True)
class ExtractorStats:
    """What an extractor built on a chat model met so far."""

    calls: int = 0
    """Times the model was asked."""
    malformed: int = 0
    """Answers that were not a list of operations: the capture wrote nothing."""
    failed: int = 0
    """Calls that raised (the model unreachable, a timeout, a refusal to run)."""


@dataclass(frozen=True)
class CaptureStats:
    """What an adapter's capture did so far (all zero without `capture=`)."""

    captured: int = 0
    """Captures done: the extractor answered and the engine applied it (perhaps writing
    nothing, or finding the excerpt captured before)."""
    failed: int = 0
    """Captures that raised (the model, a malformed answer, the database): nothing written."""
    dropped: int = 0
    """Turns never captured: too many captures waited, or capture was closed."""
    superseded: int = 0
    """Turns whose capture was still waiting when a later turn of the same conversation ended:
    the later capture took it over and covers both."""
    withheld: int = 0
    """Turns not captured because the agent erased a fact in them (the person asked that
    something not be kept), and the turns of the conversation that waited to join them."""
    skipped: int = 0
    """Turns not captured because none of their user messages was the person's (the adapter's
    speaker filter, e.g. LangChain's `capture_from`, refused them all)."""
    pending: int = 0
    """Captures waiting or running now."""


class ModelExtractor:
    """An extractor that asks a chat model for the engine's operations, checked and counted.

    A subclass says how to ask (`_ask`): it gets the engine's `extraction_prompt`
    and returns the model's structured answer, or raises `InvalidRequest`
    (`field="operations"`) when the answer could not be read. The answer is
    checked with `operations_from`; a malformed one raises `InvalidRequest`, so
    the capture writes nothing, and is counted and logged. What the model
    raises passes through, counted.
    """

    def __init__(self) -> None:
        self._counts = {"calls": 0, "malformed": 0, "failed": 0}
        self._lock = threading.Lock()

    @property
    def stats(self) -> ExtractorStats:
        """Counts so far (a snapshot; safe from any thread)."""
        with self._lock:
            return ExtractorStats(**self._counts)

    def __call__(
        self, messages: Sequence[tuple[str, str]], facts: Sequence[Fact]
    ) -> list[Operation]:
        """Ask the model what to change, given the excerpt and the identity's true facts.

        Args:
            messages: The excerpt, as `(role, text)` pairs.
            facts: The identity's true facts: the model is told to reuse their keys.

        Returns:
            The operations, checked.

        Raises:
            InvalidRequest: The answer is not a list of operations (`field="operations"`).
        """
        prompt = extraction_prompt(messages, facts)
        self._count("calls")
        try:
            answer = self._ask(prompt)
        except InvalidRequest as refused:
            self._malformed(refused)
            raise
        except Exception:
            self._count("failed")
            raise
        try:
            return operations_from(answer)
        except InvalidRequest as refused:
            self._malformed(refused)
            raise

    def _ask(self, prompt: str) -> Any:
        raise NotImplementedError

    def _malformed(self, refused: InvalidRequest) -> None:
        self._count("malformed")
        logger.warning("korely-memory capture: %s; nothing is written for this excerpt", refused)

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1


@dataclass(frozen=True)
class Job:
    """What one capture takes: an identity and the turns of one conversation, in order."""

    who: Identity
    turns: tuple[tuple[Hashable, Pairs], ...]
    """(the turn's id, its excerpt), in order."""

    def joined(self, later: Job) -> Job:
        """This capture, taken over by a later turn's: one capture of both."""
        (turn, pairs), *_ = later.turns
        if self.turns[-1][0] == turn:  # the same turn, ended again (resumed): its last form
            return Job(self.who, (*self.turns[:-1], (turn, pairs)))
        return Job(self.who, self.turns + later.turns)

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return [pair for _, pairs in self.turns for pair in pairs]


def check_capture(
    capture: Any,
    inline: Any,
    delay: Any,
    keep_excerpts: Any = False,
    hold_for_owner: Any = False,
) -> None:
    """Raises `InvalidRequest` naming `capture`, `capture_inline`, `capture_delay`,
    `keep_excerpts` or `hold_for_owner`."""
    if not isinstance(keep_excerpts, bool):
        raise InvalidRequest("keep_excerpts", "must be True or False")
    if keep_excerpts and capture is None:
        raise InvalidRequest("keep_excerpts", "needs capture=, the extractor to capture with")
    if not isinstance(hold_for_owner, bool):
        raise InvalidRequest("hold_for_owner", "must be True or False")
    if hold_for_owner and capture is None:
        raise InvalidRequest("hold_for_owner", "needs capture=, the extractor to capture with")
    if hold_for_owner and keep_excerpts:
        raise InvalidRequest(
            "hold_for_owner",
            "keeps no excerpt (its words would be shown before the person approved anything): "
            "leave keep_excerpts off",
        )
    if capture is not None and not callable(capture):
        raise InvalidRequest("capture", "must be an extractor, e.g. korely_extractor(model)")
    if not isinstance(inline, bool):
        raise InvalidRequest("capture_inline", "must be True or False")
    if inline and capture is None:
        raise InvalidRequest("capture_inline", "needs capture=, the extractor to capture with")
    if (
        isinstance(delay, bool)
        or not isinstance(delay, (int, float))
        or not 0 <= delay <= MAX_DELAY
    ):
        raise InvalidRequest(
            "capture_delay", f"must be a number of seconds from 0 to {MAX_DELAY:g}"
        )


class Captures:
    """Captures the finished turns of one adapter object, inline or in the background."""

    def __init__(
        self,
        engine: MemoryEngine,
        extractor: Extractor,
        *,
        reader: str | None,
        max_facts: int | None,
        inline: bool,
        delay: float,
        keep_excerpts: bool = False,
        hold_for_owner: bool = False,
    ) -> None:
        self._engine = engine
        self._extractor = extractor
        self._options: dict[str, Any] = {
            "reader": reader,
            "max_facts": max_facts,
            "keep_excerpt": keep_excerpts,
            "hold_for_owner": hold_for_owner,
        }
        self._background = None if inline else Background(self._capture, Job.joined, delay=delay)
        self._counts = dict.fromkeys(
            ("captured", "failed", "dropped", "superseded", "withheld", "skipped"), 0
        )
        self._lock = threading.Lock()

    def stats(self) -> CaptureStats:
        pending = self._background.pending() if self._background is not None else 0
        with self._lock:
            return CaptureStats(**self._counts, pending=pending)

    def finished(
        self,
        who: Identity,
        conversation: Hashable | None,
        turn: Hashable,
        pairs: Pairs,
        erased: bool = False,
    ) -> None:
        """A turn ended: capture it now (inline) or soon (in the background).

        Args:
            who: Whose memory.
            conversation: What turns join under while they wait (a thread, a session);
                None: a conversation of its own, which nothing joins.
            turn: The turn's id: the same turn ended again replaces its waiting excerpt.
            pairs: What the turn said, `(role, text)`; nothing is captured without a user's.
            erased: The agent erased a fact in this turn (`forget` with `erase`): the turn,
                which holds the words asked to be erased, is not captured, nor are the turns
                of its conversation still waiting to be.
        """
        if erased:
            self._withhold(who, conversation)
            return
        job = _job(who, turn, pairs)
        if job is None:
            return
        if self._background is None:
            # Its own context: the extraction call is not part of the turn (not streamed).
            contextvars.Context().run(self._capture, job)
        else:
            self._submit(conversation, job)

    async def afinished(
        self,
        who: Identity,
        conversation: Hashable | None,
        turn: Hashable,
        pairs: Pairs,
        erased: bool = False,
    ) -> None:
        """Async twin of `finished`: an inline capture runs in a thread."""
        if erased:
            self._withhold(who, conversation)
            return
        job = _job(who, turn, pairs)
        if job is None:
            return
        if self._background is None:
            await asyncio.to_thread(contextvars.Context().run, self._capture, job)
        else:
            self._submit(conversation, job)

    def skipped(self) -> None:
        """A turn ended in which no user message was the person's: nothing of it to capture."""
        self._count("skipped")

    def flush(self, timeout: float | None) -> bool:
        return self._background is None or self._background.flush(timeout)

    def close(self, timeout: float | None) -> bool:
        if self._background is None:
            return True
        left = self._background.close(timeout)
        self._count("dropped", left)
        return left == 0

    def _withhold(self, who: Identity, conversation: Hashable | None) -> None:
        waiting = None
        if self._background is not None and conversation is not None:
            waiting = self._background.withdraw((conversation, who))
        self._count("withheld", 1 + (len(waiting.turns) if waiting is not None else 0))

    def _submit(self, conversation: Hashable | None, job: Job) -> None:
        assert self._background is not None
        key: Hashable = (conversation, job.who) if conversation is not None else object()
        submitted = self._background.submit(key, job)
        if submitted == "joined":
            self._count("superseded")
        elif submitted != "queued":
            self._count("dropped")
            why = "capture is closed" if submitted == "closed" else "too many captures wait"
            logger.warning("korely-memory did not capture a turn: %s", why)

    def _capture(self, job: Job) -> None:
        for part in chunks(job.pairs):
            try:
                report = self._engine.capture(
                    job.who, part, extractor=self._extractor, **self._options
                )
            except InvalidRequest as refused:  # a malformed answer: what is wrong says it all
                self._count("failed")
                logger.warning(
                    "korely-memory could not capture a turn (%s); nothing written", refused
                )
            except Exception:
                self._count("failed")
                logger.warning(
                    "korely-memory could not capture a turn; nothing was written for it",
                    exc_info=True,
                )
            else:
                self._count("captured")
                logger.debug(
                    "korely-memory captured a turn: %s",
                    ", ".join(f"{s.outcome} {s.operation.key}" for s in report.steps)
                    or ("captured before" if report.already_captured else "nothing to keep"),
                )

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self._counts[what] += n


def _job(who: Identity, turn: Hashable, pairs: Pairs) -> Job | None:
    return Job(who, ((turn, pairs),)) if any(role == "user" for role, _ in pairs) else None


_Self = TypeVar("_Self", bound="CaptureControls")


class CaptureControls:
    """An adapter object's hold on its background captures: stats, `flush`, `close`, `with`.

    The object sets `_captures` (None without capture) when it is made.
    """

    _captures: Captures | None

    @property
    def capture_stats(self) -> CaptureStats:
        """What capture did so far: captured, failed, dropped, superseded, pending."""
        return self._captures.stats() if self._captures is not None else CaptureStats()

    def flush(self, timeout: float | None = None) -> bool:
        """Start every background capture now, and wait until none is left.

        Args:
            timeout: Seconds to wait at most (None: until done).

        Returns:
            Whether every capture asked for so far was done in time.
        """
        return self._captures is None or self._captures.flush(timeout)

    def close(self, timeout: float | None = EXIT_WAIT) -> bool:
        """Finish the background captures, and capture no later turn.

        The captures waiting start at once; a later turn is not captured
        (counted as dropped). Reading and the tools keep working. At
        interpreter exit, every capture not closed is closed this way.

        Args:
            timeout: Seconds to wait at most (None: until done); what is not
                done by then is given up and counted as dropped.

        Returns:
            Whether every capture was done.
        """
        return self._captures is None or self._captures.close(timeout)

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
