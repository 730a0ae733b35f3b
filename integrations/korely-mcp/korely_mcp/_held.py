"""Change notices held until the caller's next tool call.

MCP tells a server nothing about what becomes of a tool result: whether the client got it,
and whether the model read it. The one sign the server ever sees is the caller's next tool
call, which an agent makes once it has read the results before it. So a block's changes are
read with a hold, and the receipt waits here until that caller calls again: the next call
spends them. A result that never arrived (a dropped connection, a crashed client) leaves
them held; once the hold runs out, the reader's next block tells them again.

A block the client read for itself (the ``korely://context`` resource) is held the same way,
but may never have reached a model: when a stdio session ends cleanly, its receipts are
released (told again by the next block at once), not spent like those of tool results.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import anyio.to_thread
from sqlalchemy.exc import SQLAlchemyError

from korely_memory import KorelyError, MemoryEngine

logger = logging.getLogger("korely_mcp")


class HeldNotices:
    """The receipts of each caller's blocks, not yet acknowledged.

    A caller is named by the server: its one client over stdio, a token over HTTP.
    """

    def __init__(self, engine: MemoryEngine) -> None:
        self._engine = engine
        self._receipts: dict[str, list[str]] = {}
        self._client_reads: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def keep(self, caller: str, receipt: str, *, client_read: bool = False) -> None:
        """Hold ``receipt`` until ``caller`` calls again.

        ``client_read``: the block was read by the client, not handed to a model as a
        tool result; the end of the session releases it instead of spending it.
        """
        with self._lock:
            held = self._client_reads if client_read else self._receipts
            held.setdefault(caller, []).append(receipt)

    def waiting(self, caller: str) -> int:
        """How many of ``caller``'s receipts wait for its next call."""
        with self._lock:
            return len(self._receipts.get(caller, ())) + len(self._client_reads.get(caller, ()))

    def callers(self) -> list[str]:
        """The callers some of whose tool results' receipts wait."""
        with self._lock:
            return [caller for caller, receipts in self._receipts.items() if receipts]

    async def acknowledge(self, caller: str) -> None:
        """``caller`` called again: spend what its earlier blocks showed.

        A receipt the database could not take stays for the call after; the call itself
        goes on either way.
        """
        with self._lock:
            receipts = self._receipts.pop(caller, []) + self._client_reads.pop(caller, [])
        await self._settle(caller, receipts, self._engine.acknowledge)

    async def _settle(
        self, caller: str, receipts: list[str], settle: Callable[[str], int], *, retry: bool = True
    ) -> None:
        # A receipt the database could not take is kept for the caller's next call (with
        # ``retry``); one the engine refuses is dropped.
        failed: list[str] = []
        for receipt in receipts:
            try:
                await anyio.to_thread.run_sync(settle, receipt)
            except SQLAlchemyError:
                logger.exception("could not acknowledge or release a block's notices")
                failed.append(receipt)
            except KorelyError:
                logger.exception("the engine refused a receipt it issued; dropping it")
        if failed and retry:
            with self._lock:
                self._receipts.setdefault(caller, [])[:0] = failed

    async def end_session(self) -> None:
        """A stdio client closed its end cleanly: every caller has what its tool results
        showed, so those are spent; what the client read for itself is released, since no
        model may have seen it."""
        for caller in self.callers():
            with self._lock:
                receipts = self._receipts.pop(caller, [])
            await self._settle(caller, receipts, self._engine.acknowledge)
        with self._lock:
            reads = [r for receipts in self._client_reads.values() for r in receipts]
            self._client_reads.clear()
        await self._settle("", reads, self._engine.release, retry=False)
