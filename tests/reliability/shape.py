"""The shape every context block must have, whatever text was stored."""

from __future__ import annotations

from korely_memory import ContextBlock, MemoryEngine
from korely_memory._text._render import omitted_line

CHANGED = "## Changed since you last read"
KNOWN = "## Known facts"
MEMORIES = "## Relevant memories"
HEADERS = (CHANGED, KNOWN, MEMORIES)
# Every character some reader of the text may take for the end of a line.
LINE_BREAKS = ("\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def lines_of(text: str) -> list[str]:
    for brk in LINE_BREAKS:
        text = text.replace(brk, "\n")
    return text.split("\n")


def shape_errors(block: ContextBlock, engine: MemoryEngine, budget: int) -> list[str]:
    """What is wrong with the block's layout; empty when every line is one the renderer meant."""
    errors: list[str] = []
    if block.text != block.stable + ("\n\n" + block.volatile if block.volatile else ""):
        errors.append("text is not stable + blank line + volatile")
    if block.tokens != engine.count_tokens(block.text) or block.tokens > budget:
        errors.append(
            f"tokens {block.tokens} (counted {engine.count_tokens(block.text)}, budget {budget})"
        )
    lines = lines_of(block.text)
    if lines[0] != block.stable:
        errors.append(f"first line is not the stable note: {lines[0][:80]!r}")
    items, headers = 0, []
    for line in lines[1:]:
        if line in HEADERS:
            headers.append(line)
        elif line.startswith("- "):
            items += 1
        elif line != "":
            errors.append(f"a line of its own: {line[:80]!r}")
    shown = (block.changed, block.facts or block.omitted, block.memories)
    expected = [h for h, items_of in zip(HEADERS, shown, strict=True) if items_of]
    if headers != expected:
        errors.append(f"headers {headers}, expected {expected}")
    notes = lines.count(omitted_line(block.omitted)) if block.omitted else 0
    if notes != (1 if block.omitted else 0):
        errors.append(f"{notes} lines saying {block.omitted} facts were left out")
    if items != len(block.facts) + len(block.memories) + len(block.changed) + notes:
        errors.append(
            f"{items} item lines for {len(block.facts)} facts, {len(block.memories)} memories, "
            f"{len(block.changed)} changes"
        )
    return errors
