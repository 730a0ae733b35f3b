"""Keeping the block out of LangChain's events, and seeing whether it reached the model.

A chat model tells every callback handler of its run what it was given
(`on_chat_model_start`): that is what `astream_events` sends as
`on_chat_model_start`/`on_chat_model_end` and what tracers record. While the
middleware calls the model, it puts a handler of its own first among the run's
handlers. Handlers are called in order with the same list of messages (a list
made for them, not the one the model reads), so this one can note whether the
block is there and put a placeholder in its place before any other handler
sees it. The model itself reads the block; no event and no trace carries it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables.config import var_child_runnable_config

HIDDEN = "[korely memory block: given to the model, not shown in events]"


@dataclass
class Watch:
    """What one middleware needs to reach the model, and what it hides from handlers."""

    needed: tuple[str, ...]
    """Texts that must all be in a prompt for the block to count as given."""
    private: tuple[str, ...]
    """Texts no handler may see."""
    reached: int = 0
    """Model calls whose prompt held every needed text."""
    missed: int = 0
    """Model calls whose prompt lacked one."""
    missed_runs: set[UUID] = field(default_factory=set)
    """The runs of those calls."""
    missed_answers: list[BaseMessage] = field(default_factory=list)
    """What they answered: a model call answered without the block when its answer is one."""

    def saw(self, messages: Sequence[BaseMessage], run_id: UUID | None = None) -> None:
        pieces = [piece for message in messages for piece in _texts(message.content)]
        if all(any(text in piece for piece in pieces) for text in self.needed):
            self.reached += 1
        else:
            self.missed += 1
            if run_id is not None:
                self.missed_runs.add(run_id)

    def answered(self, run_id: UUID, result: LLMResult) -> None:
        if run_id in self.missed_runs:
            self.missed_answers += [
                g.message for gs in result.generations for g in gs if isinstance(g, ChatGeneration)
            ]

    def answered_without_block(self, answer: Sequence[BaseMessage]) -> bool:
        """Whether a message of `answer` (what the model call returned) is what a model call
        without the block said: another model called for its own ends (a guardrail's
        classifier, a tool selector) is not the agent's model answering."""
        said = [(m.text, getattr(m, "tool_calls", None)) for m in self.missed_answers]
        return any((m.text, getattr(m, "tool_calls", None)) in said for m in answer)


class _Screen(BaseCallbackHandler):
    """The first handler of a model call: notes what reached the model, hides the block."""

    run_inline = True  # an async run calls inline handlers first, one after the other

    def __init__(self) -> None:
        self.watches: list[Watch] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        private = [text for watch in self.watches for text in watch.private]
        for prompt in messages:
            for watch in self.watches:
                watch.saw(prompt, kwargs.get("run_id"))
            for index, message in enumerate(prompt):
                prompt[index] = _hidden(message, private)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        for watch in self.watches:
            watch.answered(run_id, response)


@contextmanager
def watching(needed: Sequence[str], private: Sequence[str]) -> Iterator[Watch]:
    """Within this block, model calls report to a `Watch` and show no `private` text.

    Several middleware share one screen per model call: the outermost puts it
    first among the run's handlers, the others add their watch to it.
    """
    config = var_child_runnable_config.get() or {}
    screen = _screen_of(config.get("callbacks"))
    token = None
    if screen is None:
        screen = _Screen()
        token = var_child_runnable_config.set(
            {**config, "callbacks": _first(screen, config.get("callbacks"))}
        )
    watch = Watch(tuple(t for t in needed if t), tuple(t for t in private if t))
    screen.watches.append(watch)
    try:
        yield watch
    finally:
        screen.watches.remove(watch)
        if token is not None:
            var_child_runnable_config.reset(token)


def _screen_of(callbacks: Any) -> _Screen | None:
    handlers = callbacks.handlers if isinstance(callbacks, BaseCallbackManager) else callbacks
    for handler in handlers or ():
        if isinstance(handler, _Screen):
            return handler
    return None


def _first(screen: _Screen, callbacks: Any) -> Any:
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.handlers = [screen, *manager.handlers]
        manager.inheritable_handlers = [screen, *manager.inheritable_handlers]
        return manager
    return [screen, *(callbacks or ())]


def _texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    for part in content or ():
        if isinstance(part, str):
            yield part
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            yield part["text"]


def _hidden(message: BaseMessage, private: Sequence[str]) -> BaseMessage:
    content = message.content
    if isinstance(content, str):
        hidden: Any = _without(content, private)
    else:
        hidden = [
            _without(part, private)
            if isinstance(part, str)
            else {**part, "text": _without(part["text"], private)}
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    if hidden == content:
        return message
    return message.model_copy(update={"content": hidden})


def _without(text: str, private: Sequence[str]) -> str:
    for secret in private:
        text = text.replace(secret, HIDDEN)
    return text
