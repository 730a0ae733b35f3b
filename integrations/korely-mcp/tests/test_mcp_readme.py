"""The MCP README says what the server does: its tool table, and how account facts are decided."""

from __future__ import annotations

import re
from pathlib import Path

from korely_mcp import KorelyTools
from korely_memory import MemoryEngine
from korely_memory._cli import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_the_tool_table_lists_every_tool_with_its_title(sqlite_url: str) -> None:
    rows = re.findall(r"^\| `(korely_\w+)` \| ([^|]+) \|", README, flags=re.M)
    with MemoryEngine(sqlite_url) as engine:
        offered = [(t.name, t.title) for t in KorelyTools(engine).definitions()]
    assert [(name, title.strip()) for name, title in rows] == offered
    # What the table says of notes matches the tools: none of them keeps one.
    assert "No MCP tool keeps memories of conversations" in README


def test_the_account_fact_commands_it_shows_are_the_korely_command_s() -> None:
    shown = re.findall(r"^korely --url \S+ (\w+) (\w+)", README, flags=re.M)
    assert ("review", "confirm") in shown and ("review", "reject") in shown
    for group, command in shown:
        found = cli.commands[group]
        assert command == "acme" or command in getattr(found, "commands", {}), (group, command)
