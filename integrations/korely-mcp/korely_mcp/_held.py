"""Change notices held until the caller's next tool call.

MCP tells a server nothing about what becomes of a tool result: whether the client got it,
and whether the model read it. The one sign the server ever sees is the caller's next tool
call, which an agent makes once it has read the results before it. So a block's changes are
read with a hold, and the receipt waits here until that caller calls again: the next call
spends them. A result that never arrived (a dropped connection, a crashed client) leaves
them held; once the hold runs out, the reader's next block tells them again.
"""

from __future__ import annotations

import logging
import threading

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
        self._lock = threading.Lock()

    def keep(self, caller: str, receipt: str) -> None:
        """Hold ``receipt`` until ``caller`` calls again."""
        with self._lock:
            self._receipts.setdefault(caller, []).append(receipt)

    def waiting(self, caller: str) -> int:
        """How many of ``caller``'s receipts wait for its next call."""
        with self._lock:
            return len(self._receipts.get(caller, ()))

    def callers(self) -> list[str]:
        """The callers some of whose receipts wait."""
        with self._lock:
            return [caller for caller, receipts in self._receipts.items() if receipts]

    async def acknowledge(self, caller: str) -> None:
        """``caller`` called again: spend what its earlier blocks showed.

        A receipt the database could not take stays for the call after; the call itself
        goes on either way.
        """
        with self._lock:
            receipts = self._receipts.pop(caller, [])
        failed: list[str] = []
        for receipt in receipts:
            try:
                await anyio.to_thread.run_sync(self._engine.acknowledge, receipt)
            except SQLAlchemyError:
                logger.exception("could not acknowledge a block's notices; trying again later")
                failed.append(receipt)
            except KorelyError:
                logger.exception("the engine refused a receipt it issued; dropping it")
        if failed:
            with self._lock:
                self._receipts.setdefault(caller, [])[:0] = failed

    async def acknowledge_all(self) -> None:
        """Every caller has what its blocks showed: a stdio client closed its end cleanly."""
        for caller in self.callers():
            await self.acknowledge(caller)
