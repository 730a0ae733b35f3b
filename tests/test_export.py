"""export_user: everything about a person, as plain data, and the same rows erasure removes."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import sqlite3
from typing import Any

import pytest
import sqlalchemy as sa

from korely_memory import (
    Fact,
    Identity,
    InvalidRequest,
    MarkRecord,
    MemoryEngine,
    Operation,
    PendingFact,
    Scope,
    UserExport,
)
from korely_memory._db._database import resolve_url

from .cli_helpers import without_ids

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
    held(engine, giulia, "pet", "Giulia has a dog called Fido", reader="support-bot")
    held(engine, MARCO, "desk", "Marco sits by the window", reader="giulia")
    return {"waiting": waiting.id, "refused": refused.id, "stated": stated.id, "marco": by_marco.id}


def held(engine: MemoryEngine, who: Identity, key: str, content: str, reader: str) -> None:
    """A fact captured and held for the person's approval."""
    report = engine.capture(
        who,
        [("user", content)],
        extractor=lambda messages, facts: [Operation("record", key, content)],
        hold_for_owner=True,
        reader=reader,
    )
    assert [s.outcome for s in report.steps] == ["held"]


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
    (pet,) = export.pending
    assert isinstance(pet, PendingFact)
    assert (pet.user, pet.operation, pet.key, pet.content, pet.reader) == (
        "giulia",
        "remember",
        "pet",
        "Giulia has a dog called Fido",
        "support-bot",
    )
    rome = next(m for m in export.marks if m.reader == "support-bot")
    assert isinstance(rome, MarkRecord) and rome.ended_at is not None and rome.told_at is None
    everything = json.dumps(export.to_dict())
    assert "Marco lives in Naples" not in everything and "Paris" not in everything
    assert "invoice" not in everything and "window" not in everything


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
        "notes",
        "items",
        "pending",
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
    assert report.pending == len(shown.pending) == 1
    assert (
        after.facts,
        after.proposals,
        after.account_facts,
        after.memories,
        after.marks,
        after.pending,
    ) == ((), (), (), (), (), ())
    (marcos,) = engine.pending(MARCO)  # Marco's stays, no longer naming her as its reader
    assert marcos.content == "Marco sits by the window" and marcos.reader is None
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


# -- import_user: an export read back ----------------------------------------------------------


def test_an_export_erased_then_imported_exports_the_same_again(
    engine: MemoryEngine, giulia: Identity
) -> None:
    people(engine, giulia)
    engine.add_memory(giulia, "Giulia moved to Milan in May")
    first = engine.export_user("acme", "giulia").to_dict()
    file = json.loads(json.dumps(first))  # as a file gives it back
    erased = engine.erase_user("acme", "giulia")

    restored = engine.import_user(file, pseudonym=erased.pseudonym, administrator=True)

    again = engine.export_user("acme", "giulia").to_dict()
    assert without_ids(again) == without_ids(first)
    assert without_ids(restored.to_dict()) == without_ids(first)
    assert {f["id"] for f in again["facts"]}.isdisjoint({f["id"] for f in first["facts"]})
    milan = engine.get_context(giulia, "Where does Giulia live?").text
    assert "Giulia lives in Milan" in milan and "Rome" not in milan
    assert [m.content for m in engine.search_memories(giulia, "moved Milan")] == [
        "Giulia moved to Milan in May"
    ]
    assert engine.is_admin("acme", "giulia")


def counts(engine: MemoryEngine) -> dict[str, int]:
    """How many rows each of the memory's tables holds."""
    with engine.db.connect() as conn:
        names = sa.inspect(conn).get_table_names()
        return {
            n: conn.execute(sa.text(f'SELECT count(*) FROM "{n}"')).scalar_one()
            for n in sorted(names)
            if n.startswith("korely_")
        }


