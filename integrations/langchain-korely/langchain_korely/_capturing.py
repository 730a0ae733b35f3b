"""The middleware's capture: each finished run's excerpt, given to `MemoryEngine.capture`.

A run's excerpt is its user turn: the latest user message (with the user
messages right before it) and the assistant's answers after it, as
`(role, text)` pairs; tool calls and tool results are left out, as is anything
without text. It is captured in a background thread by default, or inline.

Whatever happens to a capture (the model fails, its answer is malformed, the
database is down), the run is not told: it is logged and counted.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from korely_memory import Identity, InvalidRequest, MemoryEngine, limits
from korely_memory.capture import Extractor
from langchain_korely._background import EXIT_WAIT, Background
from langchain_korely.capture import CaptureStats

logger = logging.getLogger("langchain_korely")

Pairs = tuple[tuple[str, str], ...]

DEFAULT_DELAY = 2.0
"""Seconds a background capture waits for more runs of its thread to join it."""
MAX_DELAY = 3600.0


@dataclass(frozen=True)
class Job:
    """What one capture takes: an identity and the turns of one or more runs of a thread."""

    who: Identity
    turns: tuple[tuple[Hashable, Pairs], ...]
    """(the turn's latest user message, its excerpt), in order."""

    def joined(self, later: Job) -> Job:
        """This capture, taken over by a later run's: one capture of both."""
        (turn, pairs), *_ = later.turns
        if self.turns[-1][0] == turn:  # the same turn, ended again (a resumed run): its last form
            return Job(self.who, (*self.turns[:-1], (turn, pairs)))
        return Job(self.who, self.turns + later.turns)

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return [pair for _, pairs in self.turns for pair in pairs]


def run_excerpt(messages: Sequence[AnyMessage]) -> tuple[Hashable, Pairs]:
    """The latest user turn of a run's messages: its id, and its `(role, text)` pairs."""
    users = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if not users:
        return None, ()
    start = users[-1]
    while start > 0 and isinstance(messages[start - 1], HumanMessage):
        start -= 1
    latest = messages[users[-1]]
    pairs = tuple(
        ("user" if isinstance(m, HumanMessage) else "assistant", m.text.strip())
        for m in messages[start:]
        if isinstance(m, (HumanMessage, AIMessage)) and m.text.strip()
    )
    return latest.id or ("words", latest.text), pairs


def chunks(pairs: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The excerpt in parts the engine keeps as one memory each (at most `MAX_MEMORY` characters
    as `role: text` paragraphs). A message goes whole to the next part when it does not fit in
    this one; one longer than a part is cut at paragraph breaks, else at spaces, never dropped."""
    parts: list[list[tuple[str, str]]] = [[]]
    size = 0
    for role, text in pairs:
        whole = limits.MAX_MEMORY - len(role) - 2
        while text:
            gap = 2 if parts[-1] else 0
            room = whole - size - gap
            if len(text) > room and parts[-1] and (len(text) <= whole or room < whole // 4):
                parts.append([])
                size = 0
                continue
            piece, text = _cut(text, room)
            parts[-1].append((role, piece))
            size += gap + len(role) + 2 + len(piece)
    return [part for part in parts if part]


def _cut(text: str, size: int) -> tuple[str, str]:
    """At most `size` characters of `text`, cut where a paragraph or a word ends; and the rest."""
    if len(text) <= size:
        return text, ""
    cut = text.rfind("\n\n", 0, size)
    if cut <= 0:
        cut = text.rfind(" ", 0, size)
    if cut <= 0:
        cut = size
    return text[:cut].strip(), text[cut:].strip()


def check_capture(capture: Any, inline: Any, delay: Any) -> None:
    """Raises `InvalidRequest` naming `capture`, `capture_inline` or `capture_delay`."""
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
    """Captures the runs of one middleware, inline or in the background, and counts them."""

    def __init__(
        self,
        engine: MemoryEngine,
        extractor: Extractor,
        *,
        reader: str | None,
        max_facts: int | None,
        inline: bool,
        delay: float,
    ) -> None:
        self._engine = engine
        self._extractor = extractor
        self._options: dict[str, Any] = {"reader": reader, "max_facts": max_facts}
        self._background = None if inline else Background(self._capture, Job.joined, delay=delay)
        self._counts = {"captured": 0, "failed": 0, "dropped": 0, "superseded": 0}
        self._lock = threading.Lock()

    def stats(self) -> CaptureStats:
        pending = self._background.pending() if self._background is not None else 0
        with self._lock:
            return CaptureStats(**self._counts, pending=pending)

    def after_run(self, who: Identity, config: Mapping[str, Any], messages: Sequence[Any]) -> None:
        job = self._job(who, messages)
        if job is None:
            return
        if self._background is None:
            # Its own context: the extraction call is not part of the run (not streamed).
            contextvars.Context().run(self._capture, job)
        else:
            self._submit(config, job)

    async def aafter_run(
        self, who: Identity, config: Mapping[str, Any], messages: Sequence[Any]
    ) -> None:
        job = self._job(who, messages)
        if job is None:
            return
        if self._background is None:
            await asyncio.to_thread(contextvars.Context().run, self._capture, job)
        else:
            self._submit(config, job)

    def flush(self, timeout: float | None) -> bool:
        return self._background is None or self._background.flush(timeout)

    def close(self, timeout: float | None) -> bool:
        if self._background is None:
            return True
        left = self._background.close(timeout)
        self._count("dropped", left)
        return left == 0

    @staticmethod
    def _job(who: Identity, messages: Sequence[Any]) -> Job | None:
        turn, pairs = run_excerpt(messages)
        return Job(who, ((turn, pairs),)) if any(role == "user" for role, _ in pairs) else None

    def _submit(self, config: Mapping[str, Any], job: Job) -> None:
        assert self._background is not None
        thread = (config.get("configurable") or {}).get("thread_id")
        # A run without a thread is a conversation of its own: nothing joins its capture.
        key: Hashable = (thread, job.who) if thread is not None else object()
        submitted = self._background.submit(key, job)
        if submitted == "joined":
            self._count("superseded")
        elif submitted != "queued":
            self._count("dropped")
            why = "the middleware is closed" if submitted == "closed" else "too many captures wait"
            logger.warning("korely-memory did not capture a run: %s", why)

    def _capture(self, job: Job) -> None:
        for part in chunks(job.pairs):
            try:
                report = self._engine.capture(
                    job.who, part, extractor=self._extractor, **self._options
                )
            except InvalidRequest as refused:  # a malformed answer: what is wrong says it all
                self._count("failed")
                logger.warning(
                    "korely-memory could not capture a run (%s); nothing written", refused
                )
            except Exception:
                self._count("failed")
                logger.warning(
                    "korely-memory could not capture a run; nothing was written for it",
                    exc_info=True,
                )
            else:
                self._count("captured")
                logger.debug(
                    "korely-memory captured a run: %s",
                    ", ".join(f"{s.outcome} {s.operation.key}" for s in report.steps)
                    or ("captured before" if report.already_captured else "nothing to keep"),
                )

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self._counts[what] += n


_Self = TypeVar("_Self", bound="CaptureControls")


class CaptureControls:
    """The middleware's hold on its background captures: stats, `flush`, `close`, `with`."""

    _captures: Captures | None = None

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
        """Finish the background captures, and capture no later run.

        The captures waiting start at once; a later run is not captured
        (counted as dropped). The block and the tools keep working. At
        interpreter exit, every middleware not closed is closed this way.

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
