"""The engine's imports go one way: the layers contract in pyproject.toml holds (`lint-imports`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _forbidden(source: str) -> dict[str, Any]:
    """The contract of pyproject.toml that forbids modules to ``source``."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "forbidden" and source in c["source_modules"]
    ]
    return dict(contract)


def test_the_integrations_may_import_no_private_package_of_the_engine() -> None:
    """Every integration's package is analysed and forbidden every private package of the
    engine, a new one too: the integrations use the public names only."""
    config = pytest.importorskip("tomllib").loads((ROOT / "pyproject.toml").read_text())
    roots = set(config["tool"]["importlinter"]["root_packages"])
    integrations = {
        ".".join(init.parent.relative_to(folder).parts)
        for folder in (ROOT / "integrations").iterdir()
        if (folder / "pyproject.toml").exists()
        for init in folder.glob("**/__init__.py")
        if "tests" not in init.parts and init.parent.name.replace("_", "-") in folder.name
    }
    assert integrations == {
        "langchain_korely",
        "llama_index.memory.korely",
        "korely_mcp",
        "korely_server",
    }
    assert integrations <= roots
    contract = _forbidden("korely_mcp")
    assert set(contract["source_modules"]) == integrations
    package = ROOT / "korely_memory"
    private = {f"korely_memory.{p.name}" for p in package.iterdir() if (p / "__init__.py").exists()}
    assert private == set(contract["forbidden_modules"])


def test_the_command_reaches_no_table_store_or_read_path() -> None:
    contract = _forbidden("korely_memory._cli")
    assert {"korely_memory._db._schema", "korely_memory._store", "korely_memory._read"} <= set(
        contract["forbidden_modules"]
    )
