"""Every rule on input: a bad argument raises InvalidRequest naming it, and changes nothing.

The rules (names, keys, contents, moments, budgets, readers, holds) are in docs/reference.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import korely_memory
from korely_memory import (
    AlreadyDecided,
    Identity,
    InvalidRequest,
    KorelyError,
    LimitExceeded,
    MemoryEngine,
    NotCurrent,
    NotFound,
    NotRefittable,
    PermissionDenied,
    SchemaVersionError,
)
from korely_memory._db._migrations import HEAD, VERSION_TABLE

from .helpers import snapshot

BAD_NAMES = [
    "",
    ".",
    "..",
    "a/b",
    "line\nbreak",
    "cr\rhere",
    "tab\there",
    "nul\x00",
    "bell\x07",
    "x" * 256,
    42,
]
BAD_KEYS = [
    "",
    "   ",
    "-leading",
    ".dot",
    "UPPER?",
    "a" * 101,
    "has/slash",
    "new\nline",
    "é",
    None,
    7,
]
BAD_CONTENT = ["", "   \n\t ", "x" * 2001, "nul\x00inside", None, 12, b"bytes"]


def calls_with(field: str, bad: Any) -> list[tuple[str, Any]]:
    """(label, call) pairs: each call, given an engine and Giulia, passes ``bad`` as ``field``."""
    if field in ("account", "user", "agent"):
        return [
            ("remember", lambda e, g: e.remember(replace(g, **{field: bad}), "k", "content")),
            ("get_facts", lambda e, g: e.get_facts(replace(g, **{field: bad}))),
            ("get_context", lambda e, g: e.get_context(replace(g, **{field: bad}))),
        ]
    if field == "reader":
        return [
            ("get_facts", lambda e, g: e.get_facts(g, reader=bad)),
            ("get_context", lambda e, g: e.get_context(g, reader=bad)),
        ]
    if field == "key":
        return [
            ("remember", lambda e, g: e.remember(g, bad, "content")),
            ("correct", lambda e, g: e.correct(g, bad, "content")),
            ("forget", lambda e, g: e.forget(g, bad)),
            ("history", lambda e, g: e.history(g, bad)),
        ]
    if field == "content":
        return [
            ("remember", lambda e, g: e.remember(g, "home-city", bad)),
            ("correct", lambda e, g: e.correct(g, "home-city", bad)),
        ]
    raise AssertionError(field)


CASES = (
    [(f, b) for f in ("account", "agent", "reader") for b in BAD_NAMES]
    + [("user", b) for b in BAD_NAMES]
    + [("key", b) for b in BAD_KEYS]
    + [("content", b) for b in BAD_CONTENT]
)


@pytest.mark.parametrize("field, bad", CASES, ids=[f"{f}={b!r:.20}" for f, b in CASES])
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(
    engine: MemoryEngine, field: str, bad: Any, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    before = snapshot(engine)
    for label, call in calls_with(field, bad):
        with pytest.raises(InvalidRequest) as caught:
            call(engine, giulia)
        assert caught.value.field == field, label
        assert caught.value.code == "invalid_request"
        assert field in str(caught.value)
    assert snapshot(engine) == before


OTHER_CASES = [
    ("scope", lambda e, g: e.remember(g, "k", "c", scope="galaxy")),
    ("scope", lambda e, g: e.remember(g, "k", "c", scope="account_rejected")),
    ("valid_from", lambda e, g: e.remember(g, "k", "c", valid_from="yesterday")),
    ("at", lambda e, g: e.forget(g, "home-city", at=3.5)),
    ("as_of", lambda e, g: e.get_facts(g, as_of="2026")),
    ("known_as_of", lambda e, g: e.get_facts(g, known_as_of=1)),
    ("token_budget", lambda e, g: e.get_context(g, token_budget=49)),
    ("token_budget", lambda e, g: e.get_context(g, token_budget=8001)),
    ("token_budget", lambda e, g: e.get_context(g, token_budget="800")),
    ("max_facts", lambda e, g: e.remember(g, "k", "c", max_facts=-1)),
    ("source_memory_id", lambda e, g: e.remember(g, "k", "c", source_memory_id="m1")),
    ("fact_id", lambda e, g: e.confirm(g, "seven")),
    ("who", lambda e, g: e.remember(("acme", "giulia", "bot"), "k", "c")),
]


@pytest.mark.parametrize("field, call", OTHER_CASES, ids=[c[0] for c in OTHER_CASES])
def test_other_arguments_are_checked_too(
    engine: MemoryEngine, field: str, call: Any, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    before = snapshot(engine)
    with pytest.raises(InvalidRequest) as caught:
        call(engine, giulia)
    assert caught.value.field == field
    assert snapshot(engine) == before


@pytest.mark.parametrize(
    "raw, normal",
    [
        ("Home City", "home-city"),
        ("  reporting-region ", "reporting-region"),
        ("a.b_c:d-9", "a.b_c:d-9"),
        ("x" * 100, "x" * 100),
        ("Two  Spaces", "two-spaces"),
    ],
)
def test_keys_are_normalised(engine: MemoryEngine, raw: str, normal: str, giulia: Identity) -> None:
    assert engine.remember(giulia, raw, "content").key == normal


def test_content_is_trimmed_and_may_be_2000_characters(
    engine: MemoryEngine, giulia: Identity
) -> None:
    assert engine.remember(giulia, "a", "  padded  ").content == "padded"
    assert len(engine.remember(giulia, "b", "y" * 2000).content) == 2000


def provoke_invalid_request(url: str, giulia: Identity) -> InvalidRequest:
    with MemoryEngine(url) as engine, pytest.raises(InvalidRequest) as raised:
        engine.remember(giulia, "home-city", "")
    assert raised.value.field == "content" and isinstance(raised.value, ValueError)
    assert str(raised.value).startswith("content: ")
    return raised.value


def provoke_not_found(url: str, giulia: Identity) -> NotFound:
    with MemoryEngine(url) as engine, pytest.raises(NotFound) as raised:
        engine.correct(giulia, "home-city", "Giulia lives in Milan")
    assert isinstance(raised.value, LookupError) and "'home-city'" in str(raised.value)
    return raised.value


def provoke_permission_denied(url: str, giulia: Identity) -> PermissionDenied:
    with MemoryEngine(url) as engine:
        proposal = engine.remember(giulia, "hours", "Acme opens at nine", scope="account")
        with pytest.raises(PermissionDenied) as raised:
            engine.confirm(giulia, proposal.id)
    assert "'giulia' is not an administrator" in str(raised.value)
    return raised.value


def provoke_not_current(url: str, giulia: Identity) -> NotCurrent:
    with MemoryEngine(url) as engine:
        engine.grant_admin("acme", "anna")
        first = engine.remember(giulia, "hours", "Acme opens at nine", scope="account")
        now = engine.correct(giulia, "hours", "Acme opens at ten")
        with pytest.raises(NotCurrent) as raised:
            engine.confirm(replace(giulia, user="anna"), first.id)
    assert raised.value.current_fact_id == now.id and f"fact {first.id}" in str(raised.value)
    return raised.value


def provoke_already_decided(url: str, giulia: Identity) -> AlreadyDecided:
    with MemoryEngine(url) as engine:
        engine.grant_admin("acme", "anna")
        proposal = engine.remember(giulia, "hours", "Acme opens at nine", scope="account")
        anna = replace(giulia, user="anna")
        engine.confirm(anna, proposal.id)
        with pytest.raises(AlreadyDecided) as raised:
            engine.confirm(anna, proposal.id)
    assert (raised.value.fact_id, raised.value.decision) == (proposal.id, "confirmed")
    assert f"fact {proposal.id} was confirmed by anna" in str(raised.value)
    return raised.value


def provoke_limit_exceeded(url: str, giulia: Identity) -> LimitExceeded:
    with MemoryEngine(url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome", max_facts=1)
        with pytest.raises(LimitExceeded) as raised:
            engine.remember(giulia, "diet", "Giulia is vegetarian", max_facts=1)
    assert "(max_facts)" in str(raised.value) and "'diet'" in str(raised.value)
    return raised.value


def provoke_not_refittable(url: str, giulia: Identity) -> NotRefittable:
    with MemoryEngine(url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        note = engine.get_context(giulia, conversation="t")
        with pytest.raises(NotRefittable) as raised:
            note.fit(note.tokens - 1)
    assert (raised.value.room, raised.value.tokens) == (note.tokens - 1, note.tokens)
    assert "note" in str(raised.value) and "token_budget" in str(raised.value)
    return raised.value


def provoke_schema_version_error(url: str, giulia: Identity) -> SchemaVersionError:
    MemoryEngine(url).close()
    db = sa.create_engine(url)
    with db.begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
    db.dispose()
    with pytest.raises(SchemaVersionError) as raised:
        MemoryEngine(url)
    assert raised.value.found == "9999" and raised.value.head == HEAD
    assert "9999" in str(raised.value)
    return raised.value


PROVOKE: dict[type[KorelyError], Callable[[str, Identity], KorelyError]] = {
    InvalidRequest: provoke_invalid_request,
    NotFound: provoke_not_found,
    PermissionDenied: provoke_permission_denied,
    NotCurrent: provoke_not_current,
    AlreadyDecided: provoke_already_decided,
    LimitExceeded: provoke_limit_exceeded,
    NotRefittable: provoke_not_refittable,
    SchemaVersionError: provoke_schema_version_error,
}
EXPORTED_ERRORS = sorted(
    (
        error
        for error in (getattr(korely_memory, name) for name in korely_memory.__all__)
        if isinstance(error, type) and issubclass(error, BaseException)
    ),
    key=lambda error: error.__name__,
)


def test_every_exported_error_is_a_korely_error_with_a_code_of_its_own() -> None:
    assert KorelyError in EXPORTED_ERRORS
    assert all(issubclass(error, KorelyError) for error in EXPORTED_ERRORS)
    codes = [error.code for error in EXPORTED_ERRORS]
    assert len(set(codes)) == len(codes), codes
    assert all(code and code == code.lower() for code in codes)
    assert set(PROVOKE) == set(EXPORTED_ERRORS) - {KorelyError}, "an error with no case below"


@pytest.mark.parametrize(
    "error", sorted(PROVOKE, key=lambda e: e.__name__), ids=lambda e: e.__name__
)
def test_every_error_the_engine_raises_carries_its_code_and_data(
    db_url: str, giulia: Identity, error: type[KorelyError]
) -> None:
    raised = PROVOKE[error](db_url, giulia)
    assert type(raised) is error and isinstance(raised, KorelyError)
    assert raised.code == error.code != KorelyError.code
    assert raised.message == str(raised) and raised.message.strip()


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("write_wait", "5"),
        ("write_wait", -1),
        ("write_wait", True),
        ("tokenizer", 5),
        ("clock", "now"),
        ("is_admin", "anna"),
        ("embed_model", ""),
        ("auto_upgrade", "yes"),
        ("language", "klingon"),
    ],
)
def test_an_engine_argument_that_breaks_its_rule_is_refused_by_name(
    sqlite_url: str, argument: str, value: object
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        MemoryEngine(sqlite_url, **{argument: value})  # type: ignore[arg-type]
    assert refused.value.field == argument


def test_count_tokens_refuses_what_is_not_text(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidRequest) as refused:
        engine.count_tokens(7)  # type: ignore[arg-type]
    assert refused.value.field == "text"


@pytest.mark.new_database
@pytest.mark.parametrize("embed", [5, "text-embedding-3-small", [[0.1, 0.2]]])
def test_an_embed_that_is_no_embedder_is_refused_by_name_and_opens_nothing(
    sqlite_url: str, embed: object
) -> None:
    path = sqlite_url.removeprefix("sqlite:///")
    with pytest.raises(InvalidRequest) as refused:
        MemoryEngine(sqlite_url, embed=embed)  # type: ignore[arg-type]
    assert refused.value.field == "embed"
    assert "LangChain Embeddings" in refused.value.message
    assert not Path(path).exists(), "the database was created"


def test_an_embed_refused_leaves_an_existing_database_as_it_was(
    db_url: str, giulia: Identity
) -> None:
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        before = snapshot(engine)
        with pytest.raises(InvalidRequest) as refused:
            MemoryEngine(db_url, embed=object())  # type: ignore[arg-type]
        assert refused.value.field == "embed"
        assert snapshot(engine) == before


def test_schema_version_error_is_in_the_error_tree() -> None:
    from korely_memory._db import _migrations
    from korely_memory._values import _errors

    assert SchemaVersionError.__module__ == "korely_memory._values._errors"
    assert _errors.SchemaVersionError is SchemaVersionError is _migrations.SchemaVersionError
    assert SchemaVersionError.__mro__[1] is KorelyError
    assert "SchemaVersionError" in korely_memory.__all__
    tree = _errors.__doc__ or ""
    assert "└── SchemaVersionError           schema_version" in tree
    error = SchemaVersionError("the schema is at 9999", "9999", head=HEAD)
    assert (error.found, error.head, error.code) == ("9999", HEAD, "schema_version")