def damaged(data: dict[str, Any], change: str) -> dict[str, Any]:
    broken = copy.deepcopy(data)
    if change == "format":
        broken["format"] = "korely-user-export/2"
    elif change == "no-format":
        del broken["format"]
    elif change == "key":
        broken["facts"][1]["key"] = "Home City"
    elif change == "time":
        broken["facts"][0]["recorded_at"] = "yesterday"
    elif change == "someone-else":
        broken["memories"][0]["owner"] = "marco"
    elif change == "two-true":
        broken["facts"][2]["ended_recorded_at"] = broken["facts"][2]["end_cause"] = None
    elif change == "last-mark":
        broken["marks"][-1]["first_read_at"] = None
    elif change == "held-operation":
        broken["pending"][0]["operation"] = "erase"
    elif change == "held-for-another":
        broken["pending"][0]["user"] = "marco"
    return broken


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("format", "format"),
        ("no-format", "format"),
        ("key", "facts[1].key"),
        ("time", "facts[0].recorded_at"),
        ("someone-else", "memories[0]"),
        ("two-true", "facts"),
        ("last-mark", "marks[3].first_read_at"),
        ("held-operation", "pending[0].operation"),
        ("held-for-another", "pending[0]"),
    ],
)
def test_an_import_refuses_a_file_it_cannot_trust_by_field_and_changes_nothing(
    engine: MemoryEngine, giulia: Identity, change: str, field: str
) -> None:
    people(engine, giulia)
    data = engine.export_user("acme", "giulia").to_dict()
    engine.erase_user("acme", "giulia")
    before = counts(engine)

    with pytest.raises(InvalidRequest) as refused:
        engine.import_user(damaged(json.loads(json.dumps(data)), change))

    assert refused.value.field == field
    if field == "format":
        assert "korely-user-export/1" in refused.value.message
    assert counts(engine) == before


def test_an_import_never_writes_over_a_person_the_memory_holds(
    engine: MemoryEngine, giulia: Identity
) -> None:
    people(engine, giulia)
    data = engine.export_user("acme", "giulia")
    before = counts(engine)

    with pytest.raises(InvalidRequest) as refused:
        engine.import_user(data)  # a UserExport is taken as it is, too

    assert refused.value.field == "user" and "already holds" in refused.value.message
    assert counts(engine) == before
    engine.erase_user("acme", "giulia")
    engine.add_memory(giulia, "Giulia came back")  # one memory is enough to refuse
    with pytest.raises(InvalidRequest):
        engine.import_user(data)


def test_an_import_into_another_database_restores_her_own_rows(
    engine: MemoryEngine, giulia: Identity, tmp_path: Any
) -> None:
    people(engine, giulia)
    data = engine.export_user("acme", "giulia").to_dict()
    with MemoryEngine(f"sqlite:///{tmp_path}/other.db") as other:
        restored = other.import_user(data)
        assert [f.content for f in restored.facts] == [f["content"] for f in data["facts"]]
        assert len(restored.proposals) == 2 and len(restored.memories) == 2
        # The account's facts are not hers to bring, nor are marks of versions not there.
        assert restored.account_facts == ()
        assert [m.reader for m in restored.marks] == ["support-bot"]
        assert [p.content for p in other.pending(giulia)] == ["Giulia has a dog called Fido"]
        assert other.proposals("acme") == [
            f for f in restored.proposals if f.scope == Scope.ACCOUNT_PROPOSED
        ]


def test_a_failure_half_way_through_an_import_leaves_the_database_as_it_was(
    sqlite_url: str, giulia: Identity
) -> None:
    with MemoryEngine(sqlite_url) as engine:
        people(engine, giulia)
        data = engine.export_user("acme", "giulia").to_dict()
        engine.erase_user("acme", "giulia")
        before = counts(engine)
    database = sqlite3.connect(resolve_url(sqlite_url).database or "")
    database.execute(  # the last rows an import writes are marks and the grant
        "CREATE TRIGGER refuse BEFORE INSERT ON korely_admins BEGIN SELECT RAISE(ABORT, 'no'); END"
    )
    database.commit()
    database.close()
    with MemoryEngine(sqlite_url) as engine:
        with pytest.raises(sa.exc.IntegrityError):
            engine.import_user(data, administrator=True)
        assert counts(engine) == before
        assert engine.export_user("acme", "giulia").facts == ()


