"""Holding a block's changes until the model has them: told at least once, and at most once."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator

import pytest

from korely_memory import Identity, InvalidRequest, MemoryEngine

from .helpers import Clock

START = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def held(db_url: str, clock: Clock, giulia: Identity) -> Iterator[MemoryEngine]:
    """An engine on the test's clock, with a change waiting for reader ``bot``."""
    with MemoryEngine(db_url, clock=clock) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.get_context(giulia, reader="bot")
        clock.advance(minutes=1)
        engine.correct(giulia, "home-city", "Giulia lives in Milan")
        yield engine


def told(block: object) -> list[str]:
    return [c.now.content if c.now else "gone" for c in block.changed]  # type: ignore[attr-defined]


def test_a_held_change_is_spent_once_acknowledged(held: MemoryEngine, giulia: Identity) -> None:
    block = held.get_context(giulia, reader="bot", hold=True)
    assert told(block) == ["Giulia lives in Milan"] and block.receipt
    assert held.get_context(giulia, reader="bot").changed == ()  # held: no other read shows it
    assert held.acknowledge(block.receipt) == 1
    assert held.acknowledge(block.receipt) == 0  # twice: a no-op
    assert held.get_context(giulia, reader="bot").changed == ()


def test_a_receipt_names_its_account_and_one_made_before_that_still_spends(
    held: MemoryEngine, giulia: Identity
) -> None:
    """The receipt names the account (``token:ids:account``, the account quoted), so that
    acknowledging it reaches that account's rows only; a receipt made before receipts named it
    (``token:ids``) still spends what it held, and another account's name spends nothing."""
    block = held.get_context(giulia, reader="bot", hold=True)
    assert block.receipt is not None
    token, ids, account = block.receipt.split(":")
    assert account == "acme"
    assert held.acknowledge(f"{token}:{ids}:other%2Faccount") == 0
    assert held.acknowledge(f"{token}:{ids}") == 1
    assert held.get_context(giulia, reader="bot").changed == ()


