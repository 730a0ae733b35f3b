"""Keyed, versioned facts: recording, replacing, correcting, forgetting, history."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine, NotFound, Scope


def count_rows(engine: MemoryEngine) -> int:
    with engine.db.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM korely_facts")).scalar_one()


def test_recording_a_new_key_makes_one_true_fact(engine: MemoryEngine, giulia: Identity) -> None:
    fact = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    assert (fact.key, fact.content, fact.owner, fact.scope) == (
        "home-city",
        "Giulia lives in Rome",
        "giulia",
        Scope.USER,
    )
    assert fact.is_current and fact.invalid_at is None and fact.end_cause is None
    assert fact.effective_scope is Scope.USER
    assert [f.id for f in engine.get_facts(giulia)] == [fact.id]


def test_recording_same_key_replaces_and_keeps_history(
    engine: MemoryEngine, giulia: Identity
) -> None:
    rome = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    milan = engine.remember(giulia, "home-city", "Giulia lives in Milan")
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Milan"]
    old, new = engine.history(giulia, "home-city")
    assert old.id == rome.id and new.id == milan.id
    assert old.end_cause == "stated" and old.replaced_by_id == milan.id
    assert old.invalid_at is not None and old.ended_recorded_at is not None
    assert (
        new.is_current and new.created_at == rome.created_at and new.modified_at >= rome.modified_at
    )


def test_recording_same_content_again_writes_nothing(
    engine: MemoryEngine, giulia: Identity
) -> None:
    first = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    again = engine.remember(giulia, " Home City ", "  Giulia lives in Rome ")
    assert again == first
    assert count_rows(engine) == 1


@pytest.mark.parametrize("verb, cause", [("correct", "corrected"), ("forget", "forgotten")])
def test_correct_and_forget_end_with_their_cause(
    engine: MemoryEngine, verb: str, cause: str, giulia: Identity
) -> None:
    rome = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    if verb == "correct":
        result = engine.correct(giulia, "home-city", "Giulia lives in Milan")
        assert result.content == "Giulia lives in Milan" and result.is_current
        assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Milan"]
    else:
        result = engine.forget(giulia, "home-city")
        assert result.id == rome.id and not result.is_current
        assert engine.get_facts(giulia) == []
    ended = engine.history(giulia, "home-city")[0]
    assert ended.end_cause == cause and ended.invalid_at is not None


@pytest.mark.parametrize("verb", ["correct", "forget"])
def test_correct_and_forget_need_a_true_fact(
    engine: MemoryEngine, verb: str, giulia: Identity
) -> None:
    args = ("home-city", "x") if verb == "correct" else ("home-city",)
    with pytest.raises(NotFound):
        getattr(engine, verb)(giulia, *args)
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.forget(giulia, "home-city")
    with pytest.raises(NotFound) as caught:
        getattr(engine, verb)(giulia, *args)
    assert caught.value.code == "not_found"


def test_history_lists_every_version_oldest_first(engine: MemoryEngine, giulia: Identity) -> None:
    for city in ("Rome", "Florence", "Milan"):
        engine.remember(giulia, "home-city", f"Giulia lives in {city}")
    engine.forget(giulia, "home-city")
    engine.remember(giulia, "home-city", "Giulia lives in Turin")
    history = engine.history(giulia, "home-city")
    assert [f.content.split()[-1] for f in history] == ["Rome", "Florence", "Milan", "Turin"]
    assert [f.end_cause for f in history] == ["stated", "stated", "forgotten", None]
    assert history[0].replaced_by_id == history[1].id
    assert history[2].replaced_by_id is None


def test_two_keys_are_independent(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(giulia, "plan", "Giulia uses the Pro plan")
    engine.forget(giulia, "plan")
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


def test_database_refuses_two_true_rows_for_one_key(engine: MemoryEngine, giulia: Identity) -> None:
    fact = engine.remember(giulia, "home-city", "Giulia lives in Rome")
    with pytest.raises(sa.exc.IntegrityError), engine.db.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO korely_facts (account, owner, owner_key, agent, key, content, scope,"
                " valid_from, recorded_at, created_at, modified_at)"
                " SELECT account, owner, owner_key, agent, key, 'dup', scope, valid_from,"
                " recorded_at, created_at, modified_at FROM korely_facts WHERE id = :id"
            ),
            {"id": fact.id},
        )


def test_database_refuses_two_true_account_facts_for_one_key(
    engine: MemoryEngine, giulia: Identity
) -> None:
    admin = Identity("acme", "boss", "support-copilot")
    engine.grant_admin("acme", "boss")
    fact = engine.confirm(
        admin, engine.remember(giulia, "loyalty", "Loyalty program", scope="account").id
    )
    with pytest.raises(sa.exc.IntegrityError), engine.db.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO korely_facts (account, owner, owner_key, agent, key, content, scope,"
                " valid_from, recorded_at, created_at, modified_at)"
                " SELECT account, 'other', 'other', agent, key, 'dup', scope, valid_from,"
                " recorded_at, created_at, modified_at FROM korely_facts WHERE id = :id"
            ),
            {"id": fact.id},
        )


def test_max_facts_refuses_a_new_key_but_not_a_replacement(
    engine: MemoryEngine, giulia: Identity
) -> None:
    from korely_memory import LimitExceeded

    engine.remember(giulia, "a", "first", max_facts=2)
    engine.remember(giulia, "b", "second", max_facts=2)
    with pytest.raises(LimitExceeded, match="correct or forget"):
        engine.remember(giulia, "c", "third", max_facts=2)
    assert (
        engine.remember(giulia, "a", "first, corrected", max_facts=2).content == "first, corrected"
    )
    assert len(engine.get_facts(giulia)) == 2
