"""Who subscribed to ``korely://context``, and telling them when a memory changes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from korely_memory import Identity

logger = logging.getLogger("korely_mcp")

SEND_WAIT = 5.0  # seconds a notice may take to go out before its subscriber is dropped

Send = Callable[[], Awaitable[None]]


class Subscribers:
    """The subscriptions to ``korely://context``, by the identity whose memory they read.

    Used from the server's event loop only.
    """

    def __init__(self) -> None:
        self._sends: dict[Identity, dict[object, Send]] = {}

    def add(self, who: Identity, key: object, send: Send) -> None:
        """Tell ``key`` (a connection, a stream) of changes to ``who``'s memory with ``send``;
        adding a key again replaces what it was told of."""
        self.remove(key)
        self._sends.setdefault(who, {})[key] = send

    def remove(self, key: object) -> None:
        """Stop telling ``key``."""
        for sends in self._sends.values():
            sends.pop(key, None)

    def count(self, who: Identity) -> int:
        """How many subscribers read ``who``'s memory."""
        return len(self._sends.get(who, {}))

    async def changed(self, who: Identity) -> None:
        """What ``who`` keeps changed: tell each subscriber of that memory.

        The notices go out at once, side by side, so the write waits `SEND_WAIT` seconds
        at most however many subscribers are stuck. A subscriber whose notice cannot go
        out (its connection closed, or it reads nothing for `SEND_WAIT` seconds) is
        dropped; the write goes on either way.
        """
        await self.changed_where(lambda reads: reads == who)

    async def changed_where(self, changes: Callable[[Identity], bool]) -> None:
        """Tell, as `changed` does, each subscriber reading a memory ``changes`` says changed
        (an account fact confirmed reaches every user of the account and agent)."""

        async def tell(who: Identity, key: object, send: Send) -> None:
            try:
                with anyio.fail_after(SEND_WAIT):
                    await send()
            except Exception:  # a gone or stuck client: stop telling it, keep the write
                logger.info("a subscriber could not be told of a change; dropping it")
                self._sends.get(who, {}).pop(key, None)

        told = [
            (who, key, send)
            for who, sends in list(self._sends.items())
            if changes(who)
            for key, send in list(sends.items())
        ]
        async with anyio.create_task_group() as group:
            for who, key, send in told:
                group.start_soon(tell, who, key, send)
