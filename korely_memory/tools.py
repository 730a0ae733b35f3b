"""The memory tools an agent calls, defined once for every framework.

Each adapter (LangChain, LlamaIndex, MCP) wraps these definitions in its
framework's tool type and adds nothing of its own: the names, the
descriptions the model reads, the arguments, the sentences the model gets
back, and what is refused and how are all here.

    from korely_memory.tools import MEMORY_TOOLS

    result = MEMORY_TOOLS[0].run(engine, who, {"key": "home-city", "content": "..."})
    result.text, result.ok

Rules every tool follows:

- The identity comes from the run, never from the model: a call that names
  any argument besides the documented ones writes nothing.
- The tools never use an administrator's rights: correcting a confirmed
  account fact makes a proposal an administrator reviews, and forgetting one
  is refused.
- A refused call (a bad key, no fact to correct, the ceiling) returns a
  sentence the model can act on, with ``ok=False``, for the adapter to send
  as its framework's error result. A failing database returns a neutral
  sentence, never the driver's message; the error is logged.
- A bad identity is the application's mistake, not the model's: it raises.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from . import _capture
from ._engine import MemoryEngine
from ._errors import InvalidRequest, KorelyError
from ._identity import Identity, Scope
from ._render import fact_line, fold, last_day, memory_line
from ._types import Fact
from ._validation import MAX_CONTENT, MAX_KEY, MAX_MEMORY, moment_text
from .limits import check_identity, check_max_facts, check_reader

__all__ = [
    "CORRECT",
    "FORGET",
    "MEMORY_TOOLS",
    "RECALL",
    "REMEMBER",
    "SETUP_FIELDS",
    "UNREACHABLE",
    "MemoryTool",
    "ToolArgument",
    "ToolResult",
    "exchange_memories",
]

logger = logging.getLogger("korely_memory")

# What the application set, not the model: a bad value here is the application's mistake.
SETUP_FIELDS = frozenset({"who", "account", "user", "agent", "reader", "max_facts"})
UNREACHABLE = "the memory could not be reached just now; carry on without it and try again later"
KEY = (
    "A short, stable identifier of what the fact is about, e.g. 'home-city' or "
    f"'reporting-region': up to {MAX_KEY} lower-case letters, digits and - . _ : "
    "(spaces become '-'). Reuse the key a fact is already kept under."
)


@dataclass(frozen=True)
class ToolArgument:
    """One argument the model fills in."""

    name: str
    description: str
    kind: type[str] | type[bool] = str
    required: bool = True

    @property
    def default(self) -> Any:
        """The value of an optional argument the model leaves out."""
        return False if self.kind is bool else None


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returns to the model.

    ``ok`` is False for a refused or failed call: adapters send it as an error
    result of their framework (LangChain ``status="error"``, LlamaIndex
    ``is_error=True``, an MCP tool error).
    """

    text: str
    ok: bool = True


@dataclass(frozen=True)
class MemoryTool:
    """A memory tool, as every adapter offers it."""

    name: str
    description: str
    arguments: tuple[ToolArgument, ...]
    refusal: str
    """How a sentence about a call that wrote nothing begins, e.g. ``Not saved``."""
    perform: Callable[[MemoryEngine, Identity, dict[str, Any], Options], str]
    """The engine call behind the tool, given checked arguments; returns the sentence on success."""
    writes: bool = True
    """Whether a successful call changes what is kept (``recall`` only reads)."""

    def run(
        self,
        engine: MemoryEngine,
        who: Identity,
        arguments: Mapping[str, Any],
        *,
        reader: str | None = None,
        max_facts: int | None = None,
    ) -> ToolResult:
        """Run one call of the model's.

        Args:
            engine: The memory.
            who: The identity of the run (never the model's).
            arguments: What the model sent.
            reader: The agent's reader name: it is not told of its own writes.
            max_facts: Refuse a new key once ``who`` holds this many facts.

        Returns:
            The sentence for the model, and whether the call did what it asked.

        Raises:
            InvalidRequest: ``who``, ``reader`` or ``max_facts`` breaks the engine's
                rule: the application's mistake, never the model's.
        """
        check_identity(who)
        check_reader(reader)
        check_max_facts(max_facts)
        checked = self._check(arguments)
        if isinstance(checked, ToolResult):
            return checked
        try:
            text = self.perform(engine, who, checked, Options(reader, max_facts))
        except InvalidRequest as error:
            if error.field in SETUP_FIELDS:
                raise
            return ToolResult(f"{self.refusal}: {error}", ok=False)
        except KorelyError as error:
            return ToolResult(f"{self.refusal}: {error}", ok=False)
        except SQLAlchemyError:
            logger.exception("the %s tool could not reach the memory", self.name)
            return ToolResult(f"{self.refusal}: {UNREACHABLE}.", ok=False)
        return ToolResult(text)

    async def arun(
        self,
        engine: MemoryEngine,
        who: Identity,
        arguments: Mapping[str, Any],
        *,
        reader: str | None = None,
        max_facts: int | None = None,
    ) -> ToolResult:
        """Async twin of ``run``: the same call, in a worker thread."""
        return await asyncio.to_thread(
            self.run, engine, who, arguments, reader=reader, max_facts=max_facts
        )

    def _check(self, arguments: Mapping[str, Any]) -> dict[str, Any] | ToolResult:
        known = {a.name for a in self.arguments}
        other = sorted(str(name) for name in arguments if name not in known)
        if other:
            return ToolResult(
                f"{self.refusal}: this tool takes only {_listing([a.name for a in self.arguments])}"
                f", not {_listing(other)}. It always works on the memory of the person in this "
                "conversation.",
                ok=False,
            )
        checked: dict[str, Any] = {}
        for argument in self.arguments:
            value = arguments.get(argument.name, argument.default)
            if value is None and argument.required:
                return ToolResult(f"{self.refusal}: {argument.name} is required.", ok=False)
            if value is None:  # an optional argument left out, or sent as null
                value = argument.default
            if value is not None and not isinstance(value, argument.kind):
                kind = "true or false" if argument.kind is bool else "text"
                return ToolResult(f"{self.refusal}: {argument.name} must be {kind}.", ok=False)
            checked[argument.name] = value
        return checked


