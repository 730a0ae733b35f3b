"""The engine's imports go one way: the layers contract in pyproject.toml holds (`lint-imports`)."""

from __future__ import annotations

import re
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


def _contract_layers() -> list[list[str]]:
    """The layers of the engine's contract in pyproject.toml, top first, each as its parts."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 or later, as import-linter
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (engine,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c.get("containers") == ["korely_memory"] and c["type"] == "layers"
    ]
    return [[part.strip() for part in re.split(r"[|:]", layer)] for layer in engine["layers"]]


def test_every_folder_of_the_engine_is_a_layer_of_the_contract() -> None:
    """The folders are the layers: every package of korely_memory is one layer's part, and the
    flat modules beside them are only the public ones (and ``__main__``)."""
    parts = {part for layer in _contract_layers() for part in layer}
    package = ROOT / "korely_memory"
    folders = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in package.glob("*.py")} - {"__init__"}
    assert folders <= parts, f"packages in no layer: {sorted(folders - parts)}"
    assert not {m for m in modules if m.startswith("_") and m != "__main__"}, (
        "a private module outside the layers' folders"
    )


def test_contributing_describes_the_layers_in_the_contracts_order() -> None:
    """CONTRIBUTING.md draws the layers once, in the contract's order: each folder of the
    contract is named in its "How the code is laid out" list, top layer first."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    laid_out = text[text.index("## How the code is laid out") :]
    folders = [
        part
        for layer in _contract_layers()
        for part in layer
        if part.startswith("_") and part != "__main__"
    ]
    where = [laid_out.find(f"`{folder}/`") for folder in folders]
    assert -1 not in where, dict(zip(folders, where, strict=True))
    assert where == sorted(where), f"CONTRIBUTING names the folders out of order: {folders}"
