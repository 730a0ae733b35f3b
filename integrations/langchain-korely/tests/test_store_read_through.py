"""One memory, one view: a fact no item holds is an item of the user's namespace too.

A fact written by korely's `remember` tool, by capture or by `engine.remember` has no item of
its own. `KorelyStore` serves each of the user's own true facts that no item holds as an item
of the namespace the first pattern gives the user (`("memories", "giulia")`): key the fact's
key, value `{"kind": "Memory", "content": {"content": <words>}}` (LangMem's manager's shape),
times the fact's. So LangMem's search tool, its background manager and any `runtime.store`
code see what the block shows. A put to such an item records a new version of the same fact
(the item is then stored, with the put's value), a delete forgets the fact; a correction made
elsewhere is what the next read serves. Proposals and confirmed account facts are not served.
"""

from __future__ import annotations

import json
import re
from typing import Any

import sqlalchemy as sa
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from korely_memory import EndCause, Identity, MemoryEngine, Scope
from langchain_korely import KorelyMiddleware, KorelyStore, korely_extractor

from ._agents import (
    calls,
    operations,
    scripted,
    skip_async_on_python_3_10,
    tool_messages,
)
from .test_store_users import (
    AS_GIULIA,
    GIULIA,
    LANGMEM_ASYNC,
    LANGMEM_NAMESPACE,
    LANGMEM_RUNS,
    MARCO,
    THE_AGENT,
    call,
    contents,
    korely_store,
    langmem_only,
    reply_to,
    run,
)

if LANGMEM_RUNS:
    from .test_store_users import (
        create_memory_store_manager,
        create_search_memory_tool,
    )

MINE = ("memories", "giulia")


def served(words: str) -> dict[str, Any]:
    return {"kind": "Memory", "content": {"content": words}}


async def test_facts_of_korely_s_tool_and_of_capture_are_items_of_the_user(
    engine: MemoryEngine, use_async: bool
) -> None:
    """The model remembers with korely's tool, the capture records another fact: both are items
    of Giulia's namespace, the same on every read, and of no one else's."""
    extractor = korely_extractor(
        scripted(operations({"action": "record", "key": "diet", "content": "Giulia is vegetarian"}))
    )
    middleware = KorelyMiddleware(
        engine, reader="assistant-bot", capture=extractor, capture_inline=True
    )
    model = scripted(
        calls("remember", key="home-city", content="Giulia lives in Rome"), "Noted, Rome."
    )
    agent = create_agent(model, middleware=[middleware], store=korely_store(engine))
    try:
        result = await run(agent, "I live in Rome; I'm vegetarian.", use_async, context=GIULIA)
    finally:
        assert middleware.close(timeout=30)
    assert not any(m.status == "error" for m in tool_messages(result))
    assert contents(GIULIA, engine) == ["Giulia is vegetarian", "Giulia lives in Rome"]
    store = korely_store(engine)

    home = store.get(MINE, "home-city")
    assert home is not None and home.value == served("Giulia lives in Rome")
    fact = next(f for f in engine.get_facts(GIULIA) if f.key == "home-city")
    assert (home.created_at, home.updated_at) == (fact.created_at, fact.modified_at)
    again = await store.aget(MINE, "home-city")
    assert again is not None and again.dict() == home.dict()
    assert sorted((i.key, i.value["content"]["content"]) for i in store.search(MINE)) == [
        ("diet", "Giulia is vegetarian"),
        ("home-city", "Giulia lives in Rome"),
    ]
    assert store.search(MINE, query="Where does she live?")[0].key == "home-city"
    assert [i.key for i in store.search(MINE, filter={"kind": "Memory"}, limit=1)] == ["diet"]
    assert store.search(MINE, filter={"kind": "Other"}) == []
    assert store.get(("memories", "marco"), "home-city") is None
    assert store.search(("memories", "marco")) == []
    assert store.get(("faq",), "home-city") is None and store.get(MINE, "nothing") is None


async def test_a_put_to_a_served_item_is_a_new_version_of_its_fact(engine: MemoryEngine) -> None:
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    store = korely_store(engine)

    await store.aput(MINE, "home-city", {"content": "Giulia lives in Milan", "since": 2026})

    assert [v.content for v in engine.history(GIULIA, "home-city")] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]
    (item,) = store.search(MINE)
    assert (item.key, item.value) == (
        "home-city",
        {"content": "Giulia lives in Milan", "since": 2026},
    )
    # The same words again are no new version; the item stays the put's.
    store.put(MINE, "home-city", {"content": "Giulia lives in Milan"})
    assert len(engine.history(GIULIA, "home-city")) == 2
    assert contents(GIULIA, engine) == ["Giulia lives in Milan"]


def test_a_delete_of_a_served_item_forgets_its_fact(engine: MemoryEngine) -> None:
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    engine.remember(MARCO, "home-city", "Marco lives in Turin")
    store = korely_store(engine)

    store.delete(MINE, "home-city")
    store.delete(MINE, "nothing-here")  # nothing to delete: nothing happens
    store.delete(("memories", "marco", "x"), "home-city")  # not where Marco's facts are served

    assert engine.get_facts(GIULIA) == []
    assert engine.history(GIULIA, "home-city")[-1].end_cause is EndCause.FORGOTTEN
    assert store.get(MINE, "home-city") is None
    assert contents(MARCO, engine) == ["Marco lives in Turin"]
    assert "Rome" not in engine.get_context(GIULIA).text


