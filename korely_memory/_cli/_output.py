"""How commands print: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import click

from .._values._types import Fact
from ._app import Settings

WIDEST = 100  # characters of a text shown in a table cell; JSON shows all of it


def emit(settings: Settings, value: Any, render: Callable[[], str]) -> None:
    """Print ``value`` as JSON with ``--json``, else what ``render`` writes."""
    if settings.json:
        click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=_json_ready))
    else:
        click.echo(render())


def _json_ready(value: Any) -> Any:
    """What JSON has no form of, as ``--json`` prints it: a dataclass as its public fields, a
    time in ISO 8601, an enum by its value (as the engine's exports write them)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return {f.name: getattr(value, f.name) for f in fields if not f.name.startswith("_")}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} has no JSON form")


def when(moment: dt.datetime | None) -> str:
    """A moment as a table shows it: to the minute, UTC."""
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M")


def cell(value: Any) -> str:
    """A value on one line, cut to ``WIDEST``."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return when(value)
    text = " ".join(str(value).split())
    return text if len(text) <= WIDEST else text[: WIDEST - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, empty: str) -> str:
    """Rows under their headers, columns aligned; ``empty`` when there are none."""
    if not rows:
        return f"({empty})"
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = [headers, ["-" * w for w in widths], *cells]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def pairs(values: Mapping[str, Any]) -> str:
    """Names and values, one a line."""
    width = max(len(k) for k in values)
    return "\n".join(f"{k.ljust(width)}  {cell(v)}" for k, v in values.items())


def facts_table(found: Sequence[Fact], *, versions: bool = False, empty: str = "no facts") -> str:
    """Facts as a table; with ``versions``, when each ended and why."""
    headers = ["id", "agent", "key", "content", "scope", "since", "until", "recorded"]
    if versions:
        headers += ["ended", "cause"]
    rows = []
    for f in found:
        row: list[Any] = [
            f.id,
            f.agent,
            f.key,
            f.content if not f.erased else "(erased)",
            f.effective_scope.value,
            f.valid_from,
            f.valid_until,
            f.recorded_at,
        ]
        if versions:
            row += [f.ended_recorded_at, f.end_cause.value if f.end_cause else ""]
        rows.append(row)
    return table(headers, rows, empty=empty)


def near(name: str, known: Iterable[str], *, most: int = 3) -> list[str]:
    """The names of ``known`` that ``name`` may have meant: the same but for case first, then the
    closest spellings."""
    names = sorted(set(known))
    folded = name.casefold()
    same = [n for n in names if n.casefold() == folded and n != name]
    close = difflib.get_close_matches(name, names, n=most, cutoff=0.6)
    return [*same, *(n for n in close if n not in same and n != name)][:most]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'giulia'?"`` when ``known`` holds a name close to ``name``, else ''."""
    found = near(name, known)
    return f"; did you mean {' or '.join(repr(n) for n in found)}?" if found else ""
