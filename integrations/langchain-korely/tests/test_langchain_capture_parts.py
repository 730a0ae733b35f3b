"""What a run gives capture: its user turn as (role, text) pairs, without tool traffic."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from korely_memory import Identity
from langchain_korely._capturing import run_excerpt, run_turn, said_by_the_person


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
        False,
    )
    assert run_excerpt([SystemMessage("x"), AIMessage("Hello!")]) == (None, (), False)


def test_a_turn_in_which_a_fact_was_erased_says_so() -> None:
    def turn(*calls: dict[str, object]) -> list[object]:
        return [
            HumanMessage("Forget my diagnosis, please.", id="1"),
            AIMessage("", tool_calls=[{**c, "id": f"c{i}"} for i, c in enumerate(calls)]),
            AIMessage("Done."),
        ]

    erasing = {"name": "memory_forget", "args": {"key": "health", "erase": True}}
    forgetting = {"name": "memory_forget", "args": {"key": "health"}}
    other = {"name": "forget", "args": {"key": "health", "erase": True}}  # not our tool
    names = {"memory_forget"}
    assert run_excerpt(turn(erasing), names)[2] is True  # type: ignore[arg-type]
    assert run_excerpt(turn(forgetting), names)[2] is False  # type: ignore[arg-type]
    assert run_excerpt(turn(other), names)[2] is False  # type: ignore[arg-type]
    before = [HumanMessage("x", id="0"), *turn(erasing)[1:], *turn()]
    assert run_excerpt(before, names)[2] is False  # type: ignore[arg-type]


def test_a_runs_conversation_is_its_thread() -> None:
    messages = [HumanMessage("Hi", id="1"), AIMessage("Hello!")]
    pairs = (("user", "Hi"), ("assistant", "Hello!"))
    assert run_turn({"configurable": {"thread_id": "t"}}, messages) == ("t", "1", pairs, False)
    assert run_turn({}, messages) == (None, "1", pairs, False)


def test_of_the_user_messages_only_those_said_accepts_are_in_the_excerpt() -> None:
    messages = [
        HumanMessage("I moved to Oslo.", name="marco", id="1"),
        HumanMessage("I moved to Milan.", name="giulia", id="2"),
        HumanMessage("Me too.", id="3"),
        AIMessage("Noted."),
    ]
    who = Identity("acme", "giulia", "support-copilot")
    pairs = (("user", "I moved to Milan."), ("user", "Me too."), ("assistant", "Noted."))
    assert run_excerpt(messages, (), lambda m: said_by_the_person(m, who)) == ("3", pairs, False)
    assert run_excerpt(messages)[1][0] == ("user", "I moved to Oslo.")  # without said: all
    team = Identity("acme", None, "support-copilot")  # no user: only messages without a name
    assert run_excerpt(messages, (), lambda m: said_by_the_person(m, team))[1][0] == pairs[1]


def test_the_answers_to_someone_elses_message_are_left_out_with_it() -> None:
    messages = [
        HumanMessage("Hi all.", name="giulia", id="1"),
        HumanMessage("I'm allergic to nuts and moved to Oslo.", name="marco", id="2"),
        AIMessage("Noted, Marco: allergic to nuts, now in Oslo."),
        AIMessage("Anything else, Marco?"),
        HumanMessage("I moved to Milan.", name="giulia", id="3"),
        AIMessage("Noted: Milan."),
    ]
    who = Identity("acme", "giulia", "support-copilot")
    said = lambda m: said_by_the_person(m, who)  # noqa: E731
    # The turn: the latest user messages and what follows them.
    assert run_excerpt(messages[:4], (), said)[1] == (("user", "Hi all."),)
    assert run_excerpt([*messages[:2], AIMessage("Hello!")], (), said)[1] == (("user", "Hi all."),)
    answered = [messages[1], messages[0], AIMessage("Hello, Giulia!")]  # she spoke last
    mine = (("user", "Hi all."), ("assistant", "Hello, Giulia!"))
    assert run_excerpt(answered, (), said)[1] == mine
    assert run_excerpt(messages[4:], (), said)[1] == (
        ("user", "I moved to Milan."),
        ("assistant", "Noted: Milan."),
    )
