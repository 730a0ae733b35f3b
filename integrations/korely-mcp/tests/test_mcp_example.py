"""examples/mcp_client.py runs offline: two clients share a memory, and a change is told once."""

from __future__ import annotations

from pathlib import Path

from korely_mcp import PREFIX
from korely_memory.tools import MEMORY_TOOLS
from tests.processes import run_program

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mcp_client.py"

CHANGE = "  - was: Giulia lives in Rome -> now: Giulia lives in Milan ("


def test_the_example_tells_the_laptop_of_the_phones_correction_once(tmp_path: Path) -> None:
    # Under the tests' network guard: a connection off this machine fails it.
    done = run_program(EXAMPLE, "--db", "memory.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    offered = ["korely_get_context", "korely_get_facts", *(PREFIX + t.name for t in MEMORY_TOOLS)]
    assert out[0] == f"tools: {', '.join(offered)}"
    assert "  Corrected home-city: Giulia lives in Milan" in out
    assert [line.startswith(CHANGE) for line in out].count(True) == 1
    assert out[-1].startswith("  [error] Not saved: this tool takes only key, content, account")
    assert (tmp_path / "memory.db").is_file()
