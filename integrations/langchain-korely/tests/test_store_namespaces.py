"""A namespace of the agent's own memory whose label names a person: a warning, once.

LangGraph's examples put the user first, `(user_id, "memories")`. The default rule of
`KorelyStore` reads only `("memories", "{user}")` as a user's memory, so such items are the
agent's own: `erase_user` and `export_user` miss them. A put there warns, naming the label and
the `namespaces=` that makes it the user's, when the label is the run's user (LangMem's
`langgraph_user_id`, or `user_id`) or a person the memory holds. Every warning fails the test
that raised it unless the test expects it (`pytest.warns`): the tests below without one show
that nothing else warns.
"""

from __future__ import annotations

import warnings

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool

from korely_memory import Identity, MemoryEngine
from langchain_korely import KorelyStore

from ._agents import calls, scripted, tool_messages
from .test_store_users import run

ACCOUNT, AGENT = "acme", "assistant"
GIULIA = Identity(ACCOUNT, "giulia", AGENT)
TEAM = Identity(ACCOUNT, None, AGENT)


def test_a_known_person_s_label_in_the_agent_s_own_namespace_warns_once(
    engine: MemoryEngine,
) -> None:
    engine.remember(Identity(ACCOUNT, "giulia", "support-copilot"), "home-city", "Rome")
    store = KorelyStore(engine, account=ACCOUNT, agent=AGENT)

    with pytest.warns(UserWarning, match="names a person") as warned:
        store.put(("giulia", "memories"), "drink", {"content": "Giulia drinks tea"})

    (message,) = [str(w.message) for w in warned]
    assert "('giulia', 'memories')" in message and "erase_user" in message
    assert "namespaces=[('{user}', 'memories'), ...]" in message
    # Written all the same, as the agent's own memory; the next put says nothing again.
    assert [f.content for f in engine.get_facts(TEAM)] == ["Giulia drinks tea"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store.put(("giulia", "memories"), "food", {"content": "Giulia eats fish"})
        store.put(("marco", "memories"), "drink", {"content": "Marco drinks coffee"})  # unknown
        store.put(("faq",), "hours", {"content": "Open from 9 to 18"})
    assert engine.erase_user(ACCOUNT, "giulia").facts >= 1
    assert len(engine.get_facts(TEAM)) == 4, "erasure missed the agent's items, as warned"


def test_the_rule_that_reads_the_user_first_keeps_it_quiet_and_erasable(
    engine: MemoryEngine,
) -> None:
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    store = KorelyStore(engine, account=ACCOUNT, agent=AGENT, namespaces=[("{user}", "memories")])
    team = KorelyStore(engine, account=ACCOUNT, agent=AGENT, namespaces=[("giulia", "shared")])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store.put(("giulia", "memories"), "drink", {"content": "Giulia drinks tea"})
        team.put(("giulia", "shared", "x"), "note", {"content": "A note of the team"})

    assert sorted(f.content for f in engine.get_facts(GIULIA)) == [
        "Giulia drinks tea",
        "Giulia lives in Rome",
    ]
    engine.erase_user(ACCOUNT, "giulia")
    assert store.get(("giulia", "memories"), "drink") is None
    assert [f.content for f in engine.get_facts(TEAM)] == ["A note of the team"]


@tool
def save_memory(text: str, runtime: ToolRuntime) -> str:
    """Save a memory of the user's."""
    store = runtime.store
    assert store is not None
    user_id = runtime.config["configurable"]["user_id"]
    store.put((user_id, "memories"), "latest", {"content": text})
    return "saved"


async def test_the_run_s_user_in_a_namespace_warns_though_the_memory_holds_nothing_of_them(
    engine: MemoryEngine, use_async: bool
) -> None:
    """LangGraph's docs' tool: `(user_id, "memories")` in a run configured with `user_id`. Marco
    is new to the memory, so only the run names him."""
    store = KorelyStore(engine, account=ACCOUNT, agent=AGENT)
    model = scripted(calls("save_memory", text="Marco prefers tea"), "Saved.")
    agent = create_agent(model, tools=[save_memory], store=store)

    with pytest.warns(UserWarning, match="'marco' names the run's user"):
        result = await run(
            agent, "I prefer tea.", use_async, config={"configurable": {"user_id": "marco"}}
        )

    assert [m.text for m in tool_messages(result)] == ["saved"]
    assert [f.content for f in engine.get_facts(TEAM)] == ["Marco prefers tea"]


def test_a_reader_s_name_in_the_agent_s_own_namespace_is_no_person_and_stays_quiet(
    engine: MemoryEngine,
) -> None:
    """A reader is the program a block is handed to (the README names it after the agent,
    `reader="assistant"`); its read marks are no person's memory. A namespace of the agent's
    own named after it, `("assistant", "procedures")`, does not warn; a reader who is also a
    person the memory holds facts of still does."""
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    engine.get_context(GIULIA, reader=AGENT)
    engine.remember(Identity(ACCOUNT, "desk-7", AGENT), "shift", "Works the morning shift")
    engine.get_context(GIULIA, reader="desk-7")
    assert engine.listings.holds_user(ACCOUNT, AGENT), "erase_user would find its marks"
    store = KorelyStore(engine, account=ACCOUNT, agent=AGENT)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store.put((AGENT, "procedures"), "greeting", {"content": "Greet the user by name"})
    with pytest.warns(UserWarning, match="'desk-7' names a person"):
        store.put(("desk-7", "notes"), "printer", {"content": "The printer is on floor 2"})

    assert sorted(f.content for f in engine.get_facts(TEAM)) == [
        "Greet the user by name",
        "The printer is on floor 2",
    ]