async def test_the_async_twin_imports_the_same(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    data = engine.export_user("acme", "giulia").to_dict()
    engine.erase_user("acme", "giulia")
    restored = await engine.aimport_user(data)
    assert [f.content for f in restored.facts] == ["Giulia lives in Rome"]


# -- an import trusts the file with the person's own rows only ---------------------------------


def as_file(fact: Fact) -> dict[str, Any]:
    """A fact as an export file writes it."""
    return json.loads(json.dumps(dataclasses.asdict(fact), default=_json_value))


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value.value


def test_a_file_alone_names_nobody_on_the_account_s_facts_and_grants_nothing(
    engine: MemoryEngine,
) -> None:
    alice, mallory = Identity("acme", "alice", "bot"), Identity("acme", "mallory", "bot")
    engine.grant_admin("acme", "boss")
    office = engine.confirm(
        Identity("acme", "boss", "bot"),
        engine.remember(alice, "office", "Acme's office is in Berlin", scope=Scope.ACCOUNT).id,
    )
    alice_gone = engine.erase_user("acme", "alice")
    engine.remember(mallory, "pet", "Mallory has a cat")
    data = engine.export_user("acme", "mallory").to_dict()
    mallory_gone = engine.erase_user("acme", "mallory")
    # Mallory edits her file: Alice's erased account fact is hers, and she administers.
    claimed = {**as_file(engine.get_facts(alice)[0]), "owner": "mallory"}
    data = {**data, "account_facts": [claimed], "administrator": True}
    before = counts(engine)

    with pytest.raises(InvalidRequest) as refused:
        engine.import_user(data, pseudonym="erased-0000000000000000")
    assert refused.value.field == "pseudonym"
    assert counts(engine) == before

    restored = engine.import_user(data, pseudonym=mallory_gone.pseudonym)

    assert [f.content for f in restored.facts] == ["Mallory has a cat"]
    assert restored.account_facts == () and not restored.administrator
    assert not engine.is_admin("acme", "mallory")
    (kept,) = engine.get_facts(Identity("acme", "boss", "bot"))
    assert (kept.id, kept.owner) == (office.id, alice_gone.pseudonym)


def test_an_import_links_no_version_of_the_account_that_is_not_ended_and_theirs(
    engine: MemoryEngine,
) -> None:
    alice, mallory = Identity("acme", "alice", "bot"), Identity("acme", "mallory", "bot")
    engine.grant_admin("acme", "boss")
    office = engine.confirm(
        Identity("acme", "boss", "bot"),
        engine.remember(alice, "office", "Acme's office is in Berlin", scope=Scope.ACCOUNT).id,
    )
    engine.remember(mallory, "pet", "Mallory has a cat")
    data = engine.export_user("acme", "mallory").to_dict()
    gone = engine.erase_user("acme", "mallory")
    # Alice's true account fact, said to be Mallory's and replaced by Mallory's own fact.
    claimed = {**as_file(office), "owner": "mallory", "replaced_by_id": data["facts"][0]["id"]}

    engine.import_user({**data, "account_facts": [claimed]}, pseudonym=gone.pseudonym)

    (kept,) = engine.get_facts(alice)
    assert (kept.id, kept.owner, kept.replaced_by_id) == (office.id, "alice", None)


def test_an_import_writes_no_mark_into_another_person_s_data(engine: MemoryEngine) -> None:
    carol, mallory = Identity("acme", "carol", "bot"), Identity("acme", "mallory", "bot")
    carols = engine.remember(carol, "home-city", "Carol lives in Oslo")
    pet = engine.remember(mallory, "pet", "Mallory has a cat")
    engine.get_facts(mallory, reader="support-bot")
    data = engine.export_user("acme", "mallory").to_dict()
    engine.erase_user("acme", "mallory")
    (genuine,) = data["marks"]
    forged = [
        {**genuine, "reader": "someone", "subject": "carol"},  # her version, said to be Carol's
        {**genuine, "reader": "mallory", "fact_id": carols.id},  # Carol's, said to be hers
    ]
    before = engine.export_user("acme", "carol").marks

    restored = engine.import_user({**data, "marks": [genuine, *forged]})

    assert [(m.reader, m.subject) for m in restored.marks] == [("support-bot", "mallory")]
    assert engine.export_user("acme", "carol").marks == before
    assert pet.content == restored.facts[0].content


def test_an_id_past_what_the_database_keeps_is_refused_by_name(engine: MemoryEngine) -> None:
    engine.remember(Identity("acme", "mallory", "bot"), "pet", "Mallory has a cat")
    data = engine.export_user("acme", "mallory").to_dict()
    engine.erase_user("acme", "mallory")
    data["facts"][0]["id"] = 10**30

    with pytest.raises(InvalidRequest) as refused:
        engine.import_user(data)

    assert refused.value.field == "facts[0].id" and str(2**63 - 1) in refused.value.message
