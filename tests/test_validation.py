"""Every rule on input: a bad argument raises InvalidRequest naming it, and changes nothing.

The rules (names, keys, contents, moments, budgets, readers, holds) are in docs/reference.md.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from korely_memory import Identity, InvalidRequest, KorelyError, MemoryEngine

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
