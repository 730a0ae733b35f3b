"""What a run gives capture: its user turn as (role, text) pairs, without tool traffic."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_korely._capturing import run_excerpt, run_turn


def test_the_excerpt_is_the_latest_user_turn_without_tool_traffic() -> None:
    messages = [
        SystemMessage("You are helpful."),
        HumanMessage("Hi", id="1"),
        AIMessage("Hello!"),
        HumanMessage("I have a cat.", id="2"),
        HumanMessage("  And a dog.  ", id="3"),  # sent right after: the same turn
        AIMessage("", tool_calls=[{"name": "remember", "args": {}, "id": "c"}]),
        ToolMessage("Remembered pet", tool_call_id="c"),
        AIMessage([{"type": "text", "text": "Noted, "}, {"type": "text", "text": "both."}]),
    ]
    assert run_excerpt(messages) == (
        "3",
        (("user", "I have a cat."), ("user", "And a dog."), ("assistant", "Noted, both.")),
    )
    assert run_excerpt([SystemMessage("x"), AIMessage("Hello!")]) == (None, ())


def test_a_runs_conversation_is_its_thread() -> None:
    messages = [HumanMessage("Hi", id="1"), AIMessage("Hello!")]
    pairs = (("user", "Hi"), ("assistant", "Hello!"))
    assert run_turn({"configurable": {"thread_id": "t"}}, messages) == ("t", "1", pairs)
    assert run_turn({}, messages) == (None, "1", pairs)
