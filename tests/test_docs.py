"""The documents stand alone: every public name has its reference, and every Python block runs.

A name is documented in a section of a document (a ``##`` heading and what follows it up to
the next) when it is written in backticks in a heading of that section
(``### `remember` · `aremember```) or as the first cell of a table row there
(``| `MIN_BUDGET` | 50 | ... |``). ``docs/reference.md`` has one section per module and one for
``MemoryEngine``'s methods; each adapter's README has a section whose title says "reference".
Every argument is described there too: of each engine method, and of each adapter export (the
arguments the adapter declares, not those its framework's base classes bring).

A Python block of README.md or docs/ runs as it is, in an empty directory with no network, unless
the line before it is ``<!-- not run -->``.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import korely_memory
from korely_memory import Items, Listings, MemoryEngine, capture, framing, limits, sealing, tools

from .processes import run_program

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference.md"
NOT_RUN = "<!-- not run -->"
ENGINE_SECTION = "`korely_memory`"
METHODS_SECTION = "`MemoryEngine` methods"
# The parts of the engine, each with a section of its methods: engine.items, engine.listings.
PARTS = {"`Items` methods": Items, "`Listings` methods": Listings}
MODULES = {
    "limits": limits,
    "tools": tools,
    "capture": capture,
    "framing": framing,
    "sealing": sealing,
}
ADAPTERS = {
    "langchain_korely": "integrations/langchain-korely/README.md",
    "llama_index.memory.korely": "integrations/llama-index-memory-korely/README.md",
    "korely_mcp": "integrations/korely-mcp/README.md",
    "korely_server": "integrations/korely-server/README.md",
}
# Adapters whose README has no reference section yet: it comes with the adapter's own change.
NO_REFERENCE_YET: set[str] = set()

_HEADING = re.compile(r"^(#+) (.*)$")
_CODE_SPAN = re.compile(r"`([^`]+)`")
_SIGNATURE = re.compile(r"(?:await )?([A-Za-z_][\w.]*)\(")
_FIRST_CELL = re.compile(r"^\|\s*`([^`]+)`\s*\|")


def _lines_outside_code(markdown: str) -> list[tuple[str, bool]]:
    """Each line, and whether it is outside a fenced block (fences themselves count as inside)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            out.append((line, False))
        else:
            out.append((line, not fenced))
    return out


def sections(markdown: str, level: int) -> dict[str, str]:
    """The text under each heading of ``level``, up to the next heading of that level or above."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line, prose in _lines_outside_code(markdown):
        heading = _HEADING.match(line) if prose else None
        if heading and len(heading.group(1)) <= level:
            current = None
            if len(heading.group(1)) == level:
                current = found.setdefault(heading.group(2).strip(), [])
        if current is not None:
            current.append(line)
    return {title: "\n".join(lines) for title, lines in found.items()}


def headings(text: str) -> list[list[str]]:
    """The names in backticks of each heading below the first line of ``text``."""
    return [
        _CODE_SPAN.findall(line)
        for line, prose in _lines_outside_code(text)[1:]
        if prose and _HEADING.match(line)
    ]


def documented(text: str) -> set[str]:
    """The names a section documents: in backticks in its headings (a signature counts for the
    name it starts with), or first in a table row."""
    names = {name for heading in headings(text) for name in heading}
    names |= {m.group(1) for name in list(names) if (m := _SIGNATURE.match(name))}
    for line, prose in _lines_outside_code(text):
        cell = _FIRST_CELL.match(line) if prose else None
        if cell:
            names.add(cell.group(1))
    return names


def mentions(text: str, name: str) -> bool:
    """Whether ``name`` is a word of some code (a code span or a fenced block) of ``text``."""
    lines = _lines_outside_code(text)
    code = [span for line, prose in lines if prose for span in _CODE_SPAN.findall(line)]
    code += [line for line, prose in lines if not prose]
    return any(re.search(rf"\b{re.escape(name)}\b", piece) for piece in code)


def subsection(section: str, name: str) -> str:
    """The part of ``section`` under the ``###`` heading that names ``name``."""
    for title, text in sections(section, 3).items():
        if name in _CODE_SPAN.findall(title):
            return text
    raise AssertionError(f"no ### heading names `{name}`")


def reference(title: str) -> str:
    found = sections(REFERENCE.read_text(), 2)
    assert title in found, f"docs/reference.md has no section ## {title}"
    return found[title]


