"""The ``remember``, ``correct`` and ``forget`` tools, as LlamaIndex ``FunctionTool``s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llama_index.core.bridge.pydantic import BaseModel, Field
from llama_index.core.tools import FunctionTool, ToolMetadata

from korely_memory import Fact, Identity, KorelyError, MemoryEngine
from korely_memory.limits import MAX_CONTENT

_KEY = (
    "A short, stable identifier of what the fact is about, e.g. 'home-city' or "
    "'reporting-region'. Lower case letters, digits and - . _ : ; spaces become '-'."
)
_CONTENT = (
    "The fact in your own words: one or two self-contained sentences, "
    f"at most {MAX_CONTENT} characters."
)


class _KeyAndContent(BaseModel):
    key: str = Field(description=_KEY)
    content: str = Field(description=_CONTENT)


class _KeyOnly(BaseModel):
    key: str = Field(description=_KEY)


def korely_tools(
    engine: MemoryEngine, identity: Identity, max_facts: int | None = None
) -> list[FunctionTool]:
    """The tools an agent uses to keep facts about the person it works for.

    ``identity`` is bound here, when the tools are made: no argument the model
    sends can change whose memory is written, and a call that names anything
    besides the documented arguments writes nothing. A refused call (a bad key,
    no fact to correct, the ``max_facts`` ceiling) comes back to the model as a
    short sentence, never as an exception.

    Args:
        engine: the engine that keeps the facts.
        identity: whose memory the tools write.
        max_facts: refuse to record a new key once this identity keeps this many facts.

    Returns:
        ``[remember, correct, forget]``.
    """

    def remember(key: str = "", content: str = "", **other: Any) -> str:
        return _attempt(
            "Not saved",
            lambda: engine.remember(identity, key, content, max_facts=max_facts),
            lambda fact: f"Remembered {fact.key}: {fact.content}",
            other,
            takes="key and content",
        )

    def correct(key: str = "", content: str = "", **other: Any) -> str:
        return _attempt(
            "Not corrected",
            lambda: engine.correct(identity, key, content),
            lambda fact: f"Corrected {fact.key}: {fact.content}",
            other,
            takes="key and content",
        )

    def forget(key: str = "", **other: Any) -> str:
        return _attempt(
            "Not forgotten",
            lambda: engine.forget(identity, key),
            lambda fact: f"Forgot {fact.key}.",
            other,
            takes="key",
        )

    return [
        _tool(
            remember,
            _KeyAndContent,
            "Keep a fact about the user for later conversations: something that will still be true "
            "and useful next time (where they live, what they look after, how they like answers). "
            "Recording under a key already in use replaces what was kept there.",
        ),
        _tool(
            correct,
            _KeyAndContent,
            "Correct a fact kept under a key when it was wrong or has changed. The old version is "
            "kept as history and other agents that read it are told.",
        ),
        _tool(
            forget,
            _KeyOnly,
            "Forget the fact kept under a key, when it is no longer true or the user asks you to.",
        ),
    ]


def _tool(fn: Callable[..., str], schema: type[BaseModel], description: str) -> FunctionTool:
    metadata = ToolMetadata(name=fn.__name__, description=description, fn_schema=schema)
    return FunctionTool(fn=fn, metadata=metadata)


def _attempt(
    refusal: str,
    write: Callable[[], Fact],
    done: Callable[[Fact], str],
    other: dict[str, Any],
    *,
    takes: str,
) -> str:
    """One tool call: what was written, or ``refusal`` and why, as a sentence for the model.

    ``other`` holds the arguments the model sent beyond the documented ones;
    any of them (a user, an account) refuses the call before anything is written.
    """
    if other:
        names = ", ".join(sorted(other))
        return (
            f"{refusal}: this tool takes only {takes}, not {names}. "
            "It always works on the memory of the person in this conversation."
        )
    try:
        fact = write()
    except KorelyError as error:
        return f"{refusal}: {error}"
    return done(fact)
