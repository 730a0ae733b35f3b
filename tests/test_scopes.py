"""Who sees which fact, and the administrator's review of account facts.

The rules are in docs/concepts.md, "Identity and scopes".
"""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa

from korely_memory import (
    AlreadyDecided,
    Identity,
    InvalidRequest,
    MemoryEngine,
    NotCurrent,
    PermissionDenied,
    Scope,
)

from .helpers import snapshot

MARCO = Identity("acme", "marco", "support-copilot")
TEAM = Identity("acme", None, "support-copilot")
ADMIN = Identity("acme", "anna", "support-copilot")

# Giulia writes. (case, scope, how it is reviewed, who reads: what differs from Giulia, sees it?)
VISIBILITY = [
    ("user fact, its own identity", "user", None, {}, True),
    ("user fact, another person", "user", None, {"user": "marco"}, False),
    ("user fact, another agent definition", "user", None, {"agent": "sales-copilot"}, False),
    ("user fact, another account", "user", None, {"account": "globex"}, False),
    ("user fact, agent-team memory", "user", None, {"user": None}, False),
    ("proposal, its owner", "account", None, {}, True),
    ("proposal, another person", "account", None, {"user": "marco"}, False),
    ("confirmed, its owner", "account", "confirm", {}, True),
    ("confirmed, another person", "account", "confirm", {"user": "marco"}, True),
    ("confirmed, agent-team memory", "account", "confirm", {"user": None}, True),
    (
        "confirmed, another agent definition",
        "account",
        "confirm",
        {"agent": "sales-copilot"},
        False,
    ),
    ("confirmed, another account", "account", "confirm", {"account": "globex"}, False),
    ("rejected, its owner", "account", "reject", {}, False),
    ("rejected, another person", "account", "reject", {"user": "marco"}, False),
]


@pytest.mark.parametrize(
    "case, scope, review, reader, sees", VISIBILITY, ids=[c[0] for c in VISIBILITY]
)
def test_visibility(
    engine: MemoryEngine,
    giulia: Identity,
    case: str,
    scope: str,
    review: str | None,
    reader: dict[str, str | None],
    sees: bool,
) -> None:
    engine.grant_admin("acme", "anna")
    fact = engine.remember(giulia, "loyalty", "The account runs a loyalty program", scope=scope)
    if review:
        getattr(engine, review)(ADMIN, fact.id)
    shown = [f.id for f in engine.get_facts(dataclasses.replace(giulia, **reader))]
    assert shown == ([fact.id] if sees else [])


def test_team_memory_is_shared_by_the_agent_definition(
    engine: MemoryEngine, giulia: Identity
) -> None:
    fact = engine.remember(TEAM, "escalation", "Escalate outages to on-call")
    assert fact.owner is None
    assert [f.id for f in engine.get_facts(Identity("acme", None, "support-copilot"))] == [fact.id]
    assert engine.get_facts(giulia) == []


def test_users_own_fact_wins_over_the_account_fact(engine: MemoryEngine, giulia: Identity) -> None:
    engine.grant_admin("acme", "anna")
    shared = engine.confirm(
        ADMIN, engine.remember(MARCO, "timezone", "Everyone works in CET", scope="account").id
    )
    own = engine.remember(giulia, "timezone", "Giulia works in EST")
    assert [f.id for f in engine.get_facts(giulia)] == [own.id]
    assert [f.id for f in engine.get_facts(MARCO)] == [shared.id]


def test_a_fact_said_again_beside_the_account_fact_that_replaced_it_is_no_change(
    engine: MemoryEngine, giulia: Identity
) -> None:
    """Giulia's fact, replaced by her proposal for the account and then said again in the same
    words: to her it is true again (hers hides the account's), so a reader handed it hears of no
    change, whatever kinds of change it asks for."""
    engine.grant_admin("acme", "anna")
    rome = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="bot")
    proposal = engine.remember(giulia, "home-city", "Giulia lives in Turin", scope="account")
    assert engine.history(giulia, "home-city")[0].replaced_by_id == proposal.id
    engine.confirm(ADMIN, proposal.id)
    again = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    assert [f.id for f in engine.get_facts(giulia)] == [again.id] != [rome.id]
    block = engine.get_context(giulia, reader="bot", changes="all")
    assert block.changed == () and block.changed_more in (0, None)
    assert engine.trim().marks_told == 1  # its mark was spent without a word