def public_methods(cls: type = MemoryEngine) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


# -- the reference of the engine ---------------------------------------------------------------


def test_every_name_of_the_package_has_its_reference() -> None:
    section = reference(ENGINE_SECTION)
    assert sorted(set(korely_memory.__all__) - documented(section)) == []
    stale = {n for heading in headings(section) for n in heading} - set(korely_memory.__all__)
    assert sorted(stale) == [], "headings that name nothing the package exports"


def test_every_public_method_of_the_engine_has_its_reference() -> None:
    section = reference(METHODS_SECTION)
    named = headings(section)
    assert sorted(set(public_methods()) - {n for heading in named for n in heading}) == []
    stale = {n for heading in named for n in heading} - set(public_methods())
    assert sorted(stale) == [], "headings that name no method of MemoryEngine"
    for heading in named:  # an async twin is listed with its method
        for name in heading:
            if name.startswith("a") and name[1:] in public_methods():
                assert name[1:] in heading, f"`{name}` is not listed with `{name[1:]}`"


def test_every_argument_of_the_engine_is_described() -> None:
    methods = reference(METHODS_SECTION)
    for name in public_methods():
        method = getattr(MemoryEngine, name)
        if not callable(method) or (name.startswith("a") and name[1:] in public_methods()):
            continue
        text = subsection(methods, name)
        for parameter in list(inspect.signature(method).parameters)[1:]:
            assert mentions(text, parameter), f"{name}: argument `{parameter}`"
    engine = subsection(reference(ENGINE_SECTION), "MemoryEngine")
    for parameter in list(inspect.signature(MemoryEngine.__init__).parameters)[1:]:
        assert parameter in documented(engine), f"MemoryEngine: argument `{parameter}`"


@pytest.mark.parametrize("title", sorted(PARTS))
def test_every_method_of_the_engine_s_parts_has_its_reference_with_its_arguments(
    title: str,
) -> None:
    """``engine.items``, ``engine.listings``: each method of ``Items`` and of ``Listings`` has its
    heading in its class's own section, listed with its async twin, and each of its arguments is
    described there."""
    cls = PARTS[title]
    section = reference(title)
    methods = public_methods(cls)
    named = headings(section)
    assert sorted(set(methods) - {n for heading in named for n in heading}) == []
    stale = {n for heading in named for n in heading} - set(methods)
    assert sorted(stale) == [], f"headings that name no method of {cls.__name__}"
    for heading in named:
        for name in heading:
            if name.startswith("a") and name[1:] in methods:
                assert name[1:] in heading, f"`{name}` is not listed with `{name[1:]}`"
    for name in methods:
        if name.startswith("a") and name[1:] in methods:
            continue
        text = subsection(section, name)
        for parameter in list(inspect.signature(getattr(cls, name)).parameters)[1:]:
            assert mentions(text, parameter), f"{cls.__name__}.{name}: argument `{parameter}`"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_name_of_the_public_modules_has_its_reference(module: str) -> None:
    exported = set(MODULES[module].__all__)
    section = reference(f"`korely_memory.{module}`")
    assert sorted(exported - documented(section)) == []
    stale = {n for heading in headings(section) for n in heading} - exported
    assert sorted(stale) == [], "headings that name nothing the module exports"


def _classes() -> list[object]:
    """The classes the package and ``tools`` export (``MemoryEngine`` has tests of its own)."""
    found = [(ENGINE_SECTION, n, getattr(korely_memory, n)) for n in korely_memory.__all__]
    found += [("`korely_memory.tools`", n, getattr(tools, n)) for n in tools.__all__]
    return [
        pytest.param(section, name, c, id=name)
        for section, name, c in found
        if isinstance(c, type) and c is not MemoryEngine
    ]


