"""Spending a block's notices once a model has answered with them in its prompt.

A block read with ``hold=`` holds the changes it shows until its receipt is
acknowledged. Every LlamaIndex LLM call reports the messages it was given and
its answer through the instrumentation dispatcher (``LLMChatEndEvent``, and
``LLMCompletionEndEvent`` for completion models); a call that fails, or a
stream given up before its end, reports no such event. So a receipt is
acknowledged when, and only when, an answered call's prompt carried the text
the block was served as: whatever an agent, a chat engine or ``Memory`` did to
the messages on the way, the words the model got decide.

A showing ``KorelyMemory`` made is spent only once its turn is answered (the
memory stores the answer), so that a read again within the turn (after the
agent's own write) can renew its hold and tell the same changes; one a block
served in a ``Memory`` of your own is spent at the answered call.

A text matches only a showing of its own conversation: a showing the memory
made is matched by the very content block that carries it, and by its text
only when no other conversation was served the same text (two conversations
of one person read alike; an LLM that reports one call twice, as a chat and a
completion, must not spend the other's notice).

The acknowledgement is written by a small pool of worker threads, so the
event loop never waits on the database; the memory awaits it at its next
operation, so a run that returns has spent what its model was told.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from llama_index.core.base.llms.types import TextBlock
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from llama_index_instrumentation import get_dispatcher

from korely_memory import MemoryEngine

logger = logging.getLogger("llama_index.memory.korely")

_ACK_WORKERS = 4


@dataclass(eq=False)
class Showing:
    """One text a held block was served as, and the receipt that spends what it shows.

    ``carrier`` is the content block the text travels in, when the memory made
    it: a call that passes that very object on is matched by identity, so two
    identical texts of two conversations are never taken for one another.
    """

    engine: MemoryEngine
    receipt: str
    needle: str
    carrier: TextBlock | None = None
    deferred: bool = False
    """Spent when its turn is answered (``spend``), not at the call that carried it."""
    answered: bool = False
    """An answered LLM call carried it."""
    spent: Future[int] | None = field(default=None, repr=False)

    @property
    def seen(self) -> bool:
        return self.answered or self.spent is not None


_watched: weakref.WeakSet[Showing] = weakref.WeakSet()
_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_handler_installed = False


def watch(showing: Showing) -> None:
    """Acknowledge ``showing.receipt`` once an answered LLM call carries its text.

    The showing is watched while something holds it (the memory's turn does).
    """
    _install()
    with _lock:
        _watched.add(showing)


def unwatch(showings: Iterable[Showing]) -> None:
    """Stop watching: the turn these texts belong to is over."""
    with _lock:
        for showing in showings:
            _watched.discard(showing)


def spend(showings: Iterable[Showing]) -> None:
    """The turn is answered: spend what its answered calls carried."""
    with _lock:
        for showing in showings:
            if showing.answered and showing.spent is None:
                showing.spent = _pool().submit(_acknowledge, showing.engine, showing.receipt)


async def settle(showings: Iterable[Showing]) -> None:
    """Wait for the acknowledgements already under way for these showings."""
    for showing in list(showings):
        if showing.spent is not None and not showing.spent.done():
            await asyncio.wrap_future(showing.spent)


def _install() -> None:
    global _handler_installed
    with _lock:
        if not _handler_installed:
            get_dispatcher().add_event_handler(_AnsweredCalls())
            _handler_installed = True


class _AnsweredCalls(BaseEventHandler):
    """Looks for watched texts in the prompt of every LLM call that answered."""

    @classmethod
    def class_name(cls) -> str:
        return "KorelyAnsweredCalls"

    def handle(self, event: BaseEvent, **kwargs: object) -> None:
        try:
            if isinstance(event, LLMChatEndEvent) and event.response is not None:
                blocks = [
                    block
                    for message in event.messages
                    for block in message.blocks
                    if isinstance(block, TextBlock)
                ]
                _spend_shown(blocks, [block.text for block in blocks])
            elif isinstance(event, LLMCompletionEndEvent):
                _spend_shown([], [event.prompt])
        except Exception:  # the dispatcher would swallow it without a word
            logger.exception("could not check an LLM call for korely notices")


def _spend_shown(blocks: list[TextBlock], texts: list[str]) -> None:
    with _lock:
        waiting = [s for s in _watched if not s.seen]
        if not waiting:
            return
        carried = {id(block) for block in blocks}
        by_identity = [s for s in waiting if s.carrier is not None and id(s.carrier) in carried]
        claimed = {s.needle for s in by_identity}
        served: dict[str, int] = {}
        for s in _watched:
            served[s.needle] = served.get(s.needle, 0) + 1
        shown = by_identity + [
            s
            for s in waiting
            if s not in by_identity
            and s.needle not in claimed
            and (s.carrier is None or served[s.needle] == 1)
            and any(s.needle in text for text in texts)
        ]
        for showing in shown:
            showing.answered = True
            if not showing.deferred:
                showing.spent = _pool().submit(_acknowledge, showing.engine, showing.receipt)


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(_ACK_WORKERS, thread_name_prefix="korely-acknowledge")
    return _executor


def _acknowledge(engine: MemoryEngine, receipt: str) -> int:
    try:
        return engine.acknowledge(receipt)
    except Exception:
        # The hold runs out and the change is told again: at least once, never lost.
        logger.warning(
            "could not acknowledge a korely block; its changes will be told again", exc_info=True
        )
        return 0