@dataclass(frozen=True)
class Options:
    """What the application set for a run's tools."""

    reader: str | None
    max_facts: int | None


def _until(text: str | None) -> dt.datetime | dt.date | None:
    """The model's ``until``: a date (``2026-12-15``, through that day) or an ISO 8601 time
    (without an offset, UTC).

    Raises:
        InvalidRequest: ``until`` is neither.
    """
    if text is None:
        return None
    try:
        return moment_text(text)
    except ValueError:
        raise InvalidRequest(
            "until", f"must be a date (YYYY-MM-DD) or an ISO 8601 time, not {fold(text)!r}"
        ) from None


def _in_future(write: Callable[[], Fact]) -> Fact:
    """Run ``write``; an end that is not after now is the model's ``until``, said so."""
    try:
        return write()
    except InvalidRequest as error:
        if error.field != "valid_until" or "must be after" not in str(error):
            raise
        raise InvalidRequest("until", "must be in the future") from None


def _ends(fact: Fact) -> str:
    return f" (until {last_day(fact.valid_until)})" if fact.valid_until else ""


def _remember(engine: MemoryEngine, who: Identity, args: dict[str, Any], opt: Options) -> str:
    scope = Scope.ACCOUNT if args["account_wide"] else Scope.USER
    until = _until(args["until"])
    fact = _in_future(
        lambda: engine.remember(
            who,
            args["key"],
            args["content"],
            scope=scope,
            valid_until=until,
            max_facts=opt.max_facts,
            reader=opt.reader,
        )
    )
    if fact.effective_scope is Scope.ACCOUNT_PROPOSED:
        return (
            f"Proposed {fact.key} for the whole account: {fold(fact.content)}{_ends(fact)}. An "
            "administrator reviews it; until then only this person sees it."
        )
    return f"Remembered {fact.key}: {fold(fact.content)}{_ends(fact)}"


def _correct(engine: MemoryEngine, who: Identity, args: dict[str, Any], opt: Options) -> str:
    until = _until(args["until"])
    fact = _in_future(
        lambda: engine.correct(
            who,
            args["key"],
            args["content"],
            valid_until=until,
            reader=opt.reader,
            admin_rights=False,
        )
    )
    if fact.effective_scope is Scope.ACCOUNT_PROPOSED:
        return (
            f"Proposed a correction of {fact.key}, an account fact: {fold(fact.content)}"
            f"{_ends(fact)}. It replaces the account's fact once an administrator confirms it; "
            "until then this person sees the proposal."
        )
    return f"Corrected {fact.key}: {fold(fact.content)}{_ends(fact)}"


def _forget(engine: MemoryEngine, who: Identity, args: dict[str, Any], opt: Options) -> str:
    erase = bool(args["erase"])
    fact = engine.forget(who, args["key"], erase=erase, reader=opt.reader, admin_rights=False)
    if erase:
        return f"Forgot {fact.key} and erased every version of it."
    return f"Forgot {fact.key}."