@pytest.mark.parametrize(("section", "name", "cls"), _classes())
def test_every_field_and_member_is_described(section: str, name: str, cls: type) -> None:
    text = reference(section)
    if issubclass(cls, BaseException):
        rows = [line for line in text.splitlines() if line.startswith(f"| `{name}` |")]
        assert rows, f"no row of the errors' table names `{name}`"
        assert f"`{cls.code}`" in rows[0], f"{name}: code {cls.code}"  # type: ignore[attr-defined]
        return
    text = subsection(text, name)
    if issubclass(cls, enum.Enum):
        for member in cls:
            assert member.name in documented(text), f"{name}.{member.name}"
            assert mentions(text, member.value), f"{name}.{member.name} = {member.value!r}"
        own = [n for n in vars(cls) if not n.startswith("_") and n not in cls.__members__]
    else:
        fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
        for field in fields:
            if not field.startswith("_"):
                assert field in documented(text), f"{name}.{field}"
        own = [n for n in vars(cls) if not n.startswith("_") and n not in fields]
    for attribute in own:
        assert mentions(text, attribute), f"{name}.{attribute}"


@pytest.mark.parametrize("tool", tools.MEMORY_TOOLS, ids=lambda t: t.name)
def test_every_tool_is_described_with_its_arguments_and_refusal(tool: tools.MemoryTool) -> None:
    (constant,) = [n for n in tools.__all__ if getattr(tools, n) is tool]
    text = subsection(reference("`korely_memory.tools`"), constant)
    assert mentions(text, tool.name)
    assert {a.name for a in tool.arguments} <= documented(text)
    assert f"`{tool.refusal}`" in text


# -- the adapters' references ------------------------------------------------------------------


def _adapter(module: str) -> object:
    if module in NO_REFERENCE_YET:
        reason = "the adapter's README gains its reference section in the adapter's own change"
        return pytest.param(module, marks=pytest.mark.xfail(strict=True, reason=reason))
    return module


def adapter_reference(module: str) -> str:
    readme = (ROOT / ADAPTERS[module]).read_text()
    found = [text for title, text in sections(readme, 2).items() if "reference" in title.lower()]
    assert found, f"{ADAPTERS[module]} has no section whose title says 'reference'"
    return found[0]


@pytest.mark.parametrize("module", [_adapter(m) for m in ADAPTERS])
def test_every_name_of_each_adapter_has_its_reference(module: str) -> None:
    package: ModuleType = pytest.importorskip(module)
    assert sorted(set(package.__all__) - documented(adapter_reference(module))) == []


def own_arguments(exported: object) -> dict[str, list[str]]:
    """What an adapter's export takes, by callable: a function's arguments; a class's own
    constructor arguments (or the fields it declares itself) and its ``from_*`` constructors'.
    What a class inherits from its framework is the framework's to document."""
    if inspect.isfunction(exported):
        return {exported.__name__: _arguments(exported)}
    if not isinstance(exported, type):
        return {}
    own = vars(exported)
    if "__init__" in own:
        found = {exported.__name__: _arguments(own["__init__"])[1:]}
    else:
        fields = getattr(exported, "model_fields", {})
        declared = own.get("__annotations__", {})
        found = {exported.__name__: [n for n in declared if n in fields]}
    for name, value in own.items():
        if name.startswith("from_") and isinstance(value, classmethod):
            found[f"{exported.__name__}.{name}"] = _arguments(value.__func__)[1:]
    return found


def _arguments(function: object) -> list[str]:
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    return [p.name for p in parameters if p.kind not in variadic]


@pytest.mark.parametrize("module", [_adapter(m) for m in ADAPTERS])
def test_every_argument_of_each_adapter_is_described(module: str) -> None:
    package: ModuleType = pytest.importorskip(module)
    text = adapter_reference(module)
    undescribed = []
    for name in package.__all__:
        for where, arguments in own_arguments(getattr(package, name)).items():
            called = where.rsplit(".", 1)[-1]  # a from_* constructor is described by name too
            undescribed += [
                f"{where}: `{a}`" for a in [called, *arguments] if not mentions(text, a)
            ]
    assert undescribed == []


# -- Python blocks -----------------------------------------------------------------------------


def python_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """Each ```python block of ``path``: its first line's number, its code, whether it runs."""
    lines = path.read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == "```python":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            runs = not (i > 0 and lines[i - 1].strip() == NOT_RUN)
            blocks.append((i + 2, "\n".join(lines[i + 1 : end]) + "\n", runs))
    return blocks


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = [
    pytest.param(code, id=f"{path.relative_to(ROOT)}:{line}")
    for path in DOCUMENTS
    for line, code, runs in python_blocks(path)
    if runs
]


