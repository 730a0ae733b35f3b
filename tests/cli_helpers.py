"""Running the ``korely`` command in the test process, as a user would type it."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner, Result

from korely_memory import Identity, MemoryEngine, Scope
from korely_memory._cli import cli

MARCO = Identity("acme", "marco", "support-copilot")
TEAM = Identity("acme", None, "night-shift")


def korely(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """``korely ARGS``; the result's stdout, stderr and exit code."""
    return CliRunner(env=env).invoke(cli, list(args), input=input, catch_exceptions=False)


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def one_error(result: Result, code: str) -> str:
    """The one line an error prints, checked to name ``code``; the exit status non-zero."""
    assert result.exit_code != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"korely: {code}: "), lines[0]
    assert result.stdout == ""
    return lines[0]


def fill(url: str, giulia: Identity) -> dict[str, int]:
    """A memory with history, a proposal, an administrator, a memory and a change untold."""
    with MemoryEngine(url) as engine:
        engine.grant_admin("acme", "anna")
        first = engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.get_context(giulia, "Where does Giulia live?", reader="support-bot")
        engine.correct(giulia, "home-city", "Giulia lives in Milan")
        office = engine.remember(giulia, "office", "Acme's office is in Turin", scope=Scope.ACCOUNT)
        hours = engine.remember(MARCO, "hours", "Acme opens at nine", scope=Scope.ACCOUNT)
        engine.add_memory(giulia, "Giulia asked about her running shoes")
        engine.remember(TEAM, "handover", "Check the overnight queue first")
    return {"rome": first.id, "office": office.id, "hours": hours.id}


def without_ids(data: dict[str, Any]) -> dict[str, Any]:
    """An export's data with every id replaced by its place, so that two exports of the same
    rows under other ids compare equal; ``exported_at`` left out."""
    places: dict[int, str] = {}
    for part in ("facts", "proposals", "account_facts"):
        for i, f in enumerate(data[part]):
            places[f["id"]] = f"{part}[{i}]"
    memories = {m["id"]: f"memories[{i}]" for i, m in enumerate(data["memories"])}

    def fact(f: dict[str, Any]) -> dict[str, Any]:
        return {
            **f,
            "id": places[f["id"]],
            "replaced_by_id": places.get(f["replaced_by_id"], f["replaced_by_id"]),
            "source_memory_id": memories.get(f["source_memory_id"], f["source_memory_id"]),
        }

    marks = [{**m, "fact_id": places.get(m["fact_id"], "elsewhere")} for m in data["marks"]]
    return {
        **{k: v for k, v in data.items() if k != "exported_at"},
        **{part: [fact(f) for f in data[part]] for part in ("facts", "proposals", "account_facts")},
        "memories": [{**m, "id": memories[m["id"]]} for m in data["memories"]],
        "pending": [{**p, "id": f"pending[{i}]"} for i, p in enumerate(data.get("pending", []))],
        "marks": sorted(marks, key=lambda m: (m["reader"], m["subject"], m["first_read_at"])),
    }
