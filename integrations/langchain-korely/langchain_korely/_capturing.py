"""What a finished run gives capture: its user turn, as `(role, text)` pairs, and its thread.

A run's excerpt is its user turn: the latest user message (with the user
messages right before it) and the assistant's answers after it; tool calls and
tool results are left out, as is anything without text. Capturing it, inline or
in the background, is the engine's (`korely_memory._capturing`), shared by
every adapter.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

Pairs = tuple[tuple[str, str], ...]


def run_excerpt(messages: Sequence[AnyMessage]) -> tuple[Hashable, Pairs]:
    """The latest user turn of a run's messages: its id, and its `(role, text)` pairs."""
    users = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if not users:
        return None, ()
    start = users[-1]
    while start > 0 and isinstance(messages[start - 1], HumanMessage):
        start -= 1
    latest = messages[users[-1]]
    pairs = tuple(
        ("user" if isinstance(m, HumanMessage) else "assistant", m.text.strip())
        for m in messages[start:]
        if isinstance(m, (HumanMessage, AIMessage)) and m.text.strip()
    )
    return latest.id or ("words", latest.text), pairs


def run_turn(
    config: Mapping[str, Any], messages: Sequence[AnyMessage]
) -> tuple[Hashable | None, Hashable, Pairs]:
    """A finished run's conversation (its thread; None: a run without one), turn id and excerpt.

    A run without a thread is a conversation of its own: nothing joins its capture.
    """
    thread = (config.get("configurable") or {}).get("thread_id")
    turn, pairs = run_excerpt(messages)
    return thread, turn, pairs
