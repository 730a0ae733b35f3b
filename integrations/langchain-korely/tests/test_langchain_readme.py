"""The adapter's README: its offline examples run, it names every tool, and what its snippets need.

A Python block runs as it is, in an empty directory with no network, unless the
line before it is `<!-- not run -->` (the mark the repository's documents use).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from korely_memory.tools import MEMORY_TOOLS
from tests.processes import run_program

HERE = Path(__file__).resolve().parents[1]
README = HERE / "README.md"
ROOT = HERE.parents[1]
NOT_RUN = "<!-- not run -->"


def python_blocks() -> list[tuple[int, str, bool]]:
    """Each ```python block of the README: its first line's number, its code, whether it runs."""
    lines = README.read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == "```python":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            runs = not (i > 0 and lines[i - 1].strip() == NOT_RUN)
            blocks.append((i + 2, "\n".join(lines[i + 1 : end]) + "\n", runs))
    return blocks


def section(title: str) -> str:
    """The README's text under a heading, up to the next heading of any level (a `#` line in a
    code block is no heading)."""
    lines, fenced, taken = README.read_text().splitlines(), False, None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#+ ", line):
            if taken is not None:
                return "\n".join(lines[taken:i])
            if line.split(" ", 1)[1] == title:
                taken = i + 1
    assert taken is not None, title
    return "\n".join(lines[taken:])


RUNNABLE = [(line, code) for line, code, runs in python_blocks() if runs]


def test_the_block_that_runs_is_that_of_the_offline_section() -> None:
    offline = section("Try it offline")
    assert len(RUNNABLE) == 1 and all(code in offline for _, code in RUNNABLE)
    assert "GenericFakeChatModel" in offline


@pytest.mark.parametrize(
    "code", [code for _, code in RUNNABLE], ids=[f"README.md:{line}" for line, _ in RUNNABLE]
)
def test_every_block_not_marked_runs_offline(code: str, tmp_path: Path) -> None:
    (tmp_path / "block.py").write_text(code)
    unset = ("KORELY_DATABASE_URL", "OPENAI_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    # Under the tests' network guard, as a program of its own.
    done = run_program(tmp_path / "block.py", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "block.py"]  # nothing left behind


def test_the_mark_is_always_right_before_a_block() -> None:
    lines = README.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == NOT_RUN:
            assert lines[i + 1].strip() == "```python", f"README.md:{i + 1}"


@pytest.mark.parametrize("where", ["An agent that remembers", "Tool names"])
def test_every_memory_tool_is_named_where_the_tools_are_listed(where: str) -> None:
    text = section(where)
    assert [t.name for t in MEMORY_TOOLS if f"`{t.name}`" not in text] == []


def test_the_install_section_names_the_package_of_the_model_the_examples_name() -> None:
    named = set(re.findall(r'"(openai|anthropic):', README.read_text()))
    install = section("Install")
    assert named and [p for p in sorted(named) if f"langchain-{p}" not in install] == []
    assert "pip install langchain-openai" in install
