"""The ``korely`` command on facts, review, administrators, a person's data and upkeep."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest

from korely_memory import Identity, InvalidRequest, Listings, MemoryEngine
from korely_memory._db._migrations import HEAD

from .cli_helpers import MARCO, as_json, fill, korely, one_error, without_ids


def test_facts_shows_what_is_true_and_history_every_version(db_url: str, giulia: Identity) -> None:
    ids = fill(db_url, giulia)

    shown = korely("--url", db_url, "facts", "acme", "giulia", "support-copilot")
    assert shown.exit_code == 0, shown.stderr
    assert "Giulia lives in Milan" in shown.stdout and "Rome" not in shown.stdout
    assert shown.stdout.splitlines()[0].split()[:3] == ["id", "agent", "key"]

    every = korely("--url", db_url, "facts", "acme", "giulia", "support-copilot", "--history")
    assert "Giulia lives in Rome" in every.stdout and "corrected" in every.stdout

    data = as_json(korely("facts", "acme", "giulia", "support-copilot", "--json", "--url", db_url))
    assert {f["key"]: f["content"] for f in data} == {
        "home-city": "Giulia lives in Milan",
        "office": "Acme's office is in Turin",
    }
    url = ("--json", "--url", db_url)
    versions = as_json(korely(*url, "history", "acme", "giulia", "support-copilot", "home-city"))
    rome = next(f for f in versions if f["id"] == ids["rome"])
    then = as_json(
        korely(*url, "facts", "acme", "giulia", "support-copilot", "--as-of", rome["valid_from"])
    )
    assert [f["content"] for f in then if f["key"] == "home-city"] == ["Giulia lives in Rome"]


def test_history_lists_the_versions_of_a_key_and_an_empty_user_is_team_memory(
    db_url: str, giulia: Identity
) -> None:
    fill(db_url, giulia)
    versions = as_json(
        korely(
            "--json", "--url", db_url, "history", "acme", "giulia", "support-copilot", "home-city"
        )
    )
    assert [v["content"] for v in versions] == ["Giulia lives in Rome", "Giulia lives in Milan"]
    assert [v["end_cause"] for v in versions] == ["corrected", None]
    team = korely("--url", db_url, "facts", "acme", "", "night-shift")
    assert "Check the overnight queue first" in team.stdout
    none = korely("--url", db_url, "history", "acme", "giulia", "support-copilot", "no-such-key")
    assert none.exit_code == 0 and none.stdout.strip() == "(no versions)"


def test_review_lists_confirms_and_rejects_proposals(db_url: str, giulia: Identity) -> None:
    ids = fill(db_url, giulia)
    listed = korely("--url", db_url, "review", "acme")
    assert "Acme's office is in Turin" in listed.stdout and "Acme opens at nine" in listed.stdout
    assert korely("--url", db_url, "review", "list", "acme", "--agent", "other").stdout == (
        "(no proposals)\n"
    )

    refused = korely("--url", db_url, "review", "confirm", str(ids["office"]), "--as", "giulia")
    assert "not an administrator" in one_error(refused, "forbidden")
    one_error(korely("--url", db_url, "review", "confirm", "999999", "--as", "anna"), "not_found")

    confirmed = as_json(
        korely("--url", db_url, "--json", "review", "confirm", str(ids["office"]), "--as", "anna")
    )
    assert (confirmed["scope"], confirmed["confirmed_by"]) == ("account", "anna")
    rejected = as_json(
        korely("--url", db_url, "--json", "review", "reject", str(ids["hours"]), "--as", "anna")
    )
    assert (rejected["scope"], rejected["end_cause"]) == ("account_rejected", "rejected")
    assert as_json(korely("--url", db_url, "--json", "review", "acme")) == []
    with MemoryEngine(db_url) as engine:
        marco = engine.get_facts(MARCO)
    assert [f.key for f in marco] == ["office"]


def test_admins_lists_grants_and_revokes(db_url: str, giulia: Identity) -> None:
    fill(db_url, giulia)
    assert as_json(korely("--url", db_url, "--json", "admins", "acme")) == ["anna"]
    granted = korely("--url", db_url, "admins", "grant", "acme", "giulia")
    assert granted.stdout == "giulia administers acme\n"
    assert as_json(korely("--url", db_url, "--json", "admins", "list", "acme")) == [
        "anna",
        "giulia",
    ]
    revoked = as_json(korely("--url", db_url, "--json", "admins", "revoke", "acme", "anna"))
    assert revoked == {"account": "acme", "user": "anna", "administrator": False}
    assert korely("--url", db_url, "admins", "acme").stdout.split() == [
        "administrator",
        "-" * 13,
        "giulia",
    ]
    one_error(korely("--url", db_url, "admins", "grant", "acme", "a/b"), "invalid_request")


def test_export_user_prints_or_writes_a_person_s_data(
    db_url: str, tmp_path: Path, giulia: Identity
) -> None:
    fill(db_url, giulia)
    data = as_json(korely("--url", db_url, "export-user", "acme", "giulia"))
    assert data["format"] == "korely-user-export/1"
    assert [f["content"] for f in data["facts"]] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]
    assert [m["content"] for m in data["memories"]] == ["Giulia asked about her running shoes"]
    assert [(m["reader"], m["subject"]) for m in data["marks"]] == [("support-bot", "giulia")]

    target = tmp_path / "giulia.json"
    written = korely("--url", db_url, "export-user", "acme", "giulia", "-o", str(target), "--json")
    assert as_json(written)["facts"] == 2
    kept = json.loads(target.read_text())
    assert {**kept, "exported_at": None} == {**data, "exported_at": None}
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    target.chmod(0o644)
    korely("--url", db_url, "export-user", "acme", "giulia", "--output", str(target))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600


def test_erase_user_asks_first_then_prints_the_report(db_url: str, giulia: Identity) -> None:
    fill(db_url, giulia)
    declined = korely("--url", db_url, "erase-user", "acme", "giulia", input="n\n")
    assert declined.exit_code == 1 and "korely: aborted: nothing was changed" in declined.stderr
    assert as_json(korely("--url", db_url, "export-user", "acme", "giulia"))["facts"]

    erased = korely("--url", db_url, "erase-user", "acme", "giulia", input="y\n")
    assert erased.exit_code == 0, erased.stderr
    assert "Erase everything about 'giulia' in 'acme'?" in erased.stderr
    assert "facts" in erased.stdout and "pseudonym" in erased.stdout
    assert ("korely scrub" in erased.stderr) == db_url.startswith("postgresql")
    left = as_json(korely("--url", db_url, "export-user", "acme", "giulia"))
    assert (left["facts"], left["memories"], left["marks"]) == ([], [], [])

    again = as_json(korely("--url", db_url, "--json", "erase-user", "acme", "marco", "--yes"))
    assert again["account_facts_kept"] == 0 and again["facts"] == 1


def test_trim_stats_and_scrub(db_url: str, giulia: Identity) -> None:
    fill(db_url, giulia)
    before = as_json(korely("--url", db_url, "--json", "stats"))
    assert {k: before[k] for k in ("accounts", "people", "facts", "fact_versions")} == {
        "accounts": 1,
        "people": 2,
        "facts": 4,
        "fact_versions": 5,
    }
    assert (before["proposals"], before["memories"], before["marks"]) == (2, 1, 1)
    assert before["changes_untold"] == 1 and before["administrators"] == 1
    assert before["size_bytes"] > 0 and before["schema_revision"] == HEAD
    assert "people" in korely("--url", db_url, "stats").stdout

    trimmed = as_json(korely("--url", db_url, "--json", "trim", "--now", "2999-01-01"))
    assert trimmed == {"marks_expired": 1, "marks_told": 0, "facts_expired": 0, "notes": 0}
    assert "marks_expired" in korely("--url", db_url, "trim").stdout
    assert as_json(korely("--url", db_url, "--json", "stats"))["marks"] == 0

    scrubbed = korely("--url", db_url, "scrub")
    assert scrubbed.exit_code == 0 and scrubbed.stdout == "scrubbed\n"


def test_forget_ends_a_fact_and_erase_removes_its_words_and_excerpts(
    db_url: str, giulia: Identity
) -> None:
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "pet", "Giulia has a cat")
        engine.add_memory(giulia, "user: I have type 1 diabetes\n\nassistant: ok")
        engine.remember(giulia, "health", "Giulia has type 1 diabetes")
    ended = as_json(
        korely("--json", "--url", db_url, "forget", "acme", "giulia", "support-copilot", "pet")
    )
    assert (ended["key"], ended["end_cause"], ended["content"]) == (
        "pet",
        "forgotten",
        "Giulia has a cat",
    )

    where = ("--url", db_url, "forget", "acme", "giulia", "support-copilot", "health", "--erase")
    asked = korely(*where, input="n\n")
    assert asked.exit_code != 0  # an erasure is confirmed first
    erased = korely(*where, "--yes")
    assert erased.exit_code == 0, erased.stderr
    with MemoryEngine(db_url) as engine:
        assert engine.search(giulia, "diabetes") == engine.search(giulia, "nothing at all")
        assert all(v.content == "" for v in engine.history(giulia, "health"))
    missing = korely("--url", db_url, "forget", "acme", "giulia", "support-copilot", "health")
    assert "no true fact" in one_error(missing, "not_found")


# -- a name the memory never saw --------------------------------------------------------------


def test_erase_user_of_a_name_the_memory_never_saw_erases_nothing_and_fails(
    db_url: str, giulia: Identity
) -> None:
    fill(db_url, giulia)

    typo = korely("--url", db_url, "erase-user", "acme", "Giulia", "--yes")
    said = one_error(typo, "not_found")
    assert typo.exit_code == 1
    assert "nothing about 'Giulia' in 'acme'; did you mean 'giulia'?" in said
    assert "nothing erased" in said
    wrong_account = one_error(korely("--url", db_url, "erase-user", "acme2", "giulia"), "not_found")
    assert "account 'acme2'; did you mean 'acme'?" in wrong_account  # asked nothing first
    nobody = one_error(korely("--url", db_url, "erase-user", "acme", "zzz", "--yes"), "not_found")
    assert "did you mean" not in nobody
    assert as_json(korely("--url", db_url, "export-user", "acme", "giulia"))["facts"]
    assert as_json(korely("--url", db_url, "--json", "stats"))["erasures"] == 0

    erased = korely("--url", db_url, "erase-user", "acme", "giulia", "--yes")
    assert erased.exit_code == 0, erased.stderr
    again = korely("--url", db_url, "erase-user", "acme", "giulia", "--yes")
    assert "nothing about 'giulia'" in one_error(again, "not_found")
    retried = korely("--url", db_url, "--json", "erase-user", "acme", "giulia", "--missing-ok")
    assert as_json(retried) == {"account": "acme", "user": "giulia", "erased": False}


def test_admins_revoke_of_someone_not_on_the_list_fails_and_names_near_matches(
    db_url: str, giulia: Identity
) -> None:
    fill(db_url, giulia)
    typo = korely("--url", db_url, "admins", "revoke", "acme", "Anna")
    said = one_error(typo, "not_found")
    assert typo.exit_code == 1
    assert "'Anna' is not on the administrators' list of 'acme'; did you mean 'anna'?" in said
    assert as_json(korely("--url", db_url, "--json", "admins", "acme")) == ["anna"]
    assert "did you mean" not in one_error(
        korely("--url", db_url, "admins", "revoke", "globex", "anna"), "not_found"
    )


# -- who the memory holds ---------------------------------------------------------------------


def test_people_agents_and_readers_list_who_the_memory_holds_with_counts(
    db_url: str, giulia: Identity
) -> None:
    fill(db_url, giulia)
    with MemoryEngine(db_url) as engine:
        engine.remember(Identity("globex", "ivan", "support-copilot"), "pet", "Ivan has a dog")

    assert as_json(korely("--url", db_url, "--json", "people")) == [
        {"account": "acme", "user": "giulia", "facts": 2, "versions": 3, "memories": 1},
        {"account": "acme", "user": "marco", "facts": 1, "versions": 1, "memories": 0},
        {"account": "globex", "user": "ivan", "facts": 1, "versions": 1, "memories": 0},
    ]
    stats = as_json(korely("--url", db_url, "--json", "stats"))
    assert stats["people"] == 3
    assert as_json(korely("--url", db_url, "--json", "agents", "acme")) == [
        {
            "account": "acme",
            "agent": "night-shift",
            "people": 0,
            "facts": 1,
            "account_facts": 0,
            "memories": 0,
        },
        {
            "account": "acme",
            "agent": "support-copilot",
            "people": 2,
            "facts": 3,  # Milan, and the two proposals
            "account_facts": 0,
            "memories": 1,
        },
    ]
    readers = as_json(korely("--url", db_url, "--json", "readers"))
    assert [(r["reader"], r["marks"], r["people"], r["changes_untold"]) for r in readers] == [
        ("support-bot", 1, 1, 1)
    ]
    shown = korely("--url", db_url, "people", "globex").stdout.splitlines()
    assert shown[0].split() == ["account", "user", "facts", "versions", "memories"]
    assert shown[2].split() == ["globex", "ivan", "1", "1", "0"] and len(shown) == 3
    assert korely("--url", db_url, "readers", "globex").stdout == "(no readers)\n"
    one_error(korely("--url", db_url, "people", "a/b"), "invalid_request")


def test_facts_of_an_agent_no_one_wrote_under_names_the_agents_it_may_mean(
    db_url: str, giulia: Identity
) -> None:
    fill(db_url, giulia)
    typo = korely("--url", db_url, "--json", "facts", "acme", "giulia", "Support-Copilot")
    assert typo.exit_code == 0 and json.loads(typo.stdout) == []
    assert typo.stderr == (
        "korely: no agent 'Support-Copilot' holds anything in 'acme'; did you mean "
        "'support-copilot'? (korely agents acme lists them)\n"
    )
    empty = korely("--url", db_url, "facts", "acme", "nobody", "support-copilot")
    assert empty.stdout == "(no facts)\n" and empty.stderr == ""


# -- an export read back -----------------------------------------------------------------------


def test_import_user_restores_an_erased_person_from_the_export_file(
    db_url: str, tmp_path: Path, giulia: Identity
) -> None:
    fill(db_url, giulia)
    file = tmp_path / "giulia.json"
    korely("--url", db_url, "export-user", "acme", "giulia", "-o", str(file))
    first = json.loads(file.read_text())
    korely("--url", db_url, "erase-user", "acme", "giulia", "--yes")

    done = korely("--url", db_url, "--json", "import-user", str(file))

    assert as_json(done) == {
        "account": "acme",
        "user": "giulia",
        "facts": 2,
        "proposals": 1,
        "account_facts": 0,
        "memories": 1,
        "marks": 1,
        "administrator": False,
    }
    again = as_json(korely("--url", db_url, "export-user", "acme", "giulia"))
    assert without_ids(again) == without_ids(first)
    refused = korely("--url", db_url, "import-user", str(file))
    assert "user: the memory already holds data about 'giulia'" in one_error(
        refused, "invalid_request"
    )

    other = tmp_path / "other.json"
    other.write_text(json.dumps({**first, "format": "korely-user-export/9"}))
    korely("--url", db_url, "erase-user", "acme", "giulia", "--yes")
    said = one_error(korely("--url", db_url, "import-user", str(other)), "invalid_request")
    assert said.startswith("korely: invalid_request: format: is 'korely-user-export/9'")
    other.write_text("{not json")
    assert "is not JSON" in one_error(
        korely("--url", db_url, "import-user", str(other)), "invalid_request"
    )
    assert as_json(korely("--url", db_url, "export-user", "acme", "giulia"))["facts"] == []
    nobody = korely("--url", db_url, "import-user", str(file), "--pseudonym", "erased-nobody")
    assert "pseudonym: no erasure in 'acme' gave 'erased-nobody'" in one_error(
        nobody, "invalid_request"
    )


def test_what_the_command_lists_is_engine_listings_in_plain_values(
    db_url: str, giulia: Identity
) -> None:
    ids = fill(db_url, giulia)
    url = ("--url", db_url, "--json")
    with MemoryEngine(db_url) as engine:
        listings = engine.listings
        assert isinstance(listings, Listings) and engine.listings is listings
        assert as_json(korely(*url, "people")) == listings.people()
        assert as_json(korely(*url, "agents", "acme")) == listings.agents("acme")
        readers = [{**r, "last_read_at": r["last_read_at"].isoformat()} for r in listings.readers()]
        assert as_json(korely(*url, "readers")) == readers
        assert as_json(korely(*url, "admins", "acme")) == listings.admins("acme") == ["anna"]
        stats = listings.stats()
        assert {k: v for k, v in as_json(korely(*url, "stats")).items() if k != "size_bytes"} == {
            k: v for k, v in stats.items() if k != "size_bytes"
        }
        assert stats["schema_revision"] == HEAD and stats["proposals"] == 2
        assert listings.accounts() == ["acme"]
        assert listings.holds_user("acme", "giulia") and listings.holds_user("acme", "anna")
        assert not listings.holds_user("acme", "giula")
        assert not listings.holds_user("globex", "giulia")
        proposal = listings.find_fact(ids["office"])
        assert proposal is not None and (proposal.account, proposal.key) == ("acme", "office")
        assert listings.find_fact(ids["office"] + 10_000) is None
        assert asyncio.run(listings.apeople("acme")) == listings.people("acme")
        for bad in (lambda: listings.people("a/b"), lambda: listings.find_fact(-1)):
            with pytest.raises(InvalidRequest):
                bad()


async def test_each_listing_has_an_async_twin_that_reads_the_same(
    db_url: str, giulia: Identity
) -> None:
    ids = fill(db_url, giulia)
    with MemoryEngine(db_url) as engine:
        listings = engine.listings
        public = [n for n in dir(Listings) if not n.startswith("_")]
        for name in public:
            if not name.startswith("a") or name[1:] not in public:
                assert asyncio.iscoroutinefunction(getattr(Listings, "a" + name)), name
        assert await listings.aagents("acme") == listings.agents("acme")
        assert await listings.areaders() == listings.readers()
        assert await listings.aaccounts() == listings.accounts() == ["acme"]
        assert await listings.aadmins("acme") == listings.admins("acme")
        assert await listings.aholds_user("acme", "giulia") is True
        assert await listings.afind_fact(ids["office"]) == listings.find_fact(ids["office"])
        assert (await listings.astats())["proposals"] == listings.stats()["proposals"]
        with pytest.raises(InvalidRequest):
            await listings.aadmins("a/b")
        assert not any(hasattr(engine, n) for n in ("people", "apeople", "stats", "find_fact"))


def test_facts_without_an_agent_lists_the_person_s_facts_under_every_agent(
    db_url: str, giulia: Identity
) -> None:
    """``korely facts acme giulia``: what the memory keeps of Giulia, agent by agent; the
    account's facts (the agents', not hers) and other people's facts are not among them."""
    fill(db_url, giulia)
    with MemoryEngine(db_url) as engine:
        engine.remember(Identity("acme", "giulia", "billing-bot"), "plan", "Giulia pays yearly")
        engine.remember(Identity("acme", "giuliana", "billing-bot"), "plan", "Pays monthly")
        engine.remember(Identity("globex", "giulia", "support-copilot"), "city", "Lives in Oslo")
        office = next(p for p in engine.proposals("acme") if "Turin" in p.content)
        engine.confirm(Identity("acme", "anna", office.agent), office.id)
    shown = korely("--url", db_url, "facts", "acme", "giulia")
    assert shown.exit_code == 0 and shown.stderr == "", shown.stderr
    data = as_json(korely("--url", db_url, "--json", "facts", "acme", "giulia"))
    assert [(f["agent"], f["key"], f["content"]) for f in data] == [
        ("billing-bot", "plan", "Giulia pays yearly"),
        ("support-copilot", "home-city", "Giulia lives in Milan"),
    ]
    assert {f["owner"] for f in data} == {"giulia"}
    every = as_json(korely("--url", db_url, "--json", "facts", "acme", "giulia", "--history"))
    assert [f["content"] for f in every if f["key"] == "home-city"] == [
        "Giulia lives in Milan",
        "Giulia lives in Rome",
    ]
    # With the agent, as before: what that agent shows her, the account's facts too.
    with_agent = as_json(
        korely("--url", db_url, "--json", "facts", "acme", "giulia", "support-copilot")
    )
    assert "Acme's office is in Turin" in [f["content"] for f in with_agent]


def test_facts_without_an_agent_of_someone_the_memory_does_not_hold_names_the_near_ones(
    db_url: str, giulia: Identity
) -> None:
    fill(db_url, giulia)
    said = korely("--url", db_url, "facts", "acme", "Giulia")
    assert said.exit_code == 0 and said.stdout.strip() == "(no facts)"
    assert "holds nothing of 'Giulia' in 'acme'" in said.stderr and "'giulia'" in said.stderr
    refused = one_error(korely("--url", db_url, "facts", "acme", "gi/ulia"), "invalid_request")
    assert "user" in refused
