"""What every adapter's capture shares: turns joined while they wait, split into parts that fit a
memory; the worker that runs them is exercised through each adapter."""

from __future__ import annotations

import importlib

import pytest

from korely_memory import Identity, limits
from korely_memory.capture import Job, chunks


def test_a_later_turn_joins_a_waiting_capture_and_the_same_turn_ended_again_replaces_it(
    giulia: Identity,
) -> None:
    first = Job(giulia, (("1", (("user", "Hi"), ("assistant", "Hello!"))),))
    second = Job(giulia, (("2", (("user", "I live in Rome."),)),))
    resumed = Job(giulia, (("2", (("user", "I live in Rome."), ("assistant", "Noted."))),))

    joined = first.joined(second).joined(resumed)
    assert joined.pairs == [
        ("user", "Hi"),
        ("assistant", "Hello!"),
        ("user", "I live in Rome."),
        ("assistant", "Noted."),
    ]


def rendered(part: list[tuple[str, str]]) -> str:
    """A part as the engine keeps it."""
    return "\n\n".join(f"{role}: {text}" for role, text in part)


def said(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Who said what, consecutive pieces of one role put together, without white space."""
    out: list[tuple[str, str]] = []
    for role, text in pairs:
        bare = "".join(text.split())
        if out and out[-1][0] == role:
            out[-1] = (role, out[-1][1] + bare)
        else:
            out.append((role, bare))
    return out


WORDS = " ".join(f"w{i}" for i in range(6000))  # about 40,000 characters
PARAGRAPHS = "\n\n".join(f"Paragraph {i}. " + "x" * 900 for i in range(40))


@pytest.mark.parametrize(
    "pairs",
    [
        [("user", "Tell me everything."), ("assistant", WORDS)],
        [("user", "And paragraphs?"), ("assistant", PARAGRAPHS)],
        [("user", "y" * 40_000)],  # no space to cut at
        [("user", "a" * 9000), ("assistant", "b" * 9000), ("user", "c" * 15_990)],
    ],
    ids=["words", "paragraphs", "one long word", "messages that fit only alone"],
)
def test_a_long_excerpt_is_cut_into_parts_that_fit_and_nothing_is_lost(
    pairs: list[tuple[str, str]],
) -> None:
    parts = chunks(pairs)
    assert len(parts) > 1
    assert all(len(rendered(part)) <= limits.MAX_MEMORY for part in parts)
    # Each message, in order, under its role: every character but the spaces cut at.
    assert said([pair for part in parts for pair in part]) == said(pairs)


def test_a_message_goes_whole_to_the_next_part_when_it_fits_there() -> None:
    pairs = [("user", "a" * 9000), ("assistant", "b" * 9000), ("user", "short")]
    assert [[(r, len(t)) for r, t in part] for part in chunks(pairs)] == [
        [("user", 9000)],
        [("assistant", 9000), ("user", 5)],
    ]


def test_a_short_excerpt_is_one_part_as_it_is() -> None:
    pairs = [("user", "I live in Rome."), ("assistant", "Noted.")]
    assert chunks(pairs) == [pairs]


def test_the_former_module_name_is_gone() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("korely_memory.capturing")
