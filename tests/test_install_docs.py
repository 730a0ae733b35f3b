"""The install commands the documentation gives are the ones `.ci/install-check` runs.

`.ci/install-check` runs each of its commands in a fresh venv (CI runs it); these tests keep the
documentation to that list, so no command is documented untried, and none installs this project's
distributions from the package index, where they are not (and where `korely-memory` is another
project with the same import name).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALL_CHECK = ROOT / ".ci" / "install-check"
INTEGRATIONS = ["langchain-korely", "llama-index-memory-korely", "korely-mcp", "korely-server"]
# Every place that tells a reader what to install.
DOCS = sorted(
    [
        *ROOT.glob("*.md"),
        *ROOT.glob("examples/*"),
        *ROOT.glob("benchmarks/*.md"),
        *ROOT.glob("tests/reliability/*.md"),
        *ROOT.glob("integrations/*/*.md"),
        *ROOT.glob("integrations/*/[!t]*/**/*.py"),  # the packages' own modules, not their tests
    ]
)
# Other projects' packages a reader may add, from the package index: the chatbots' real models,
# and the tools CONTRIBUTING.md has a contributor add (the hooks' runner, the release's builder).
ELSEWHERE = {"langchain-openai", "llama-index-llms-openai", "pre-commit", "build"}


def checks() -> dict[str, tuple[str, str]]:
    """name -> (install command, command run afterwards), as `.ci/install-check` lists them."""
    found = re.findall(
        r"^\s*'([\w-]+)\|([^|']*)\|[^|']*\|([^']*)'$", INSTALL_CHECK.read_text(), re.MULTILINE
    )
    return {name: (command, then) for name, command, then in found}


def commands(text: str, program: str) -> list[str]:
    """Each `pip install ...` (or `python -m pytest ...`) in text, run from any venv's bin/."""
    found = re.findall(rf"(?:\S*/)?({re.escape(program)} [^`\n#&;)]*)", text)
    return [" ".join(command.split()) for command in found]


def tried_by_ci() -> set[str]:
    """The installs `.ci/run` makes itself: the README's test command, in a fresh venv."""
    return set(commands((ROOT / ".ci" / "run").read_text(), "pip install"))


def test_ci_runs_the_readme_test_command() -> None:
    assert "pip install --python .venv --compile-bytecode -r requirements-dev.txt" in tried_by_ci()


def test_the_install_check_lists_every_check() -> None:
    assert set(checks()) == {
        "engine",
        "postgres",
        "langchain",
        "langchain-classic",
        "llamaindex",
        "quickstart",
        "langchain-tests",
        "llamaindex-tests",
        "mcp",
        "mcp-postgres",
        "server",
        "server-postgres",
    }


def test_every_documented_install_command_is_tried_in_a_fresh_venv() -> None:
    tried = {command for command, _ in checks().values()} | tried_by_ci()
    for doc in DOCS:
        for command in commands(doc.read_text(), "pip install"):
            if set(command.split()[2:]) <= ELSEWHERE:
                continue
            assert command in tried, (
                f"{doc.relative_to(ROOT)} documents `{command}`, which .ci/install-check does not "
                "try; add it there, or write one it tries"
            )


def test_every_tried_command_is_documented() -> None:
    documented = {c for doc in DOCS for c in commands(doc.read_text(), "pip install")}
    for name, (command, _) in checks().items():
        assert command in documented, f"{name}: `{command}` is in no README"


def test_no_document_installs_this_project_from_the_package_index() -> None:
    ours = {"korely-memory", "korely-memory-engine", *INTEGRATIONS}
    for doc in DOCS:
        for command in commands(doc.read_text(), "pip install"):
            names = {re.split(r"[\[<>=!~ ]", word.strip("\"'"))[0] for word in command.split()[2:]}
            assert not names & ours, f"{doc.relative_to(ROOT)}: `{command}`"


def test_each_integration_readme_gives_the_test_command_that_is_tried() -> None:
    tried = checks()
    named = {"langchain-korely": "langchain-tests", "llama-index-memory-korely": "llamaindex-tests"}
    for integration, check in named.items():
        readme = (ROOT / "integrations" / integration / "README.md").read_text()
        install, run = tried[check]
        assert install in commands(readme, "pip install"), integration
        assert run in commands(readme, "python -m pytest"), integration
        assert f"integrations/{integration}/tests" in run