@pytest.mark.parametrize("code", RUNNABLE)
def test_every_python_block_of_the_documents_runs(code: str, tmp_path: Path) -> None:
    (tmp_path / "block.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "KORELY_DATABASE_URL"}
    # Under the tests' network guard, as a program of its own.
    done = run_program(tmp_path / "block.py", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr


def test_a_block_that_does_not_run_says_so_right_before_it() -> None:
    for path in DOCUMENTS:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() == NOT_RUN:
                following = lines[i + 1].strip() if i + 1 < len(lines) else ""
                assert following == "```python", f"{path.name}:{i + 1}: {NOT_RUN} before no block"


def test_the_documents_cite_nothing_outside_the_repository() -> None:
    for path in sorted({*DOCUMENTS, *PAGES, *INTEGRATION_PAGES}):
        text = path.read_text()
        assert "SPEC" not in text and "§" not in text, path.relative_to(ROOT)
        for target, anchor in re.findall(r"\]\(([^)#]*)(?:#([^)]*))?\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            linked = path.parent / target if target else path
            assert linked.exists(), f"{path.name} links to {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in anchors(linked.read_text()), f"{path.name} links to #{anchor}"


def anchors(markdown: str) -> set[str]:
    """The fragment GitHub gives each heading of ``markdown``: lower case, spaces to hyphens,
    punctuation other than hyphens and underscores dropped."""
    titles = [
        m.group(2)
        for line, prose in _lines_outside_code(markdown)
        if prose and (m := _HEADING.match(line))
    ]
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for title in titles}


# -- the first example and the examples' list ------------------------------------------------


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


# -- one place for each text -------------------------------------------------------------------

# Every page of the project's documentation. An integration's README is its distribution's page on
# the package index and stands alone, so the integrations' READMEs are held only to the root's.
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "benchmarks" / "README.md",
    ROOT / "tests" / "reliability" / "README.md",
    ROOT / "examples" / "README.md",
]
INTEGRATION_PAGES = sorted((ROOT / "integrations").glob("*/README.md"))
COPIED = 200  # characters: a shorter paragraph may say the same thing twice
_LINK = re.compile(r"\]\([^)]*\)")
_ITEM = re.compile(r"(?:[-*]|\d+\.) ")


def paragraphs(markdown: str) -> set[str]:
    """The prose of ``markdown``, one piece per paragraph, list item and table row, whitespace
    folded and link targets dropped (a copy one folder down links to the same page otherwise)."""
    found: list[list[str]] = [[]]
    for line, prose in _lines_outside_code(markdown):
        text = line.strip()
        if not prose or not text or _HEADING.match(line):
            found.append([])
        elif text.startswith("|"):
            found += [[text], []]
        elif _ITEM.match(text):
            found.append([text])
        else:
            found[-1].append(text)
    return {_LINK.sub("]", " ".join(" ".join(piece).split())) for piece in found if piece}


def _pairs() -> list[object]:
    pairs = [(a, b) for i, a in enumerate(PAGES) for b in PAGES[i + 1 :]]
    pairs += [(ROOT / "README.md", page) for page in INTEGRATION_PAGES]
    return [pytest.param(a, b, id=f"{a.relative_to(ROOT)}~{b.relative_to(ROOT)}") for a, b in pairs]


@pytest.mark.parametrize(("one", "other"), _pairs())
def test_no_paragraph_is_copied_from_one_page_to_another(one: Path, other: Path) -> None:
    """A text kept in two places drifts: one page holds it, the other links to it."""
    long = {p for p in paragraphs(one.read_text()) if len(p) > COPIED}
    assert sorted(long & paragraphs(other.read_text())) == []


def test_a_copied_paragraph_is_found() -> None:
    text = (ROOT / "tests" / "reliability" / "README.md").read_text()
    copied = max(paragraphs(text), key=len)
    assert len(copied) > COPIED
    moved = copied.replace("](", "](../")
    assert copied in paragraphs(f"# A page\n\nIntro.\n\n{moved}\n")


# -- the README's test command -----------------------------------------------------------------


def test_the_readme_test_command_is_the_one_ci_runs_and_says_how_long_it_takes() -> None:
    section = sections((ROOT / "README.md").read_text(), 2)["Running the tests"]
    (command,) = re.findall(r"```sh\n(.*?)\n```", section, re.S)
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()
    assert re.search(r"about \d+ minutes on a quiet 2-vCPU machine", section)


# -- CONTRIBUTING.md names only what exists ----------------------------------------------------

CONTRIBUTING = ROOT / "CONTRIBUTING.md"
PLACEHOLDER = "NNNN"  # a revision's number yet to be chosen
_TOP = {p.name for p in ROOT.iterdir()} - {".git", ".venv"}
_SOURCES = ["conftest.py", "korely_memory", "tests", "benchmarks", "examples", ".ci"]
_SOURCES += ["integrations"]


def code_words(markdown: str) -> list[str]:
    """The words of the code spans and of the fenced blocks (less their shell comments)."""
    lines = _lines_outside_code(markdown)
    pieces = [span for line, prose in lines if prose for span in _CODE_SPAN.findall(line)]
    pieces += [
        line.split(" #")[0] for line, prose in lines if not prose and not line.startswith("```")
    ]
    return [word.strip("\"'(),;") for piece in pieces for word in piece.split()]


def installed_by(markdown: str) -> set[str]:
    """What ``markdown`` itself installs from the package index (``pip install NAME``)."""
    found = set()
    for command in re.findall(r"pip install ([^`\n#&;]*)", markdown):
        words = command.split()
        if not any(word.startswith(("-", ".", '"')) for word in words):
            found |= set(words)
    return found


def _source_text() -> str:
    files = [ROOT / name for name in _SOURCES if (ROOT / name).is_file()]
    for name in _SOURCES:
        if (ROOT / name).is_dir():
            files += [p for p in (ROOT / name).rglob("*") if p.is_file() and p.suffix != ".md"]
    return "\n".join(p.read_text(errors="replace") for p in files if "__pycache__" not in p.parts)


def test_every_path_the_contributing_guide_and_the_readme_cite_exists() -> None:
    for page in [CONTRIBUTING, ROOT / "README.md"]:
        for word in code_words(page.read_text()):
            word = re.sub(r"\[[^]]*\]$", "", word).removeprefix("./").rstrip(":.")
            if "/" not in word or word.split("/")[0] not in _TOP or PLACEHOLDER in word:
                continue
            assert list(ROOT.glob(word)), f"{page.name} cites {word}, which does not exist"


def test_every_file_the_contributing_guide_names_exists() -> None:
    folders = [ROOT / name for name in _SOURCES if (ROOT / name).is_dir()]
    known = {p.name for folder in folders for p in folder.rglob("*")}
    known |= {p.name for p in ROOT.iterdir()}
    for word in code_words(CONTRIBUTING.read_text()):
        if re.fullmatch(r"[\w.-]+\.(py|md|toml|txt|yml|yaml)", word) and PLACEHOLDER not in word:
            assert word in known, f"CONTRIBUTING.md names {word}, which is no file of the project"


def test_every_program_and_module_the_contributing_guide_runs_is_there() -> None:
    text = CONTRIBUTING.read_text()
    extra = installed_by(text)
    bin_dir = Path(sys.executable).parent
    # Every venv `python3 -m venv` makes has these (CI's uv-made venvs have no pip).
    extra |= {"python", "pip"}
    if sys.version_info < (3, 11):  # requirements-dev.txt has import-linter from 3.11 on
        extra.add("lint-imports")
    for program in re.findall(r"\.venv/bin/([\w-]+)", text):
        assert program in extra or (bin_dir / program).exists(), f".venv/bin/{program}"
    for module in re.findall(r"python -m ([\w.]+)", text):
        top = module.split(".")[0]
        local = (ROOT / top).is_dir() or (ROOT / f"{top}.py").is_file()
        assert module in extra or local or importlib.util.find_spec(module), f"-m {module}"


def test_every_variable_and_install_check_the_contributing_guide_names_is_used() -> None:
    text = CONTRIBUTING.read_text()
    source = _source_text()
    for variable in set(re.findall(r"\bKORELY_[A-Z_]+", text)):
        assert variable in source, f"CONTRIBUTING.md names ${variable}, which nothing reads"
    checks = set(re.findall(r"^\s*'([\w-]+)\|", (ROOT / ".ci" / "install-check").read_text(), re.M))
    for line in re.findall(r"\.ci/install-check ([\w -]+)", text):
        assert set(line.split()) <= checks, line


def test_every_version_the_release_steps_name_is_one_version_per_distribution() -> None:
    engine = re.search(r'__version__ = "([^"]+)"', (ROOT / "korely_memory/__init__.py").read_text())
    assert engine is not None and engine.group(1) == korely_memory.__version__
    mcp = ROOT / "integrations" / "korely-mcp"
    server = re.search(r'VERSION = "([^"]+)"', (mcp / "korely_mcp" / "server.py").read_text())
    assert server is not None
    assert server.group(1) == toml(mcp / "pyproject.toml")["project"]["version"]
    rest = ROOT / "integrations" / "korely-server"
    app = re.search(r'VERSION = "([^"]+)"', (rest / "korely_server" / "app.py").read_text())
    assert app is not None
    assert app.group(1) == toml(rest / "pyproject.toml")["project"]["version"]


# -- CI on a common service ----------------------------------------------------------------------

WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
CI_RUN = ROOT / ".ci" / "run"


def ci_pythons() -> set[str]:
    """The interpreters `.ci/run` looks up by version (the oldest and newest the package claims)."""
    return set(re.findall(r"^python\d+=\$\(python_of (\d\.\d+)\)$", CI_RUN.read_text(), re.M))


def test_the_workflow_runs_ci_on_every_push_and_pull_request() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert {"push", "pull_request"} <= set(triggers)

    def runs_ci(job: dict[str, Any]) -> list[int]:
        steps = job["steps"]
        return [i for i, step in enumerate(steps) if step.get("run", "").strip() == "bash .ci/run"]

    (job,) = [job for job in workflow["jobs"].values() if runs_ci(job)]
    steps = job["steps"]
    runs = runs_ci(job)
    setup = [i for i, step in enumerate(steps) if step.get("uses", "").startswith("actions/setup")]
    (python,) = [steps[i] for i in setup if "setup-python" in steps[i]["uses"]]
    assert setup and max(setup) < runs[0]
    versions = str(python["with"]["python-version"]).split()
    assert ci_pythons() == {"3.10", "3.13"}
    assert ci_pythons() <= set(versions), "python3.X that .ci/run looks up must be on PATH"
    (postgres,) = job["services"].values()
    image, version = postgres["image"].split(":")
    assert image == "postgres" and int(version.split(".")[0]) >= 15
    assert postgres["env"] == {"POSTGRES_HOST_AUTH_METHOD": "trust", "POSTGRES_DB": "test"}
    assert "5432:5432" in postgres["ports"]


# -- the distributions' metadata -----------------------------------------------------------------

PYPROJECTS = [ROOT / "pyproject.toml", *sorted((ROOT / "integrations").glob("*/pyproject.toml"))]
URLS = {"Homepage", "Documentation", "Repository", "Issues", "Changelog"}


def toml(path: Path) -> dict[str, object]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with path.open("rb") as file:
        return tomllib.load(file)


def _project(path: Path) -> dict[str, object]:
    project = toml(path)["project"]
    assert isinstance(project, dict)
    return project


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_each_distribution_names_its_project_urls_and_classifiers(path: Path) -> None:
    project = _project(path)
    repository = _project(ROOT / "pyproject.toml")["urls"]["Repository"]  # type: ignore[index]
    urls = project["urls"]
    assert isinstance(urls, dict) and set(urls) == URLS
    assert all(url.startswith(f"{repository}") for url in urls.values())
    assert re.fullmatch(r"https://github\.com/[\w-]+/[\w-]+", repository)

    classifiers = project["classifiers"]
    assert isinstance(classifiers, list)
    assert len([c for c in classifiers if c.startswith("Development Status :: ")]) == 1
    assert "Typing :: Typed" in classifiers
    assert any(c.startswith(("Topic :: ", "Framework :: ")) for c in classifiers)
    # The license is the SPDX expression of LICENSE; PEP 639 retires the License classifiers
    # (setuptools refuses a distribution that has both).
    assert project["license"] == "MIT"
    assert (path.parent / "LICENSE").read_text().startswith("MIT License")
    assert not [c for c in classifiers if c.startswith("License :: ")]
    # Every minor version from the oldest the distribution requires to the newest CI tests.
    oldest = re.fullmatch(r">=3\.(\d+)", str(project["requires-python"]))
    assert oldest is not None
    newest = max(int(v.split(".")[1]) for v in ci_pythons())
    claimed = {c.rsplit(" :: ", 1)[1] for c in classifiers if re.fullmatch(r".* :: 3\.\d+", c)}
    assert claimed == {f"3.{minor}" for minor in range(int(oldest.group(1)), newest + 1)}
