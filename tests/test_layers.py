"""The engine's imports go one way: the layers contract in pyproject.toml holds (`lint-imports`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_contract_is_kept() -> None:
    found = Path(sys.executable).with_name("lint-imports")
    command = str(found) if found.exists() else shutil.which("lint-imports")
    if command is None:
        pytest.skip("import-linter is not installed (requirements-dev.txt has it)")
    run = subprocess.run(
        [command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