def test_confirming_changes_the_row_in_place_and_keeps_the_owner(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    proposal = engine.remember(giulia, "loyalty", "Loyalty program", scope=Scope.ACCOUNT)
    assert proposal.scope is Scope.ACCOUNT_PROPOSED
    confirmed = engine.confirm(ADMIN, proposal.id)
    assert confirmed.id == proposal.id and confirmed.scope is Scope.ACCOUNT
    assert (confirmed.owner, confirmed.confirmed_by) == (
        "giulia",
        "anna",
    ) and confirmed.confirmed_at


def test_rejecting_ends_the_row_and_keeps_it(engine: MemoryEngine, giulia: Identity) -> None:
    engine.grant_admin("acme", "anna")
    proposal = engine.remember(giulia, "loyalty", "Loyalty program", scope="account")
    rejected = engine.reject(ADMIN, proposal.id)
    assert rejected.scope is Scope.ACCOUNT_REJECTED and rejected.end_cause == "rejected"
    assert not rejected.is_current and rejected.confirmed_by == "anna"
    assert [f.id for f in engine.history(giulia, "loyalty")] == [proposal.id]
    assert engine.proposals("acme") == []


@pytest.mark.parametrize("first", ["confirm", "reject"])
@pytest.mark.parametrize("then", ["confirm", "reject"])
def test_a_review_is_decided_once_and_a_second_changes_nothing(
    engine: MemoryEngine, giulia: Identity, first: str, then: str
) -> None:
    engine.grant_admin("acme", "anna")
    proposal = engine.remember(giulia, "loyalty", "Loyalty program", scope="account")
    getattr(engine, first)(ADMIN, proposal.id)
    before = snapshot(engine)
    with pytest.raises(AlreadyDecided) as caught:
        getattr(engine, then)(ADMIN, proposal.id)
    decided = "confirmed" if first == "confirm" else "rejected"
    assert (caught.value.code, caught.value.decision) == ("already_decided", decided)
    assert caught.value.fact_id == proposal.id and "by anna" in caught.value.message
    assert snapshot(engine) == before


@pytest.mark.parametrize("verb", ["confirm", "reject"])
def test_review_by_a_non_administrator_is_refused_and_changes_nothing(
    engine: MemoryEngine, verb: str, giulia: Identity
) -> None:
    proposal = engine.remember(giulia, "loyalty", "Loyalty program", scope="account")
    before = snapshot(engine)
    for who in (MARCO, giulia, Identity("globex", "anna", "support-copilot")):
        with pytest.raises(PermissionDenied) as caught:
            getattr(engine, verb)(who, proposal.id)
        assert caught.value.code == "forbidden"
    engine.grant_admin("globex", "anna")  # an administrator of another account
    with pytest.raises((PermissionDenied, LookupError)):
        getattr(engine, verb)(Identity("globex", "anna", "support-copilot"), proposal.id)
    engine.revoke_admin("globex", "anna")
    assert snapshot(engine) == before


def test_revoked_administrator_may_not_review(engine: MemoryEngine, giulia: Identity) -> None:
    engine.grant_admin("acme", "anna")
    assert engine.is_admin("acme", "anna")
    engine.revoke_admin("acme", "anna")
    proposal = engine.remember(giulia, "loyalty", "Loyalty program", scope="account")
    with pytest.raises(PermissionDenied):
        engine.confirm(ADMIN, proposal.id)


def test_application_is_admin_callable_decides(db_url: str, giulia: Identity) -> None:
    with MemoryEngine(db_url, is_admin=lambda account, user: user == "root") as eng:
        proposal = eng.remember(giulia, "loyalty", "Loyalty program", scope="account")
        with pytest.raises(PermissionDenied):
            eng.confirm(ADMIN, proposal.id)
        assert eng.confirm(Identity("acme", "root", "x"), proposal.id).scope is Scope.ACCOUNT


def test_proposals_lists_the_queue(engine: MemoryEngine, giulia: Identity) -> None:
    a = engine.remember(giulia, "loyalty", "Loyalty program", scope="account")
    b = engine.remember(MARCO, "hours", "Support is open 9-17", scope="account")
    c = engine.remember(
        Identity("acme", "marco", "sales-copilot"), "quota", "Quota is 10", scope="account"
    )
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(
        Identity("globex", "x", "support-copilot"), "k", "other account", scope="account"
    )
    assert [f.id for f in engine.proposals("acme")] == [a.id, b.id, c.id]
    assert [f.id for f in engine.proposals("acme", agent="sales-copilot")] == [c.id]
    engine.grant_admin("acme", "anna")
    engine.confirm(ADMIN, a.id)
    assert [f.id for f in engine.proposals("acme")] == [b.id, c.id]


def test_confirming_a_proposal_replaces_the_confirmed_account_fact(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    old = engine.confirm(ADMIN, engine.remember(giulia, "hours", "Open 9-17", scope="account").id)
    new = engine.confirm(ADMIN, engine.remember(MARCO, "hours", "Open 8-18", scope="account").id)
    assert [f.id for f in engine.get_facts(giulia)] == [new.id]
    ended = next(f for f in engine.history(giulia, "hours") if f.id == old.id)
    assert ended.replaced_by_id == new.id and ended.end_cause == "stated"


def test_reviewing_an_ended_fact_says_what_replaced_it(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    first = engine.remember(giulia, "loyalty", "Loyalty program", scope="account")
    second = engine.correct(giulia, "loyalty", "Loyalty program, gold tier")
    with pytest.raises(NotCurrent) as caught:
        engine.confirm(ADMIN, first.id)
    assert caught.value.current_fact_id == second.id and caught.value.code == "fact_not_current"


def test_a_user_fact_is_not_a_proposal(engine: MemoryEngine, giulia: Identity) -> None:
    engine.grant_admin("acme", "anna")
    fact = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    with pytest.raises(InvalidRequest) as caught:
        engine.confirm(ADMIN, fact.id)
    assert caught.value.field == "fact_id"


def test_only_an_administrator_corrects_an_account_fact(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.grant_admin("acme", "anna")
    shared = engine.confirm(
        ADMIN, engine.remember(giulia, "hours", "Open 9-17", scope="account").id
    )
    with pytest.raises(PermissionDenied):
        engine.correct(MARCO, "hours", "Open 8-18")
    with pytest.raises(PermissionDenied):
        engine.forget(MARCO, "hours")
    fixed = engine.correct(ADMIN, "hours", "Open 8-18")
    assert fixed.scope is Scope.ACCOUNT and fixed.confirmed_by == "anna"
    assert [f.content for f in engine.get_facts(MARCO)] == ["Open 8-18"]
    assert engine.history(MARCO, "hours")[0].id == shared.id


def test_a_null_scope_reads_as_user(engine: MemoryEngine, giulia: Identity) -> None:
    with engine.db.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO korely_facts (account, owner, owner_key, agent, key, content, scope,"
                " valid_from, recorded_at, created_at, modified_at)"
                " VALUES ('acme', 'giulia', 'giulia', 'support-copilot',"
                " 'legacy', 'Written before scopes', NULL, :t, :t, :t, :t)"
            ),
            {"t": "2026-01-01 00:00:00"},
        )
    (fact,) = engine.get_facts(giulia)
    assert fact.scope is None and fact.effective_scope is Scope.USER
    assert engine.get_facts(MARCO) == []
    corrected = engine.correct(giulia, "legacy", "Corrected")
    assert corrected.effective_scope is Scope.USER
    assert [f.content for f in engine.get_facts(giulia)] == ["Corrected"]
