"""The declared lower bounds are kept true by `.ci/lowest-direct`, which `.ci/run` and GitHub's CI
run: every distribution, with every extra, at its lowest direct versions."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency on Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LOWEST = ROOT / ".ci" / "lowest-direct"
DISTRIBUTIONS = [ROOT, *sorted(p.parent for p in (ROOT / "integrations").glob("*/pyproject.toml"))]


def project(where: Path) -> dict[str, object]:
    return tomllib.loads((where / "pyproject.toml").read_text())["project"]  # type: ignore[no-any-return]


def floors(where: Path) -> dict[str, Version]:
    """Each dependency's lower bound, its extras' too, by normalised name."""
    meta = project(where)
    every = list(meta["dependencies"])  # type: ignore[call-overload]
    for extra in meta.get("optional-dependencies", {}).values():  # type: ignore[attr-defined]
        every += extra
    found: dict[str, Version] = {}
    for line in every:
        req = Requirement(line)
        for spec in req.specifier:
            if spec.operator == ">=":
                name = re.sub(r"[-_.]+", "-", req.name).lower()
                found[name] = max(found.get(name, Version(spec.version)), Version(spec.version))
    return found


def test_the_lowest_direct_leg_installs_every_distribution_with_every_extra() -> None:
    script = LOWEST.read_text()
    assert "--resolution lowest-direct" in script
    for where in DISTRIBUTIONS:
        extras = sorted(project(where).get("optional-dependencies", {}))  # type: ignore[call-overload]
        path = "." if where == ROOT else f"./{where.relative_to(ROOT)}"
        listed = re.search(rf'-e "{re.escape(path)}\[([^\]]*)\]"', script)
        assert listed, f"{path} is not installed by .ci/lowest-direct"
        assert sorted(listed.group(1).split(",")) == extras, path


def test_ci_runs_the_lowest_direct_leg() -> None:
    assert "bash .ci/lowest-direct" in (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/lowest-direct" in (ROOT / ".github" / "workflows" / "ci.yml").read_text()


def test_no_bound_admits_a_version_known_not_to_work() -> None:
    """Versions the lowest-direct leg found broken: PyStemmer 2.2.0 does not build (2.2.0.1 has
    no wheels); click 8.1's CliRunner mixes stderr into the output the CLI tests read;
    pytest-asyncio 0.23 knows no asyncio_default_fixture_loop_scope; langgraph before 1.1.5
    fails to import beside the newest langgraph-prebuilt; llama-index-core before 0.14.24 takes
    no chat_store in Memory.from_defaults."""
    broken = {
        ROOT: {
            "pystemmer": Version("2.2.0.1"),
            "click": Version("8.1.8"),
            "pytest-asyncio": Version("0.23.8"),
        },
        ROOT / "integrations" / "langchain-korely": {"langgraph": Version("1.1.4")},
        ROOT / "integrations" / "llama-index-memory-korely": {
            "llama-index-core": Version("0.14.23")
        },
    }
    for where, known in broken.items():
        declared = floors(where)
        for name, version in known.items():
            assert declared[name] > version, (where.name, name, declared[name])
