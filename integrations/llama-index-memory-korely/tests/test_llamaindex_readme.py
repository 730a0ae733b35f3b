"""The README's python blocks run, offline, as a reader would paste them."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.processes import run_program

PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parents[1]
README = PACKAGE / "README.md"
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


@pytest.mark.parametrize(
    "code", [pytest.param(c, id=f"README.md:{n}") for n, c, runs in python_blocks() if runs]
)
def test_every_python_block_of_the_readme_runs(code: str, tmp_path: Path) -> None:
    (tmp_path / "block.py").write_text(code)
    # Offline: the first example picks OpenAI when a key is set.
    env = {
        k: v for k, v in os.environ.items() if k not in ("KORELY_DATABASE_URL", "OPENAI_API_KEY")
    }
    # Under the tests' network guard, as a program of its own.
    done = run_program(tmp_path / "block.py", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    if "engine.get_facts(who)" in code:  # the first example: the fact it kept
        assert "Giulia lives in Milan" in done.stdout


def test_the_readme_names_every_tool() -> None:
    from korely_memory.tools import MEMORY_TOOLS

    text = README.read_text()
    head = text[: text.index("## Behaviour worth knowing")]
    for tool in MEMORY_TOOLS:
        assert re.search(rf"`{tool.name}`", head), tool.name
