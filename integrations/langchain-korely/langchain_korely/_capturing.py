"""What a finished run gives capture: its user turn, as `(role, text)` pairs, and its thread.

A run's excerpt is its user turn: the latest user message (with the user
messages right before it) and the assistant's answers after it; tool calls and
tool results are left out, as is anything without text. A turn in which the
agent called its `forget` tool with `erase` is not captured at all: it holds
the words the person asked to have erased. Capturing it, inline or
in the background, is the engine's (`korely_memory._capturing`), shared by
every adapter.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

Pairs = tuple[tuple[str, str], ...]


def run_excerpt(
    messages: Sequence[AnyMessage], forget_tools: Collection[str] = ()
) -> tuple[Hashable, Pairs, bool]:
    """The latest user turn of a run's messages: its id, its `(role, text)` pairs, and whether
    the agent erased a fact in it (called one of `forget_tools` with `erase`)."""
    users = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if not users:
        return None, (), False
    start = users[-1]
    while start > 0 and isinstance(messages[start - 1], HumanMessage):
        start -= 1
    latest = messages[users[-1]]
    pairs = tuple(
        ("user" if isinstance(m, HumanMessage) else "assistant", m.text.strip())
        for m in messages[start:]
        if isinstance(m, (HumanMessage, AIMessage)) and m.text.strip()
    )
    erased = any(
        call["name"] in forget_tools and call["args"].get("erase") not in (None, False)
        for m in messages[start:]
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    )
    return latest.id or ("words", latest.text), pairs, erased


def run_turn(
    config: Mapping[str, Any], messages: Sequence[AnyMessage], forget_tools: Collection[str] = ()
) -> tuple[Hashable | None, Hashable, Pairs, bool]:
    """A finished run's conversation (its thread; None: a run without one), turn id, excerpt,
    and whether the turn erased a fact (then nothing of it is captured).

    A run without a thread is a conversation of its own: nothing joins its capture.
    """
    thread = (config.get("configurable") or {}).get("thread_id")
    turn, pairs, erased = run_excerpt(messages, forget_tools)
    return thread, turn, pairs, erased
