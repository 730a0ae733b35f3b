"""examples/mcp_client.py runs offline: two clients share a memory, and a change is told once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from korely_mcp import PREFIX
from korely_memory.tools import MEMORY_TOOLS

from .servers import CONFTEST

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mcp_client.py"

# Runs the example with the tests' network guard: a connection off this machine fails it.
OFFLINE = (
    "import runpy, socket, sys; "
    "socket.socket.connect = runpy.run_path(sys.argv.pop(1))['local_only'](socket.socket.connect); "
    "sys.argv.pop(0); "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)
CHANGE = "  - was: Giulia lives in Rome -> now: Giulia lives in Milan ("


def test_the_example_tells_the_laptop_of_the_phones_correction_once(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE, str(CONFTEST), str(EXAMPLE), "--db", "memory.db"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    offered = ["korely_get_context", "korely_get_facts", *(PREFIX + t.name for t in MEMORY_TOOLS)]
    assert out[0] == f"tools: {', '.join(offered)}"
    assert "  Corrected home-city: Giulia lives in Milan" in out
    assert [line.startswith(CHANGE) for line in out].count(True) == 1
    assert out[-1].startswith("  [error] Not saved: this tool takes only key, content, account")
    assert (tmp_path / "memory.db").is_file()
