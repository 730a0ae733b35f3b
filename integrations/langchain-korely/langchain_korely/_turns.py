"""The block of each user turn in progress, kept by the middleware instead of in graph state.

Graph state is streamed (`stream_mode="values"`, `"updates"`, `"debug"`, ...)
and checkpointed, so the block, which holds a person's facts, is kept out of it.
The middleware keeps it here, in the process, for the turn it was read for:

- A turn is the latest user message of a run: its id (a fresh UUID for every
  message the graph adds), in its thread, for one identity. Every model call
  of the run, a retry, and the run resumed after an interrupt find the same
  block; a new user message, even with the same words, starts a new turn.
- A run whose model call failed leaves its turn under its words too, so a run
  retried with the same message sent again (a new message id) tells the held
  changes instead of waiting for the hold to run out.
- When the agent's own tools write, the turn's next model call reads again,
  renewing the hold of the block before: the changes it told stay in every
  model call of the turn, and are spent once the run finishes with a model
  having answered with them.
- A turn lasts less than the engine's hold, after which its changes could be
  told elsewhere; at most `MAX_TURNS` are kept (the oldest go first), and a
  finished run drops its own.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AnyMessage

from korely_memory import ContextBlock, Identity, Note, limits
from langchain_korely._placement import latest_user_message

MAX_TURNS = 1024
"""Turns kept at most, per middleware: one per run in progress, and recently failed ones."""
REUSE_FOR = (limits.DEFAULT_HOLD * 0.9).total_seconds()
"""Seconds a block is used: less than the hold on its changes, so none is told twice."""


@dataclass
class Turn:
    """The block of one user turn, and what became of it."""

    block: ContextBlock | None
    """None when the memory could not be read (`on_error="continue"`)."""
    query: str | None
    read_at: float
    reached: bool = False
    """A model call with the block in its prompt answered."""
    stale: bool = False
    """A write of the agent's own tools since: the next model call reads again."""
    notes: tuple[Note, ...] | None = None
    """With the `"notes"` placement in a thread: the earlier notes still in the prompt, to put
    back (the block is then the turn's note); None otherwise."""


@dataclass(frozen=True)
class TurnKey:
    """Which turn a model call or a tool call belongs to."""

    turn: Hashable
    """Thread, latest user message, identity."""
    retry: Hashable
    """Thread, the user's words, identity: what a run sent again has in common."""
    who: Identity = field(compare=False)
    query: str | None = field(compare=False)
    thread: Hashable | None = field(default=None, compare=False)
    anchor: str | None = field(default=None, compare=False)
    """The latest user message's id: what the turn's note is attached to."""


def thread_of(config: Mapping[str, Any] | None, runtime: Any) -> Hashable | None:
    """A run's thread: from its config, or from LangGraph's execution info when no config is seen.

    An async run on Python 3.10 gives the middleware's model hook no config (see
    `RunView`); LangGraph's `execution_info` has the same `thread_id` on every version.
    """
    if config is not None:
        return (config.get("configurable") or {}).get("thread_id")
    return getattr(getattr(runtime, "execution_info", None), "thread_id", None)


def turn_of(messages: Sequence[AnyMessage], thread: Hashable | None, who: Identity) -> TurnKey:
    """The turn a run is in, from its messages and its thread (`thread_of`)."""
    index = latest_user_message(messages)
    latest = messages[index] if index is not None else None
    query = (latest.text or None) if latest is not None else None
    anchor = latest.id if latest is not None and latest.id else None
    message_id = anchor or ("words", query)
    return TurnKey((thread, message_id, who), (thread, query, who), who, query, thread, anchor)


class Turns:
    """Blocks by turn, bounded in number and age; safe across threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._open: OrderedDict[Hashable, Turn] = OrderedDict()
        self._failed: OrderedDict[Hashable, Turn] = OrderedDict()
        self._lock = threading.Lock()
        self._clock = clock

    def now(self) -> float:
        return self._clock()

    def find(self, key: TurnKey) -> Turn | None:
        """The turn's block if it can still be used, else None (then read and `keep`)."""
        with self._lock:
            turn = self._open.get(key.turn)
            if turn is None:
                turn = self._failed.pop(key.retry, None)
                if turn is not None and self._fresh(turn):
                    self._keep(self._open, key.turn, turn)
            if turn is None or turn.stale or not self._fresh(turn):
                return None
            self._open.move_to_end(key.turn)
            return turn

    def keep(self, key: TurnKey, turn: Turn) -> None:
        with self._lock:
            self._keep(self._open, key.turn, turn)

    def held(self, key: TurnKey) -> str | None:
        """The receipt of the block the turn had before (stale, or too old to use), for the
        next read of the turn to renew."""
        with self._lock:
            turn = self._open.get(key.turn)
        return turn.block.receipt if turn is not None and turn.block is not None else None

    def failed(self, key: TurnKey, turn: Turn) -> None:
        """A model call of the turn failed: a run sent again may take its block."""
        if turn.block is None or turn.block.receipt is None:
            return
        with self._lock:
            self._keep(self._failed, key.retry, turn)

    def reached(self, key: TurnKey, turn: Turn) -> None:
        """A model call answered with the turn's block in its prompt."""
        with self._lock:
            turn.reached = True
            if self._failed.get(key.retry) is turn:
                del self._failed[key.retry]

    def written(self, key: TurnKey) -> None:
        """The agent's own tools wrote: the turn's next model call reads the memory again."""
        with self._lock:
            turn = self._open.get(key.turn)
            if turn is not None:
                turn.stale = True

    def finished(self, key: TurnKey) -> Turn | None:
        """The run is over: its turn, no longer kept."""
        with self._lock:
            return self._open.pop(key.turn, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open) + len(self._failed)

    def _fresh(self, turn: Turn) -> bool:
        return self._clock() - turn.read_at < REUSE_FOR

    @staticmethod
    def _keep(where: OrderedDict[Hashable, Turn], key: Hashable, turn: Turn) -> None:
        where[key] = turn
        where.move_to_end(key)
        while len(where) > MAX_TURNS:
            where.popitem(last=False)
