"""The context block: a pure function from rows, a budget and a token counter to text.

Nothing here does I/O. The engine hands over the candidates in priority order
(facts and memories by relevance, changes newest first); ``render`` decides
what fits, in the order SPEC §5 gives the room, and records what it left out.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .identity import Scope
from .tokens import TokenCounter
from .types import Change, ContextBlock, Fact, Memory

STABLE = (
    "_Standing facts kept between conversations about the people you work for and their account. "
    "A newer fact replaces an older one; say so when one is wrong._"
)
CHANGED = "## Changed since you last read"
KNOWN = "## Known facts"
MEMORIES = "## Relevant memories"
FORGOTTEN_MEMORY = "a fact whose memory was forgotten"
ELLIPSIS = "…"
MAX_CHANGES = 3
LONG_CHANGE = 60  # tokens; a longer change line is shortened
SHORT_SIDE = 80  # characters kept of each side of a shortened change
FIRST_MEMORY_NEED = 48  # tokens of the first memory the changes never take
CAUSES = {"read_from_memory": "read from a memory"}

_SPACE = re.compile(r"\s+")
MAX_CACHED = 2000  # characters: texts up to a fact's length are cached


def fold(text: str) -> str:
    """One line: control characters, line and paragraph separators become spaces."""
    # Facts are read again and again; long memories are not worth keeping.
    return _fold_cached(text) if len(text) <= MAX_CACHED else _fold(text)


def _fold(text: str) -> str:
    if text.isprintable():
        return _SPACE.sub(" ", text).strip()
    cleaned = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text
    )
    return _SPACE.sub(" ", cleaned).strip()


_fold_cached = functools.lru_cache(maxsize=16_384)(_fold)


def forget_cached_text() -> None:
    """Drop every stored text this module keeps for speed (after an erasure)."""
    _fold_cached.cache_clear()
    _fact_line.cache_clear()


def fact_line(fact: Fact) -> str:
    return _fact_line(fact.key, fact.content, fact.scope is Scope.ACCOUNT, fact.valid_from)


@functools.lru_cache(maxsize=16_384)
def _fact_line(key: str, content: str, shared: bool, since: dt.datetime) -> str:
    label = f"{key} (account)" if shared else key
    return f"- {label}: {fold(content)} (since {since:%Y-%m-%d})"


def said(fact: Fact) -> str:
    return fold(fact.content) or FORGOTTEN_MEMORY


def change_line(change: Change, short: bool = False) -> str:
    def side(f: Fact) -> str:
        text = said(f)
        return text[:SHORT_SIDE] + ELLIPSIS if short and len(text) > SHORT_SIDE else text

    tail = f"({change.day:%Y-%m-%d}, {CAUSES.get(change.cause, change.cause)})"
    if change.now is None:
        return f"- no longer true: {side(change.was)} {tail}"
    return f"- was: {side(change.was)} -> now: {side(change.now)} {tail}"


def memory_line(memory: Memory) -> str:
    return f"- {memory.created_at:%Y-%m-%d}: {fold(memory.content)}"


def display_order(fact: Fact) -> tuple[int, str]:
    return (0 if fact.effective_scope is Scope.ACCOUNT else 1, fact.key)


@dataclass
class _Pick:
    facts: list[tuple[Fact, str]]
    changes: list[tuple[Change, str]]
    memories: list[tuple[Memory, str]]


def render(
    *,
    facts: Sequence[Fact],
    memories: Sequence[Memory],
    changes: Sequence[Change],
    budget: int,
    count: TokenCounter,
    changed_more: int | None = 0,
    rank: Callable[[Sequence[Fact]], Sequence[Fact]] | None = None,
    waiting: bool | None = None,
) -> ContextBlock:
    """Fit the candidates to ``budget`` tokens.

    ``facts`` come newest first; ``rank`` reorders them by relevance, and is
    called only when they do not all fit. ``changed_more`` counts pending
    changes beyond ``changes``. Facts keep half the room when ``waiting``
    (default: a memory or a change is there to be shown).
    """
    if waiting is None:
        waiting = bool(memories or changes)
    pick = _choose(facts, memories, changes, budget, count, rank, waiting)
    while True:
        segments = _segments(pick)
        tokens = count.total(segments)
        if tokens <= budget or not _drop_one(pick):
            break
    text = "".join(segments)
    volatile = text[len(STABLE) + 2 :] if len(text) > len(STABLE) else ""
    shown = sorted((f for f, _ in pick.facts), key=display_order)
    more = None if changed_more is None else changed_more + len(changes) - len(pick.changes)
    return ContextBlock(
        text=text,
        tokens=tokens,
        stable=STABLE,
        volatile=volatile,
        facts=tuple(shown),
        memories=tuple(m for m, _ in pick.memories),
        changed=tuple(c for c, _ in pick.changes),
        changed_more=more,
        omitted=len(facts) - len(pick.facts),
    )


def _choose(
    facts: Sequence[Fact],
    memories: Sequence[Memory],
    changes: Sequence[Change],
    budget: int,
    count: TokenCounter,
    rank: Callable[[Sequence[Fact]], Sequence[Fact]] | None,
    waiting: bool,
) -> _Pick:
    def cost(line: str) -> int:
        return count(line + "\n")

    def header(title: str) -> int:
        return cost(title) + 1  # the blank line that ends a section

    left = budget - count(STABLE + "\n\n")

    fact_room = left // 2 if waiting else left
    chosen: list[tuple[Fact, str]] = []
    used = header(KNOWN)
    lines = {id(fact): fact_line(fact) for fact in facts}
    costs = {i: cost(line) for i, line in lines.items()}
    if rank is not None and used + sum(costs.values()) > fact_room:
        facts = rank(facts)
    for fact in facts:
        c = costs[id(fact)]
        if used + c <= fact_room:
            chosen.append((fact, lines[id(fact)]))
            used += c
    share = left - (used if chosen else 0)

    told: list[tuple[Change, str]] = []
    if changes:
        room = share
        if memories:
            first = min(cost(memory_line(memories[0])), FIRST_MEMORY_NEED) + header(MEMORIES)
            room = min(share // 2, share - first)
        used = header(CHANGED)
        for change in changes:
            if len(told) == MAX_CHANGES:
                break
            line = change_line(change)
            if cost(line) > LONG_CHANGE:
                line = change_line(change, short=True)
            if used + cost(line) <= room:
                told.append((change, line))
                used += cost(line)
        share -= used if told else 0

    kept: list[tuple[Memory, str]] = []
    used = header(MEMORIES)
    for memory in memories:
        line = memory_line(memory)
        if used + cost(line) <= share:
            kept.append((memory, line))
            used += cost(line)
            continue
        cut = _cut(line, share - used, cost)
        if cut is not None:
            kept.append((memory, cut))
        break
    return _Pick(chosen, told, kept)


def _cut(line: str, room: int, cost: Callable[[str], int]) -> str | None:
    """The longest prefix of ``line`` that, ended with '…', costs at most ``room``."""
    lo, hi = len("- 2026-01-01: ") + 1, len(line) - 1
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = line[:mid].rstrip() + ELLIPSIS
        if cost(candidate) <= room:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def _segments(pick: _Pick) -> list[str]:
    """The text as pieces that end at line breaks, so each can be counted on its own."""
    sections: list[list[str]] = []
    if pick.changes:
        sections.append([CHANGED, *(line for _, line in pick.changes)])
    if pick.facts:
        sections.append(
            [KNOWN, *(line for _, line in sorted(pick.facts, key=lambda p: display_order(p[0])))]
        )
    if pick.memories:
        sections.append([MEMORIES, *(line for _, line in pick.memories)])
    segments = [STABLE]
    for section in sections:
        segments[-1] += "\n\n"
        for i, line in enumerate(section):
            segments.append(line)
            if i < len(section) - 1:
                segments[-1] += "\n"
    return segments


def _drop_one(pick: _Pick) -> bool:
    """Give up the least needed item; False when nothing is left to give up."""
    for items in (pick.memories, pick.changes, pick.facts):
        if items:
            items.pop()
            return True
    return False