def _recall(engine: MemoryEngine, who: Identity, args: dict[str, Any], opt: Options) -> str:
    query = args["query"]
    if not any(ch.isalnum() for ch in fold(query)):
        # A search for nothing (no letter or digit once folded, as a zero-width space) would
        # answer with whatever is newest: say what to send instead.
        raise InvalidRequest("query", "must say what to look for, in a few words")
    found = engine.search(who, query, limit=RECALL_FACTS)
    if not found.facts and not found.memories:
        return f"Nothing kept is about {fold(query)!r}."
    lines = []
    if found.facts:
        lines.append("Facts kept (correct or forget one under its key):")
        lines += [fact_line(f) for f in found.facts]
    if found.memories:
        lines.append("Memories:")
        for memory in found.memories[:RECALL_MEMORIES]:
            line = memory_line(memory)
            lines.append(line if len(line) <= RECALL_CHARS else line[:RECALL_CHARS].rstrip() + "…")
    return "\n".join(lines)


RECALL_FACTS = 10
RECALL_MEMORIES = 3
RECALL_CHARS = 600

_CONTENT = ToolArgument(
    "content",
    "The fact in your own words: one or two sentences that make sense on their own, e.g. "
    f"'Giulia lives in Milan' (at most {MAX_CONTENT} characters).",
)
_UNTIL = ToolArgument(
    "until",
    "Only for a fact that holds for a while and then stops, e.g. 'Giulia is on leave until 15 "
    "December': the last day it holds (YYYY-MM-DD), or the moment it stops (ISO 8601, UTC "
    "unless it names an offset). It must be in the future. From then on the fact is no longer "
    "shown. Leave it out for a fact that holds until something changes it.",
    required=False,
)

REMEMBER = MemoryTool(
    name="remember",
    description=(
        "Keep a fact about the user for later conversations: something that will still be "
        "true and useful next time (where they live, what they look after, how they like "
        "answers). Recording under a key already in use replaces what was kept there."
    ),
    arguments=(
        ToolArgument("key", KEY),
        _CONTENT,
        ToolArgument(
            "account_wide",
            "True only when the fact is about the whole account (everyone who works in it), "
            "not this person: it is then proposed to an administrator, who confirms it before "
            "anyone else sees it.",
            kind=bool,
            required=False,
        ),
        _UNTIL,
    ),
    refusal="Not saved",
    writes=True,
    perform=_remember,
)

CORRECT = MemoryTool(
    name="correct",
    description=(
        "Correct a fact kept under a key when it was wrong or has changed. The old version is "
        "kept as history, and other agents that read it are told."
    ),
    arguments=(ToolArgument("key", KEY), _CONTENT, _UNTIL),
    refusal="Not corrected",
    writes=True,
    perform=_correct,
)

FORGET = MemoryTool(
    name="forget",
    description=(
        "Forget the fact kept under a key, when it is no longer true or the user asks you to."
    ),
    arguments=(
        ToolArgument("key", "The key of the fact that no longer holds."),
        ToolArgument(
            "erase",
            "True when the person asks that it not be kept at all (for privacy): its words "
            "are then removed from history too, not only ended.",
            kind=bool,
            required=False,
        ),
    ),
    refusal="Not forgotten",
    writes=True,
    perform=_forget,
)

RECALL = MemoryTool(
    name="recall",
    description=(
        "Look through everything kept about the user and their account, beyond the facts shown "
        "to you: facts with their keys, and notes from earlier conversations. Use it before "
        "recording a fact that may already be kept under another key, and to find the key of "
        "a fact to correct."
    ),
    arguments=(
        ToolArgument(
            "query",
            "What to look for, in plain words, e.g. 'where she lives' or 'billing plan'.",
        ),
    ),
    refusal="Not found",
    writes=False,
    perform=_recall,
)

MEMORY_TOOLS: tuple[MemoryTool, ...] = (REMEMBER, CORRECT, FORGET, RECALL)
"""The tools, in the order adapters list them."""


def exchange_memories(turns: Sequence[tuple[str, str]]) -> list[str]:
    """Memories to keep of a conversation excerpt: one per turn, none over the size limit.

    A turn is a user message and the answers that follow it; tool traffic is
    left out by the caller. A turn longer than a memory may be is split at
    paragraph breaks (or, failing that, at spaces), never truncated.

    Args:
        turns: ``(role, text)`` pairs, roles ``user`` and ``assistant``.

    Returns:
        The texts to keep, in order, each at most ``MAX_MEMORY`` characters.
    """
    grouped: list[list[str]] = []
    for role, text in turns:
        said = text.strip()
        if not said:
            continue
        if role == "user" or not grouped:
            grouped.append([])
        grouped[-1].append(_capture.said(role, said))
    pieces: list[str] = []
    for turn in grouped:
        pieces += _split("\n\n".join(turn), MAX_MEMORY)
    return pieces


def _split(text: str, size: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at a paragraph break or else at a
    space where it can."""
    pieces: list[str] = []
    while len(text) > size:
        cut = text.rfind("\n\n", 0, size)
        if cut <= 0:
            cut = text.rfind(" ", 0, size)
        if cut <= 0:
            cut = size
        pieces.append(text[:cut].strip())
        text = text[cut:].strip()
    if text:
        pieces.append(text)
    return pieces


def _listing(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
