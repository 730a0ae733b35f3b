"""The two reading tools, `korely_get_context` and `korely_get_facts`, as MCP describes them:
their input and output schemas.

What they take, how they page and what they say are the engine's
(`korely_memory.tools.get_context` and `get_facts`, beside the memory tools), so their text
is rendered as the context block renders stored text. Each call gives a `Reply`: the text
for the model, the structured output the tool's output schema describes, and the receipt
of the changes a block holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from korely_memory import EndCause, Scope, limits
from korely_memory.tools import (
    CONTEXT_DESCRIPTION,
    FACTS_DESCRIPTION,
    FACTS_LIMIT,
    MAX_FACTS_LIMIT,
    PAGE_TOKENS,
    ToolResult,
)
from korely_memory.tools import GET_CONTEXT as _CONTEXT
from korely_memory.tools import GET_FACTS as _FACTS

__all__ = [
    "CONTEXT_DESCRIPTION",
    "FACTS_DESCRIPTION",
    "FACTS_LIMIT",
    "GET_CONTEXT",
    "GET_FACTS",
    "MAX_FACTS_LIMIT",
    "PAGE_TOKENS",
    "Reply",
    "reply",
]

PREFIX = "korely_"
"""What the server puts before an engine tool's name (``remember`` -> ``korely_remember``)."""
GET_CONTEXT = PREFIX + _CONTEXT
GET_FACTS = PREFIX + _FACTS
CAUSES = sorted(cause.value for cause in EndCause)


@dataclass(frozen=True)
class Reply:
    """What one call of a tool gives back."""

    text: str
    ok: bool = True
    structured: dict[str, Any] | None = None
    receipt: str | None = None
    """The held changes a block showed, to acknowledge once the caller has them."""
    wrote: bool = False
    """The call changed what is kept."""


# -- what the model is told about the tools ----------------------------------------------

CONTEXT_ARGUMENTS: dict[str, Any] = {
    "query": {
        "type": "string",
        "description": "What the conversation is about now, e.g. the person's latest message: "
        "facts and memories are chosen by relevance to it.",
    },
    "token_budget": {
        "type": "integer",
        "minimum": limits.MIN_BUDGET,
        "maximum": limits.MAX_BUDGET,
        "description": f"The most tokens the answer may take ({limits.MIN_BUDGET} to "
        f"{limits.MAX_BUDGET}); leave it out for the server's default.",
    },
    "changes": {
        "anyOf": [
            {"type": "string", "enum": ["all", *CAUSES]},
            {"type": "array", "items": {"type": "string", "enum": CAUSES}},
        ],
        "description": "Which kinds of change to tell: 'all', or a list of causes such as "
        "['corrected', 'forgotten']. Leave it out for the usual ones.",
    },
}
FACTS_ARGUMENTS: dict[str, Any] = {
    "include_invalidated": {
        "type": "boolean",
        "description": "True to list every version, the ones that no longer hold too.",
    },
    "as_of": {
        "type": "string",
        "description": "A date (2026-03-01) or a date and time (2026-03-01T09:30:00Z): list the "
        "facts that were true then.",
    },
    "limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_FACTS_LIMIT,
        "description": f"The most facts to list (1 to {MAX_FACTS_LIMIT}; default {FACTS_LIMIT}).",
    },
    "cursor": {
        "type": "string",
        "description": "The cursor the last page ended with, to list the facts after it.",
    },
}

_NULLABLE_TEXT = {"type": ["string", "null"]}
CONTEXT_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "tokens": {"type": "integer"},
        "changed": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "was": _NULLABLE_TEXT,
                    "now": _NULLABLE_TEXT,
                    "day": {"type": "string", "format": "date"},
                    "cause": {"type": "string", "enum": CAUSES},
                },
                "required": ["key", "was", "now", "day", "cause"],
            },
        },
        "changed_more": {"type": ["integer", "null"]},
        "omitted": {"type": "integer"},
    },
    "required": ["text", "tokens", "changed", "changed_more", "omitted"],
}
FACTS_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "content": _NULLABLE_TEXT,
                    "scope": {"type": "string", "enum": [s.value for s in Scope]},
                    "valid_from": {"type": "string", "format": "date-time"},
                    "invalid_at": {"type": ["string", "null"], "format": "date-time"},
                    "valid_until": {"type": ["string", "null"], "format": "date-time"},
                    "recorded_at": {"type": "string", "format": "date-time"},
                    "current": {"type": "boolean"},
                    "end_cause": {"type": ["string", "null"]},
                },
                "required": ["key", "content", "scope", "valid_from", "current", "end_cause"],
            },
        },
        "more": {"type": "integer", "description": "How many facts come after this page."},
        "next_cursor": {
            "type": ["string", "null"],
            "description": "The cursor for the next page; null on the last page.",
        },
    },
    "required": ["facts", "more", "next_cursor"],
}


def reply(result: ToolResult, *, wrote: bool = False) -> Reply:
    """The engine tool's result as the server sends it."""
    return Reply(
        result.text,
        ok=result.ok,
        structured=result.structured,
        receipt=result.receipt,
        wrote=wrote and result.ok,
    )
