"""export_user: everything about a person, as plain data, and the same rows erasure removes."""

from __future__ import annotations

import json

import pytest

from korely_memory import (
    Identity,
    InvalidRequest,
    MarkRecord,
    MemoryEngine,
    Scope,
    UserExport,
)

GIULIA_SALES = Identity("acme", "giulia", "sales-assistant")
MARCO = Identity("acme", "marco", "support-copilot")
ANNA = Identity("acme", "anna", "support-copilot")
ELSEWHERE = Identity("globex", "giulia", "support-copilot")


def people(engine: MemoryEngine, giulia: Identity) -> dict[str, int]:
    """Giulia's life in the memory, beside Marco's and another account's Giulia."""
    engine.grant_admin("acme", "anna")
    engine.grant_admin("acme", "giulia")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, "Where does Giulia live?", reader="support-bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    engine.remember(giulia, "health", "Giulia is diabetic")
    engine.forget(giulia, "health", erase=True)
    engine.remember(GIULIA_SALES, "budget", "Giulia spends up to 500 euros")
    waiting = engine.remember(giulia, "office", "Acme's office is in Turin", scope=Scope.ACCOUNT)
    refused = engine.remember(giulia, "holiday", "Acme closes in August", scope=Scope.ACCOUNT)
    engine.reject(ANNA, refused.id)
    stated = engine.remember(giulia, "hours", "Acme opens at nine", scope=Scope.ACCOUNT)
    engine.confirm(ANNA, stated.id)
    by_marco = engine.remember(MARCO, "wifi", "The wifi password is on the wall", scope="account")
    engine.confirm(giulia, by_marco.id)
    engine.add_memory(giulia, "Giulia asked about her running shoes")
    engine.add_memory(GIULIA_SALES, "Giulia asked for a discount")
    engine.remember(MARCO, "home-city", "Marco lives in Naples")
    engine.get_facts(MARCO, reader="giulia")  # a reader named after her
    engine.add_memory(MARCO, "Marco asked for an invoice")
    engine.remember(ELSEWHERE, "home-city", "Another Giulia lives in Paris")
    return {"waiting": waiting.id, "refused": refused.id, "stated": stated.id, "marco": by_marco.id}


def test_an_export_holds_every_version_memory_proposal_and_mark_about_her(
    engine: MemoryEngine,
    giulia: Identity,
) -> None:
    ids = people(engine, giulia)

    export = engine.export_user("acme", "giulia")

    assert isinstance(export, UserExport)
    assert (export.account, export.user, export.administrator) == ("acme", "giulia", True)
    assert [(f.agent, f.key, f.content) for f in export.facts] == [
        ("sales-assistant", "budget", "Giulia spends up to 500 euros"),
        ("support-copilot", "health", ""),  # erased: the version is there, its words are not
        ("support-copilot", "home-city", "Giulia lives in Rome"),
        ("support-copilot", "home-city", "Giulia lives in Milan"),
    ]
    assert {f.id: f.scope for f in export.proposals} == {
        ids["waiting"]: Scope.ACCOUNT_PROPOSED,
        ids["refused"]: Scope.ACCOUNT_REJECTED,
    }
    assert sorted(f.id for f in export.account_facts) == sorted([ids["stated"], ids["marco"]])
    assert sorted(m.content for m in export.memories) == [
        "Giulia asked about her running shoes",
        "Giulia asked for a discount",
    ]
    assert {(m.reader, m.subject) for m in export.marks} == {
        ("support-bot", "giulia"),
        ("giulia", ""),  # read under her name: Marco's facts' marks carry no text
        ("giulia", "marco"),
    }
    rome = next(m for m in export.marks if m.reader == "support-bot")
    assert isinstance(rome, MarkRecord) and rome.ended_at is not None and rome.told_at is None
    everything = json.dumps(export.to_dict())
    assert "Marco lives in Naples" not in everything and "Paris" not in everything
    assert "invoice" not in everything


def test_an_export_is_json_ready_data(engine: MemoryEngine, giulia: Identity) -> None:
    people(engine, giulia)
    data = json.loads(json.dumps(engine.export_user("acme", "giulia").to_dict()))

    assert data["format"] == "korely-user-export/1"
    home = [f for f in data["facts"] if f["key"] == "home-city"]
    assert [f["end_cause"] for f in home] == ["corrected", None]
    assert home[0]["replaced_by_id"] == home[1]["id"]
    assert home[0]["recorded_at"].endswith("+00:00")
    assert set(data) == {
        "format",
        "account",
        "user",
        "exported_at",
        "facts",
        "proposals",
        "account_facts",
        "memories",
        "marks",
        "administrator",
    }
    assert "hold_token" not in json.dumps(data["marks"])


def test_what_an_export_shows_is_what_erasure_removes(
    engine: MemoryEngine, giulia: Identity
) -> None:
    people(engine, giulia)
    shown = engine.export_user("acme", "giulia")
    report = engine.erase_user("acme", "giulia")

    after = engine.export_user("acme", "giulia")

    assert report.facts == len(shown.facts) + len(shown.proposals)
    assert report.memories == len(shown.memories)
    assert report.marks == len(shown.marks)
    assert (after.facts, after.proposals, after.account_facts, after.memories, after.marks) == (
        (),
        (),
        (),
        (),
        (),
    )
    assert not after.administrator
    assert engine.export_user("globex", "giulia").facts  # another account's Giulia stays


async def test_the_async_twin_exports_the_same(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    export = await engine.aexport_user("acme", "giulia")
    assert [f.content for f in export.facts] == ["Giulia lives in Rome"]
    assert export.facts == engine.export_user("acme", "giulia").facts


def test_an_export_of_nobody_is_empty(engine: MemoryEngine) -> None:
    export = engine.export_user("acme", "nobody")
    assert (export.facts, export.memories, export.marks, export.administrator) == (
        (),
        (),
        (),
        False,
    )


@pytest.mark.parametrize(
    ("account", "user", "field"), [("", "giulia", "account"), ("acme", "a/b", "user")]
)
def test_an_export_refuses_a_bad_name(
    engine: MemoryEngine, account: str, user: str, field: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        engine.export_user(account, user)
    assert refused.value.field == field