def test_a_hold_that_runs_out_unacknowledged_is_told_again(
    held: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    lost = held.get_context(giulia, reader="bot", hold=dt.timedelta(minutes=5))
    assert told(lost) == ["Giulia lives in Milan"]
    clock.advance(minutes=4)
    assert held.get_context(giulia, reader="bot", hold=True).changed == ()
    clock.advance(minutes=2)
    again = held.get_context(giulia, reader="bot", hold=True)
    assert told(again) == ["Giulia lives in Milan"] and again.receipt != lost.receipt
    # The first read's answer came back late: its receipt no longer holds the change.
    assert held.acknowledge(lost.receipt) == 0  # type: ignore[arg-type]
    assert held.acknowledge(again.receipt) == 1  # type: ignore[arg-type]
    clock.advance(hours=1)
    assert held.get_context(giulia, reader="bot", hold=True).changed == ()


def test_a_late_acknowledgement_still_spends_what_nobody_else_took(
    held: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    block = held.get_context(giulia, reader="bot", hold=60)
    clock.advance(minutes=5)
    assert held.acknowledge(block.receipt) == 1  # type: ignore[arg-type]
    assert held.get_context(giulia, reader="bot").changed == ()


def test_two_reads_at_once_never_both_hold_a_change(db_url: str, giulia: Identity) -> None:
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.get_context(giulia, reader="bot")
        engine.correct(giulia, "home-city", "Giulia lives in Milan")
        engines = [MemoryEngine(db_url) for _ in range(6)]
        start = threading.Barrier(len(engines))
        blocks: list[object] = []

        def read(e: MemoryEngine) -> None:
            start.wait()
            blocks.append(e.get_context(giulia, reader="bot", hold=True))

        threads = [threading.Thread(target=read, args=(e,)) for e in engines]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for e in engines:
            e.close()
        holders = [b for b in blocks if b.changed]  # type: ignore[attr-defined]
        gave_way = [b for b in blocks if b.gave_way]  # type: ignore[attr-defined]
        assert len(holders) == 1 or (not holders and gave_way)
        if holders:
            assert engine.acknowledge(holders[0].receipt) == 1  # type: ignore[attr-defined]


def test_a_block_fitted_to_less_room_acknowledges_only_what_it_still_shows(
    db_url: str, clock: Clock, giulia: Identity
) -> None:
    with MemoryEngine(db_url, clock=clock) as engine:
        for i in range(3):
            engine.remember(giulia, f"k{i}", f"Giulia's arrangement number {i}")
        engine.get_context(giulia, reader="bot")
        clock.advance(minutes=1)
        for i in range(3):
            clock.advance(seconds=1)
            engine.correct(giulia, f"k{i}", f"Giulia's new arrangement number {i}")
        block = engine.get_context(giulia, reader="bot", hold=True, token_budget=400)
        assert len(block.changed) == 3 and len(block.facts) == 3
        room = block.tokens
        smaller = block
        while len(smaller.changed) == 3:
            room -= 1
            smaller = block.fit(room)
            assert smaller.tokens <= max(room, engine.count_tokens(block.stable))
        assert smaller.facts == ()  # facts give way before notices
        assert len(smaller.changed) == 2 and smaller.receipt not in (None, block.receipt)
        assert engine.acknowledge(smaller.receipt) == 2  # type: ignore[arg-type]
        clock.advance(minutes=11)
        retold = engine.get_context(giulia, reader="bot", token_budget=400)
        assert [c.was.key for c in retold.changed] == [block.changed[2].was.key]


def test_without_a_hold_nothing_is_held(held: MemoryEngine, giulia: Identity) -> None:
    block = held.get_context(giulia, reader="bot")
    assert told(block) == ["Giulia lives in Milan"] and block.receipt is None
    assert held.get_context(giulia, reader="bot", hold=True).changed == ()


@pytest.mark.parametrize("bad", [0, -1, dt.timedelta(days=2), "10m", float("nan")], ids=repr)
def test_a_hold_that_is_no_period_is_refused_by_name(
    held: MemoryEngine, bad: object, giulia: Identity
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        held.get_context(giulia, reader="bot", hold=bad)  # type: ignore[arg-type]
    assert refused.value.field == "hold"


@pytest.mark.parametrize("bad", ["", "nonsense", "0" * 32 + ":", "x" * 32 + ":1", 7], ids=repr)
def test_a_receipt_no_block_carried_is_refused_by_name(held: MemoryEngine, bad: object) -> None:
    with pytest.raises(InvalidRequest) as refused:
        held.acknowledge(bad)  # type: ignore[arg-type]
    assert refused.value.field == "receipt"


def test_a_released_hold_is_told_again_at_once(held: MemoryEngine, giulia: Identity) -> None:
    block = held.get_context(giulia, reader="bot", hold=True)
    assert told(block) == ["Giulia lives in Milan"]
    assert held.release(block.receipt) == 1  # type: ignore[arg-type]
    assert held.release(block.receipt) == 0  # type: ignore[arg-type]
    again = held.get_context(giulia, reader="bot", hold=True)
    assert told(again) == ["Giulia lives in Milan"]
    assert held.acknowledge(block.receipt) == 0  # type: ignore[arg-type]  (released: not its)
    assert held.acknowledge(again.receipt) == 1  # type: ignore[arg-type]


def test_a_block_read_again_in_its_turn_tells_what_it_held(
    held: MemoryEngine, giulia: Identity
) -> None:
    first = held.get_context(giulia, reader="bot", hold=True)
    held.remember(giulia, "plan", "Giulia uses the Pro plan", reader="bot")  # the agent writes
    assert held.get_context(giulia, reader="bot", hold=True).changed == ()  # another turn's read
    again = held.get_context(giulia, reader="bot", hold=True, renew=first.receipt)
    assert told(again) == ["Giulia lives in Milan"] and "Pro plan" in again.text
    assert again.receipt is not None
    assert held.acknowledge(again.receipt) == 1
    assert held.get_context(giulia, reader="bot", hold=True, renew=again.receipt).changed == ()


def test_a_renewal_holds_for_another_period(
    held: MemoryEngine, clock: Clock, giulia: Identity
) -> None:
    first = held.get_context(giulia, reader="bot", hold=60)
    clock.advance(seconds=50)
    again = held.get_context(giulia, reader="bot", hold=60, renew=first.receipt)
    clock.advance(seconds=50)  # past the first hold, within the renewed one
    assert held.get_context(giulia, reader="bot", hold=True).changed == ()
    assert held.acknowledge(again.receipt) == 1  # type: ignore[arg-type]


def test_renew_needs_a_receipt_a_reader_and_a_hold(held: MemoryEngine, giulia: Identity) -> None:
    receipt = held.get_context(giulia, reader="bot", hold=True).receipt
    for bad in (
        {"renew": receipt},  # no hold
        {"renew": receipt, "hold": True, "reader": None},
        {"renew": "not a receipt", "hold": True},
    ):
        with pytest.raises(InvalidRequest) as refused:
            held.get_context(giulia, **{"reader": "bot", **bad})  # type: ignore[arg-type]
        assert refused.value.field == "renew"