def test_a_correction_made_elsewhere_is_what_the_next_read_serves(engine: MemoryEngine) -> None:
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    store = korely_store(engine)
    before = store.get(MINE, "home-city")

    engine.correct(GIULIA, "home-city", "Giulia lives in Milan")

    after = store.get(MINE, "home-city")
    assert before is not None and after is not None
    assert after.value == served("Giulia lives in Milan")
    assert after.created_at == before.created_at and after.updated_at > before.updated_at


def test_facts_items_hold_are_served_once_and_others_not_at_all(engine: MemoryEngine) -> None:
    """An item anywhere holds its fact (the user's other namespaces, a UUID key, another store
    of the same memory with another rule): it is not served again. Proposals, account facts and
    the agent's own facts are no item of the user's."""
    store = korely_store(engine)
    store.put(MINE, "Nearest Office", {"content": "Her office is the Milan one"})
    store.put(MINE, "0c5d7f3e-9b1a-4d2e-8f6a-1b2c3d4e5f60", {"content": "She likes jazz"})
    store.put((*MINE, "prefs"), "theme", {"content": "Dark mode"})
    other = KorelyStore(engine, account="acme", agent="assistant", namespaces=[("u", "{user}")])
    other.put(("u", "giulia"), "drink", {"content": "She drinks tea"})
    engine.remember(GIULIA, "loyalty", "The account runs a loyalty program", scope=Scope.ACCOUNT)
    engine.remember(THE_AGENT, "hours", "Open from 9 to 18")
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")

    found = store.search(MINE)

    assert sorted(i.key for i in found) == sorted(
        ["Nearest Office", "0c5d7f3e-9b1a-4d2e-8f6a-1b2c3d4e5f60", "theme", "home-city"]
    )
    assert store.get(MINE, "drink") is None and store.get(MINE, "loyalty") is None
    assert len(store.search(("memories",))) == 3, "a prefix naming no user serves no fact"
    assert len(store.search((), query="Rome")) == 4, "the stored items, and no fact"
    assert store.search(("memories", "giulia"), query="Rome")[0].key == "home-city"
    assert store.list_namespaces() == [MINE, (*MINE, "prefs"), ("u", "giulia")]
    assert len(found) == len({(i.namespace, i.key) for i in found})


@langmem_only
async def test_langmem_s_search_tool_finds_what_korely_s_tool_remembered(
    engine: MemoryEngine, use_async: bool
) -> None:
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    model = scripted(call("search_memory", "search-1", query="Where does Giulia live?"), "Rome.")
    agent = create_agent(
        model,
        tools=[create_search_memory_tool(namespace=LANGMEM_NAMESPACE)],
        store=korely_store(engine),
    )

    result = await run(agent, "Where do I live?", use_async, config=AS_GIULIA)

    (found,) = json.loads(reply_to("search-1", result["messages"]))
    assert (found["key"], found["value"]) == ("home-city", served("Giulia lives in Rome"))
    assert found["namespace"] == list(MINE)


INSTANCE = re.compile(r'<instance id=(\S+) schema_type="Memory">')


def patch(messages: list[BaseMessage]) -> AIMessage:
    """trustcall's update step: patch the one memory the manager found."""
    system = messages[0]
    assert isinstance(system, SystemMessage)
    ids = INSTANCE.findall(system.text)
    assert len(ids) == 1 and "Giulia lives in Rome" in system.text, system.text
    return call(
        "PatchDoc",
        "patch-1",
        json_doc_id=ids[0],
        planned_edits="She moved.",
        patches=[{"op": "replace", "path": "/content", "value": "Giulia lives in Milan"}],
    )


@langmem_only
async def test_langmem_s_manager_updates_a_fact_korely_s_tool_remembered(
    engine: MemoryEngine, use_async: bool
) -> None:
    """The manager is shown the served fact and patches it: a new version of the same fact,
    not a second one beside it."""
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    manager = create_memory_store_manager(
        scripted(patch), namespace=LANGMEM_NAMESPACE, store=korely_store(engine)
    )
    conversation = {"messages": [{"role": "user", "content": "I moved to Milan."}]}

    if use_async:
        written = await manager.ainvoke(conversation, config=AS_GIULIA)
    else:
        written = manager.invoke(conversation, config=AS_GIULIA)

    assert [(put["key"], put["value"]) for put in written] == [
        ("home-city", served("Giulia lives in Milan"))
    ]
    assert contents(GIULIA, engine) == ["Giulia lives in Milan"]
    assert [v.content for v in engine.history(GIULIA, "home-city")] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]
    assert Identity("acme", "giulia", "assistant") == GIULIA


def test_a_fact_put_as_an_item_between_the_reads_of_a_search_is_found_once(db_url: str) -> None:
    """A search reads the served facts, then the items. Another process puts the served fact
    as an item in between (LangMem's manager patching it): the search finds it once, as the
    item the put made, never twice nor as the fact's older words."""
    with MemoryEngine(db_url) as engine, MemoryEngine(db_url) as elsewhere:
        engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
        store, other = korely_store(engine), korely_store(elsewhere)
        moved = {"content": "Giulia lives in Milan", "since": 2026}
        done: list[bool] = []

        def between(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
            if not done and "korely_items.value" in statement and "korely_facts" in statement:
                done.append(True)  # the first read of the items, past the facts
                other.put(MINE, "home-city", moved)

        sa.event.listen(engine.db, "before_cursor_execute", between)
        try:
            found = store.search(MINE, query="Where does Giulia live?")
            paged = [i.key for i in store.search(MINE)]
        finally:
            sa.event.remove(engine.db, "before_cursor_execute", between)

        assert done
        assert [(i.key, i.value) for i in found] == [("home-city", moved)]
        assert paged == ["home-city"]
