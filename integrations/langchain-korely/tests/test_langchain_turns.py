"""Where the middleware keeps each turn's block: by turn, for less than a hold, bounded."""

from __future__ import annotations

from types import SimpleNamespace

from langchain_core.messages import AIMessage, HumanMessage

from korely_memory import ContextBlock, Identity, MemoryEngine
from langchain_korely._turns import MAX_TURNS, REUSE_FOR, Turn, Turns, thread_of, turn_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def held_block(giulia: Identity) -> ContextBlock:
    """A real block whose change is held: it carries a receipt."""
    with MemoryEngine("sqlite://") as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        engine.get_context(giulia, reader="bot")
        engine.correct(giulia, "home-city", "Giulia lives in Milan")
        block = engine.get_context(giulia, reader="bot", hold=True)
    assert block.receipt is not None
    return block


def said(text: str, message_id: str) -> HumanMessage:
    return HumanMessage(content=text, id=message_id)


def test_a_turn_is_the_latest_user_message_of_a_thread_for_an_identity(giulia: Identity) -> None:
    first = turn_of([said("Hi", "m-1")], "t-1", giulia)
    same_run = turn_of([said("Hi", "m-1"), AIMessage(content="Hello")], "t-1", giulia)
    next_turn = turn_of(
        [said("Hi", "m-1"), AIMessage(content="Hello"), said("Hi", "m-2")], "t-1", giulia
    )
    other_thread = turn_of([said("Hi", "m-1")], "t-2", giulia)
    other_person = turn_of([said("Hi", "m-1")], "t-1", Identity("acme", "marco", "support-copilot"))

    assert first == same_run
    assert first.query == "Hi"
    assert len({first, next_turn, other_thread, other_person}) == 4
    assert first.retry == next_turn.retry  # the same words sent again


def test_the_thread_comes_from_the_config_else_from_langgraphs_execution_info() -> None:
    runtime = SimpleNamespace(execution_info=SimpleNamespace(thread_id="t-1"))
    assert thread_of({"configurable": {"thread_id": "t-2"}}, runtime) == "t-2"
    assert thread_of({}, runtime) is None  # a config without a thread: a run without one
    assert thread_of(None, runtime) == "t-1"  # no config seen (an async run on Python 3.10)
    assert thread_of(None, SimpleNamespace(execution_info=None)) is None


def test_a_kept_turn_is_found_until_it_is_written_finished_or_too_old(giulia: Identity) -> None:
    clock = Clock()
    turns = Turns(clock)
    key = turn_of([said("Hi", "m-1")], None, giulia)
    assert turns.find(key) is None
    turn = Turn(None, "Hi", clock())
    turns.keep(key, turn)
    assert turns.find(key) is turn

    turns.written(key)
    assert turns.find(key) is None
    turns.keep(key, fresh := Turn(None, "Hi", clock()))
    clock.now += REUSE_FOR - 1
    assert turns.find(key) is fresh
    clock.now += 1
    assert turns.find(key) is None

    turns.keep(key, Turn(None, "Hi", clock()))
    turns.finished(key)
    assert turns.find(key) is None and len(turns) == 0


def test_a_failed_turn_is_taken_up_by_the_same_words_sent_again_until_a_model_answers(
    giulia: Identity,
) -> None:
    clock = Clock()
    turns = Turns(clock)
    failed_key = turn_of([said("Where do I live?", "m-1")], None, giulia)
    again = turn_of([said("Where do I live?", "m-2")], None, giulia)
    other = turn_of([said("Something else", "m-3")], None, giulia)
    turn = Turn(held_block(giulia), "Where do I live?", clock())
    turns.keep(failed_key, turn)

    assert turns.find(again) is None  # not failed: a run in progress keeps its own
    turns.failed(failed_key, turn)
    assert turns.find(other) is None
    assert turns.find(again) is turn

    turns.reached(again, turn)  # the retry's model answered with it: taken up
    assert turns.find(turn_of([said("Where do I live?", "m-4")], None, giulia)) is None


def test_a_turn_without_held_changes_is_never_taken_up(giulia: Identity) -> None:
    turns = Turns(Clock())
    key = turn_of([said("Hi", "m-1")], None, giulia)
    turn = Turn(None, "Hi", 0.0)
    turns.failed(key, turn)
    assert len(turns) == 0


def test_the_number_of_turns_kept_is_bounded(giulia: Identity) -> None:
    clock = Clock()
    turns = Turns(clock)
    keys = [turn_of([said("Hi", f"m-{i}")], None, giulia) for i in range(MAX_TURNS + 10)]
    for key in keys:
        turns.keep(key, Turn(None, "Hi", clock()))
    assert len(turns) == MAX_TURNS
    assert turns.find(keys[0]) is None
    assert turns.find(keys[-1]) is not None
