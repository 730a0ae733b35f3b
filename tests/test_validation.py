"""Every rule on input: a bad argument raises InvalidRequest naming it, and changes nothing.

The rules (names, keys, contents, moments, budgets, readers, holds) are in docs/reference.md.
"""

from __future__ import annotations

from typing import Any

import pytest

from korely_memory import Identity, InvalidRequest, KorelyError, MemoryEngine

from .helpers import snapshot

OK = Identity("acme", "giulia", "support-copilot")

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
    """(label, thunk-maker) pairs: each call passes ``bad`` as ``field``."""
    if field in ("account", "user", "agent"):
        who = Identity(
            **{"account": "acme", "user": "giulia", "agent": "support-copilot", field: bad}
        )
        return [
            ("remember", lambda e: e.remember(who, "k", "content")),
            ("get_facts", lambda e: e.get_facts(who)),
            ("get_context", lambda e: e.get_context(who)),
        ]
    if field == "reader":
        return [
            ("get_facts", lambda e: e.get_facts(OK, reader=bad)),
            ("get_context", lambda e: e.get_context(OK, reader=bad)),
        ]
    if field == "key":
        return [
            ("remember", lambda e: e.remember(OK, bad, "content")),
            ("correct", lambda e: e.correct(OK, bad, "content")),
            ("forget", lambda e: e.forget(OK, bad)),
            ("history", lambda e: e.history(OK, bad)),
        ]
    if field == "content":
        return [
            ("remember", lambda e: e.remember(OK, "home-city", bad)),
            ("correct", lambda e: e.correct(OK, "home-city", bad)),
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
    engine: MemoryEngine, field: str, bad: Any
) -> None:
    engine.remember(OK, "home-city", "Giulia lives in Rome")
    before = snapshot(engine)
    for label, call in calls_with(field, bad):
        with pytest.raises(InvalidRequest) as caught:
            call(engine)
        assert caught.value.field == field, label
        assert caught.value.code == "invalid_request"
        assert field in str(caught.value)
    assert snapshot(engine) == before


OTHER_CASES = [
    ("scope", lambda e: e.remember(OK, "k", "c", scope="galaxy")),
    ("scope", lambda e: e.remember(OK, "k", "c", scope="account_rejected")),
    ("valid_from", lambda e: e.remember(OK, "k", "c", valid_from="yesterday")),
    ("at", lambda e: e.forget(OK, "home-city", at=3.5)),
    ("as_of", lambda e: e.get_facts(OK, as_of="2026")),
    ("known_as_of", lambda e: e.get_facts(OK, known_as_of=1)),
    ("token_budget", lambda e: e.get_context(OK, token_budget=49)),
    ("token_budget", lambda e: e.get_context(OK, token_budget=8001)),
    ("token_budget", lambda e: e.get_context(OK, token_budget="800")),
    ("max_facts", lambda e: e.remember(OK, "k", "c", max_facts=-1)),
    ("source_memory_id", lambda e: e.remember(OK, "k", "c", source_memory_id="m1")),
    ("fact_id", lambda e: e.confirm(OK, "seven")),
    ("who", lambda e: e.remember(("acme", "giulia", "bot"), "k", "c")),
]


@pytest.mark.parametrize("field, call", OTHER_CASES, ids=[c[0] for c in OTHER_CASES])
def test_other_arguments_are_checked_too(engine: MemoryEngine, field: str, call: Any) -> None:
    engine.remember(OK, "home-city", "Giulia lives in Rome")
    before = snapshot(engine)
    with pytest.raises(InvalidRequest) as caught:
        call(engine)
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
def test_keys_are_normalised(engine: MemoryEngine, raw: str, normal: str) -> None:
    assert engine.remember(OK, raw, "content").key == normal


def test_content_is_trimmed_and_may_be_2000_characters(engine: MemoryEngine) -> None:
    assert engine.remember(OK, "a", "  padded  ").content == "padded"
    assert len(engine.remember(OK, "b", "y" * 2000).content) == 2000


def test_errors_share_one_base() -> None:
    assert issubclass(InvalidRequest, KorelyError) and issubclass(InvalidRequest, ValueError)


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
