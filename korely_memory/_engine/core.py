"""What every group of ``MemoryEngine``'s methods shares: its parts, its transactions, its marks.

``MemoryEngine`` (``_engine/__init__.py``) is made of one class per concern: facts
(``facts.py``), review (``review.py``), the context block (``context.py``), memories
and recall (``memories.py``), captured facts held for approval (``approvals.py``), and
erasure and upkeep (``upkeep.py``). Each builds on
``EngineCore``: the transactions (``_write``, ``_read``) and the mark step
(``_write_marks``) live here, once, with ``_twin``, which makes a method's async twin.
The items of LangGraph stores and the operator's listings are objects of their own on the
same core: ``engine.items`` (``items.py``) and ``engine.listings`` (``listings.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError

from .._db import _database
from .._read import _changes, _read_path
from .._read._ranking import Ranking
from .._store import _marks, _memories, _review, _writes
from .._text import _cache
from .._text._tokens import TokenCounter
from .._text._words import Words
from .._values._errors import NotFound
from .._values._identity import Identity
from .._values._types import Change, Fact, Memory

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
Clock = Callable[[], dt.datetime]
Moment = dt.datetime | dt.date
MARK_WAIT = 0.2  # seconds a read waits for a lock on its marks before giving way
OWED_READERS = 1024  # readers whose unmarked reads this process remembers


def _twin(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The async twin of a method: the same body, run in a worker thread."""

    @functools.wraps(method)
    async def twin(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = "a" + method.__name__
    twin.__doc__ = (
        f"Async twin of :meth:`{method.__name__}`: the same call, run in a worker thread.\n\n"
        "Cancelling the awaiting task does not stop the call: the thread runs on, and a write\n"
        "commits (or not) as if nothing had happened. A caller that retries after a timeout\n"
        "should read before writing again, or rely on the writes being idempotent: recording\n"
        "the same content under a key twice changes nothing."
    )
    return cast(Callable[Concatenate[S, P], Coroutine[Any, Any, R]], twin)


class EngineCore:
    """The parts ``MemoryEngine.__init__`` sets, and the steps its methods share."""

    url: URL
    db: Engine
    _write_wait: float
    _is_admin: Callable[[str, str], bool] | None
    _clock: Clock | None  # the caller's, when one was given
    _system_clock: Clock  # this process's
    _server_clock: bool  # PostgreSQL: the server's clock, not the process's
    _tokens: TokenCounter
    _words: Words
    _ranking: Ranking
    _writer: _writes.Writer
    _serial: Any
    _turns: Any  # kept blocks' look-ups take turns (SQLite files)
    _blocks: _read_path.BlockCache  # blocks made without a reader, reused while unchanged
    # Versions handed over by reads whose marks gave way, marked by the reader's next read.
    _owed: OrderedDict[tuple[str, str], dict[int, Fact]]
    _owed_lock: threading.Lock

    def _now(self, conn: Connection) -> dt.datetime:
        """The time of what happens on ``conn``, from the engine's one clock.

        The caller's ``clock`` when one was given; on PostgreSQL the server's, so that
        processes whose clocks disagree still agree on every version's, hold's and mark's
        time; on SQLite, whose processes share a machine, this process's.
        """
        if self._clock is not None:
            return self._clock()
        if self._server_clock:
            return _database.server_time(conn)
        return self._system_clock()

    def _now_or_server(self, conn: Connection) -> dt.datetime | None:
        """``_now``, or None where a statement reads the server's clock itself (PostgreSQL,
        no clock given): a read of one statement then pays no round trip for the time."""
        if self._server_clock and self._clock is None:
            return None
        return self._now(conn)

    def _read_clock(self) -> Clock | None:
        """The clock a read of one statement takes its moment from: None where the statement
        reads the server's (PostgreSQL, no clock given)."""
        if self._clock is not None:
            return self._clock
        return None if self._server_clock else self._system_clock

    def _write(self, work: Callable[[Connection], R]) -> R:
        with self._serial:
            return _database.run_write(self.db, work)

    def _read(self, work: Callable[[Connection], R], *, snapshot: bool = False) -> R:
        """Run ``work`` on a read-only connection; ``snapshot``: all its statements from one."""
        with self._serial:
            return _database.run_read(self.db, work, snapshot=snapshot)

    def _admin(self, conn: Connection, account: str, user: str) -> bool:
        if self._is_admin is not None:
            return bool(self._is_admin(account, user))
        return _review.listed(conn, account, user)

    def _keep_vectors(self) -> None:
        """Keep the vectors a read computed, so no process embeds the same text again."""
        if self._ranking.has_unsaved_vectors:
            self._write(self._ranking.save_vectors)

    def _scrub_words(self) -> bool:
        """After words were deleted: drop them from this process's caches, and from SQLite's log."""
        _cache.forget_all()
        _database.forget_statements()
        with self._serial:
            return _database.checkpoint(self.db, self.url, self._write_wait)

    def _memory_of(
        self, conn: Connection, who: Identity, memory_id: int, *, exclusive: bool = False
    ) -> Memory:
        memory = _memories.get(conn, who, memory_id, exclusive=exclusive)
        if memory is None:
            raise NotFound(f"no memory {memory_id} for this identity")
        return memory

    def _write_marks(
        self,
        who: Identity,
        reader: str,
        shown: Sequence[Fact],
        last_reads: dict[int, dt.datetime],
        now: dt.datetime,
        *,
        tells: Sequence[Change] = (),
        pending: _changes.PendingChanges | None = None,
        hold: _marks.Hold | None = None,
        renewing: str | None = None,
    ) -> _read_path.Claimed | None:
        """Write a read's marks and claim what its block ``tells``; returns what it claimed,
        None when it gave way.

        It waits at most ``MARK_WAIT`` for a lock another transaction holds, and
        gives way to that and to a lost connection, never failing the read.
        Versions a read that gave way handed over are owed marks, written by
        the reader's next read in this process.
        """
        slot = (who.account, reader)
        owed = self._owed_to(who.account, reader)
        work = _read_path.mark_work(
            shown, last_reads, owed, now, tells=tells, pending=pending, hold=hold
        )
        if not work:
            return _read_path.Claimed()
        try:
            with self._serial, _database.writing_within(self.db, MARK_WAIT) as conn:
                claimed = _read_path.write_marks(
                    conn, who, reader, work, now, renewing=renewing, clock=self._now
                )
        except DBAPIError as exc:
            if not _database.gives_way(exc):
                raise
            self._owe(slot, [*owed, *shown])
            return None
        if owed:
            with self._owed_lock:
                self._owed.pop(slot, None)
        return claimed

    def _owed_to(self, account: str, reader: str | None) -> list[Fact]:
        """Versions this reader was handed by reads that gave way, still to be marked."""
        with self._owed_lock:
            return list(self._owed.get((account, reader or ""), {}).values())

    def _forget_owed(self, account: str, user: str) -> None:
        """Drop what this process keeps of ``user`` for readers' next reads (an erasure): the
        versions about them, and the slot of a reader of their name."""
        with self._owed_lock:
            for slot in list(self._owed):
                if slot == (account, user):
                    del self._owed[slot]
                    continue
                kept = self._owed[slot]
                for fact_id in [
                    i for i, f in kept.items() if (f.account, f.owner) == (account, user)
                ]:
                    del kept[fact_id]

    def _owe(self, slot: tuple[str, str], handed: Sequence[Fact]) -> None:
        """Keep what the next read needs to mark these versions: their ids and whom they are
        about, never their words (an erasure may come first)."""
        with self._owed_lock:
            kept = self._owed.setdefault(slot, {})
            kept.update(
                (f.id, f if not f.content else dataclasses.replace(f, content="")) for f in handed
            )
            self._owed.move_to_end(slot)
            while len(self._owed) > OWED_READERS:
                self._owed.popitem(last=False)
