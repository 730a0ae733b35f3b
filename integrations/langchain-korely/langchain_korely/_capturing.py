"""What a finished run gives capture: its user turn, as `(role, text)` pairs, and its thread.

A run's excerpt is its user turn: the latest user message (with the user
messages right before it) and the assistant's answers after it; tool calls and
tool results are left out, as is anything without text. Of the user messages,
only the run's person's are kept (`said_by_the_person`, or the middleware's
`capture_from`): in a group chat, what others said is not the person's to
keep, nor are the assistant's answers to it (they repeat it), and a turn in
which the person said nothing is not captured. A turn in which the agent
called its `forget` tool with `erase` is not captured at all: it holds the
words the person asked to have erased. Capturing it, inline or in the
background, is the engine's (`korely_memory.capture`), shared by every
adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from korely_memory import Identity

Pairs = tuple[tuple[str, str], ...]
Speaker = Callable[[HumanMessage, Identity], bool]
"""Whether a user message is the run's person's words: called with the message and the run's
identity."""


def said_by_the_person(message: HumanMessage, who: Identity) -> bool:
    """The default `capture_from`: a user message without a `name`, or named after the
    identity's user (`HumanMessage(..., name="giulia")` for `Identity("acme", "giulia", ...)`)."""
    return message.name is None or message.name == who.user


def run_excerpt(
    messages: Sequence[AnyMessage],
    forget_tools: Collection[str] = (),
    said: Callable[[HumanMessage], bool] | None = None,
) -> tuple[Hashable, Pairs, bool]:
    """The latest user turn of a run's messages: its id, its `(role, text)` pairs (of the user
    messages, those `said` accepts; all without it), and whether the agent erased a fact in it
    (called one of `forget_tools` with `erase`).

    The assistant's answers to a user message `said` refuses are left out with it, up to the
    person's next own message: they repeat and build on what someone else said."""
    users = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if not users:
        return None, (), False
    start = users[-1]
    while start > 0 and isinstance(messages[start - 1], HumanMessage):
        start -= 1
    latest = messages[users[-1]]
    pairs: list[tuple[str, str]] = []
    answering_another = False  # the latest user message was someone else's: so is the answer
    for m in messages[start:]:
        if isinstance(m, HumanMessage):
            answering_another = said is not None and not said(m)
            if not answering_another and m.text.strip():
                pairs.append(("user", m.text.strip()))
        elif isinstance(m, AIMessage) and not answering_another and m.text.strip():
            pairs.append(("assistant", m.text.strip()))
    erased = any(
        call["name"] in forget_tools and call["args"].get("erase") not in (None, False)
        for m in messages[start:]
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    )
    return latest.id or ("words", latest.text), tuple(pairs), erased


def run_turn(
    config: Mapping[str, Any],
    messages: Sequence[AnyMessage],
    forget_tools: Collection[str] = (),
    said: Callable[[HumanMessage], bool] | None = None,
) -> tuple[Hashable | None, Hashable, Pairs, bool]:
    """A finished run's conversation (its thread; None: a run without one), turn id, excerpt,
    and whether the turn erased a fact (then nothing of it is captured).

    A run without a thread is a conversation of its own: nothing joins its capture.
    """
    thread = (config.get("configurable") or {}).get("thread_id")
    turn, pairs, erased = run_excerpt(messages, forget_tools, said)
    return thread, turn, pairs, erased
