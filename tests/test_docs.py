"""The README's first example runs, and every example is listed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_first_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S)
    assert code is not None
    out = subprocess.run(
        [sys.executable, "-c", code.group(1)], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan (" in out.stdout
    shown = out.stdout.split("## Changed since you last read")[1]
    assert "- home-city: Giulia lives in Milan (since" in shown


def test_every_example_is_listed() -> None:
    listed = (ROOT / "examples" / "README.md").read_text()
    for program in sorted((ROOT / "examples").glob("*.py")):
        assert f"`{program.name}`" in listed, program.name
