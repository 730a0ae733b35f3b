"""One worker thread that runs jobs a little after they are asked for, never in the caller's way.

`submit` only takes a lock and puts the job in a bounded table: the caller (the
end of an agent's turn, in any adapter) never waits for the work nor sees it
fail. A job waits `delay` seconds; a job submitted meanwhile under the same key
joins it (the two become one), so a burst of turns in one conversation costs
one piece of work.

The worker starts on demand and ends after `IDLE_EXIT` seconds with nothing to
do, so an idle or forgotten owner keeps no thread. `flush` runs what waits at
once and returns when all is done; `close` does the same, refuses what comes
after, and gives up on what is left when its time runs out. At interpreter exit
every open worker is closed, within `EXIT_WAIT` seconds in all.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

logger = logging.getLogger("korely_memory")

Job = TypeVar("Job")
Submitted = Literal["queued", "joined", "full", "closed"]

MAX_PENDING = 1024
"""Jobs waiting at most, per worker: beyond, a new one is refused (`"full"`)."""
IDLE_EXIT = 30.0
"""Seconds a worker with nothing to do waits before its thread ends."""
EXIT_WAIT = 10.0
"""Seconds, in all, that interpreter exit waits for the work still to do."""


@dataclass
class _Pending(Generic[Job]):
    due: float
    job: Job


class Background(Generic[Job]):
    """Jobs run one at a time in a worker thread, each `delay` seconds after it is asked for."""

    def __init__(
        self,
        run: Callable[[Job], None],
        join: Callable[[Job, Job], Job],
        *,
        delay: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        run: Does one job; what it raises is logged, never passed on.
        join: The one job that does both a waiting job and a later one of the same key.
        delay: Seconds a job waits before it runs.
        clock: Monotonic seconds.
        """
        self._run = run
        self._join = join
        self._delay = delay
        self._clock = clock
        self._pending: dict[Hashable, _Pending[Job]] = {}  # in the order they are due
        self._cond = threading.Condition()
        self._running = False
        self._hurry = 0  # flushes under way: nothing waits for its time
        self._closed = False
        self._thread: threading.Thread | None = None
        _OPEN.add(self)

    def submit(self, key: Hashable, job: Job) -> Submitted:
        """Put a job in line; never blocks on the work, never raises.

        Returns:
            `"queued"`, `"joined"` (it joined the waiting job of the same key),
            `"full"` (too many wait: refused) or `"closed"` (refused).
        """
        with self._cond:
            if self._closed:
                return "closed"
            waiting = self._pending.get(key)
            if waiting is not None:
                waiting.job = self._join(waiting.job, job)
                return "joined"
            if len(self._pending) >= MAX_PENDING or not self._started():
                return "full"
            self._pending[key] = _Pending(self._clock() + self._delay, job)
            self._cond.notify_all()
            return "queued"

    def withdraw(self, key: Hashable) -> Job | None:
        """Take back the job waiting under ``key``, which will not run; None when none waits."""
        with self._cond:
            waiting = self._pending.pop(key, None)
            self._cond.notify_all()
            return waiting.job if waiting is not None else None

    def pending(self) -> int:
        """Jobs waiting or running."""
        with self._cond:
            return len(self._pending) + self._running

    def flush(self, timeout: float | None = None) -> bool:
        """Run every waiting job now and wait for all to be done.

        Returns:
            Whether all were done within `timeout` seconds (None: no limit).
        """
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(self._idle, timeout)
            finally:
                self._hurry -= 1

    def close(self, timeout: float | None = None) -> int:
        """Refuse new jobs, run the waiting ones now, and wait for them.

        Returns:
            How many jobs were given up when `timeout` ran out (0: none).
        """
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            if self._cond.wait_for(self._idle, timeout):
                return 0
            left = len(self._pending) + self._running
            self._pending.clear()  # the job running, if any, ends on its own
            self._cond.notify_all()
        logger.warning("korely-memory gave up %d capture(s) still to do when it closed", left)
        return left

    @property
    def closed(self) -> bool:
        return self._closed

    def _idle(self) -> bool:
        return not self._pending and not self._running

    def _started(self) -> bool:
        """A worker is there to run jobs (under the lock); False if none can be started."""
        if self._thread is not None and self._thread.is_alive():
            return True
        thread = threading.Thread(target=self._work, name="korely-capture", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # the interpreter is shutting down
            return False
        self._thread = thread
        return True

    def _work(self) -> None:
        while True:
            with self._cond:
                key = self._next()
                if key is None:
                    if self._thread is threading.current_thread():
                        self._thread = None
                    return
                job = self._pending.pop(key).job
                self._running = True
            try:
                # A context of its own: nothing of the turn that asked (its callbacks, its
                # stream, its trace) follows the job into this thread.
                contextvars.Context().run(self._run, job)
            except Exception:
                logger.warning("korely-memory: a background capture failed", exc_info=True)
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()

    def _next(self) -> Hashable | None:
        """The key of the next job to run, once it is due (under the lock); None: end the thread."""
        idle_since = self._clock()
        while True:
            now = self._clock()
            if self._pending:
                key, first = next(iter(self._pending.items()))
                wait = first.due - now
                if wait <= 0 or self._hurry or self._closed:
                    return key
            elif self._closed or now - idle_since >= IDLE_EXIT:
                return None
            else:
                wait = IDLE_EXIT - (now - idle_since)
            self._cond.wait(wait)


_OPEN: weakref.WeakSet[Background[Any]] = weakref.WeakSet()


def _close_all() -> None:
    """At interpreter exit, once the program's own threads are done: the last captures."""
    deadline = time.monotonic() + EXIT_WAIT
    for worker in list(_OPEN):
        if not worker.closed:
            worker.close(max(0.0, deadline - time.monotonic()))


atexit.register(_close_all)
