"""Users' own LangGraph and LangMem code, unchanged, on `KorelyStore`.

What runs is what a user writes: a `create_agent` agent whose `@tool`s reach the store through
`ToolRuntime` (as LangChain's docs on long-term memory show), LangMem's memory tools
(`create_manage_memory_tool`, `create_search_memory_tool`) in such an agent, alone or beside
`KorelyMiddleware`'s tools (a correction by korely's `correct` reaching LangMem's search),
LangMem's background manager (`create_memory_store_manager`) given the store or finding it in a
LangGraph `@entrypoint`, then `KorelyMiddleware` reading what LangMem wrote, and `store.search`
ranked by an embedder (the engine's, or the store's `index`).

Only the chat model is scripted (`_agents.py`, or a reply computed from the prompt);
`create_agent`, LangGraph's runtime, LangMem, trustcall and the engine on SQLite and PostgreSQL
are the real ones. The embedder is a deterministic fake.
"""

from __future__ import annotations

import json
import math
import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.func import entrypoint

from korely_memory import EndCause, Identity, MemoryEngine
from langchain_korely import KorelyMiddleware, KorelyStore

from ._agents import (
    CHANGED,
    ScriptedChatModel,
    ask,
    fake,
    prompt_text,
    scripted,
    skip_async_on_python_3_10,
    tool_messages,
)

LANGMEM_RUNS = sys.version_info >= (3, 11)
langmem_only = pytest.mark.skipif(
    not LANGMEM_RUNS,
    reason="Python 3.10: LangMem 0.0.30 uses typing.NotRequired (Python 3.11), and the test "
    "extra installs it from 3.11 only",
)
if LANGMEM_RUNS:
    with warnings.catch_warnings():
        # trustcall, LangMem's extractor, imports Send from langgraph.constants, which LangGraph
        # 1.0 deprecates: not this project's code, and only a warning.
        warnings.filterwarnings("ignore", message="Importing Send from langgraph.constants")
        from langmem import (
            create_manage_memory_tool,
            create_memory_store_manager,
            create_search_memory_tool,
        )

ACCOUNT = "acme"
AGENT = "assistant"
GIULIA = Identity(ACCOUNT, "giulia", AGENT)
MARCO = Identity(ACCOUNT, "marco", AGENT)
THE_AGENT = Identity(ACCOUNT, None, AGENT)
LANGMEM_NAMESPACE = ("memories", "{langgraph_user_id}")
AS_GIULIA: RunnableConfig = {"configurable": {"langgraph_user_id": "giulia"}}
LANGMEM_ASYNC = (
    "LangMem's tools and manager find the namespace's user (and the store) through LangGraph's "
    "get_config()/get_store(), which an async run does not carry before Python 3.11"
)


def korely_store(engine: MemoryEngine, **options: Any) -> KorelyStore:
    """The store as an application makes it: ("memories", <user>) is that user's memory."""
    return KorelyStore(
        engine, account=ACCOUNT, agent=AGENT, namespaces=(("memories", "{user}"),), **options
    )


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    """A model reply that calls one tool, under an id of its own."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def contents(who: Identity, engine: MemoryEngine) -> list[str]:
    return sorted(fact.content for fact in engine.get_facts(who))


def reply_to(call_id: str, messages: Sequence[BaseMessage]) -> str:
    """What the tool answered to the call `call_id`, as the model reads it."""
    found = [m.text for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    assert len(found) == 1, f"no single answer to {call_id} in {messages}"
    return found[0]


async def run(agent: Any, text: str, use_async: bool, **kwargs: Any) -> dict[str, Any]:
    state = {"messages": [("user", text)]}
    if use_async:
        return await agent.ainvoke(state, **kwargs)  # type: ignore[no-any-return]
    return agent.invoke(state, **kwargs)  # type: ignore[no-any-return]


# 1. The tools of LangChain's long-term memory docs: `runtime.store`, the user from the context.


@dataclass
class Context:
    user_id: str


@tool
def save_preference(topic: str, preference: str, runtime: ToolRuntime[Context]) -> str:
    """Save one of the user's preferences under a topic."""
    store = runtime.store
    assert store is not None, "create_agent(store=...) hands its store to the tools"
    namespace = ("memories", runtime.context.user_id)
    store.put(namespace, topic, {"content": preference})
    saved = store.get(namespace, topic)
    return f"saved {saved.key}: {saved.value['content']}" if saved else "not saved"


@tool
def find_preferences(query: str, runtime: ToolRuntime[Context]) -> str:
    """Look through the user's saved preferences."""
    store = runtime.store
    assert store is not None, "create_agent(store=...) hands its store to the tools"
    found = store.search(("memories", runtime.context.user_id), query=query)
    return "\n".join(f"{item.key}: {item.value['content']}" for item in found) or "nothing"


@tool("save_preference")
async def asave_preference(topic: str, preference: str, runtime: ToolRuntime[Context]) -> str:
    """Save one of the user's preferences under a topic."""
    store = runtime.store
    assert store is not None, "create_agent(store=...) hands its store to the tools"
    namespace = ("memories", runtime.context.user_id)
    await store.aput(namespace, topic, {"content": preference})
    saved = await store.aget(namespace, topic)
    return f"saved {saved.key}: {saved.value['content']}" if saved else "not saved"


@tool("find_preferences")
async def afind_preferences(query: str, runtime: ToolRuntime[Context]) -> str:
    """Look through the user's saved preferences."""
    store = runtime.store
    assert store is not None, "create_agent(store=...) hands its store to the tools"
    found = await store.asearch(("memories", runtime.context.user_id), query=query)
    return "\n".join(f"{item.key}: {item.value['content']}" for item in found) or "nothing"


async def test_runtime_store_tools_write_facts_of_the_user(
    engine: MemoryEngine, use_async: bool
) -> None:
    """A tool's `runtime.store.put` is a fact of the user its namespace names, read back by
    `get` and `search`, in the engine's facts and in the block the engine hands an agent."""
    tools = (
        [asave_preference, afind_preferences] if use_async else [save_preference, find_preferences]
    )
    model = scripted(
        call("save_preference", "save-1", topic="reply-language", preference="Answer in Italian"),
        call(
            "save_preference",
            "save-2",
            topic="Nearest Office",  # not a korely key: the store derives one, `get` still finds it
            preference="Her nearest office is the Milan one",
        ),
        call("find_preferences", "find-1", query="Italian"),
        "Noted: answers in Italian.",
    )
    agent = create_agent(model, tools=tools, store=korely_store(engine), context_schema=Context)

    result = await run(
        agent, "Please always answer me in Italian.", use_async, context=Context("giulia")
    )

    assert reply_to("save-1", result["messages"]) == "saved reply-language: Answer in Italian"
    assert reply_to("save-2", result["messages"]) == (
        "saved Nearest Office: Her nearest office is the Milan one"
    )
    assert "reply-language: Answer in Italian" in reply_to("find-1", result["messages"])
    assert contents(GIULIA, engine) == ["Answer in Italian", "Her nearest office is the Milan one"]
    assert "reply-language" in [fact.key for fact in engine.get_facts(GIULIA)]
    assert "Answer in Italian" in engine.get_context(GIULIA, "Which language do I use?").text
    assert contents(MARCO, engine) == [] and contents(THE_AGENT, engine) == []


# 2. LangMem's memory tools in an agent, the user from `langgraph_user_id`.


def fact_key(engine: MemoryEngine) -> str:
    """The key of Giulia's one fact: what her block shows, and what korely's tools name."""
    (fact,) = engine.get_facts(GIULIA)
    return fact.key


def created_id(messages: Sequence[BaseMessage]) -> str:
    """The memory id LangMem's manage tool told the model it created."""
    found = re.search(r"created memory ([0-9a-f-]{36})", reply_to("create-1", messages))
    assert found, "LangMem's tool did not say which memory it created"
    return found.group(1)


@langmem_only
async def test_langmem_tools_create_update_search_delete(
    engine: MemoryEngine, use_async: bool
) -> None:
    """LangMem's `manage_memory` creates a fact of the configured user, updates it as a new
    version, deletes it as forgotten; its `search_memory` finds what was written."""
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    model = scripted(
        call("manage_memory", "create-1", content="Giulia prefers dark mode", action="create"),
        call("search_memory", "search-1", query="dark mode"),
        lambda messages: call(
            "manage_memory",
            "update-1",
            content="Giulia prefers light mode in the morning",
            action="update",
            id=created_id(messages),
        ),
        "Noted.",
    )
    agent = create_agent(
        model,
        tools=[
            create_manage_memory_tool(namespace=LANGMEM_NAMESPACE),
            create_search_memory_tool(namespace=LANGMEM_NAMESPACE),
        ],
        store=korely_store(engine),
    )

    first = await run(
        agent, "I like dark mode, but light in the morning.", use_async, config=AS_GIULIA
    )

    key = created_id(first["messages"])
    assert reply_to("update-1", first["messages"]) == f"updated memory {key}"
    found = json.loads(reply_to("search-1", first["messages"]))
    assert [(item["key"], item["value"]["content"]) for item in found] == [
        (key, "Giulia prefers dark mode")
    ]
    facts = engine.get_facts(GIULIA)
    assert [fact.content for fact in facts] == ["Giulia prefers light mode in the morning"]
    # A block shows each fact's key: a UUID is kept short ("memory-" and 12 hex digits).
    assert re.fullmatch("memory-[0-9a-f]{12}", facts[0].key)
    versions = engine.history(GIULIA, facts[0].key)
    assert [version.content for version in versions] == [
        "Giulia prefers dark mode",
        "Giulia prefers light mode in the morning",
    ]
    assert contents(MARCO, engine) == [] and contents(THE_AGENT, engine) == []

    model.replies += [
        call("manage_memory", "delete-1", action="delete", id=key),
        call("search_memory", "search-2", query="light mode"),
        "Forgotten.",
    ]
    second = await run(agent, "Forget my display preference.", use_async, config=AS_GIULIA)

    assert reply_to("delete-1", second["messages"]) == f"Deleted memory {key}"
    assert json.loads(reply_to("search-2", second["messages"])) == []
    assert engine.get_facts(GIULIA) == []
    last = engine.history(GIULIA, facts[0].key)[-1]
    assert last.content == "Giulia prefers light mode in the morning"
    assert last.end_cause is EndCause.FORGOTTEN
    assert not any(m.status == "error" for m in tool_messages(first) + tool_messages(second))


@langmem_only
async def test_a_korely_correction_of_a_langmem_memory_reaches_langmem(
    engine: MemoryEngine, use_async: bool
) -> None:
    """One agent with LangMem's tools and `KorelyMiddleware`'s: the model corrects, with
    korely's `correct` tool, the memory LangMem's tool created (by the key a block shows), and
    LangMem's search then finds the corrected words."""
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    model = scripted(
        call("manage_memory", "create-1", content="Giulia works in the Payments team"),
        lambda _: call(
            "correct",
            "correct-1",
            key=fact_key(engine),  # the key her block shows for the memory
            content="Giulia works in the Billing team",
        ),
        call("search_memory", "search-1", query="team"),
        "Noted.",
    )
    agent = create_agent(
        model,
        tools=[
            create_manage_memory_tool(namespace=LANGMEM_NAMESPACE),
            create_search_memory_tool(namespace=LANGMEM_NAMESPACE),
        ],
        middleware=[
            KorelyMiddleware(
                engine,
                reader="assistant-bot",
                identity_from=lambda run: Identity(
                    ACCOUNT, run.config["configurable"]["langgraph_user_id"], AGENT
                ),
            )
        ],
        store=korely_store(engine),
    )

    result = await run(agent, "I moved from Payments to Billing.", use_async, config=AS_GIULIA)

    key = created_id(result["messages"])
    assert not any(m.status == "error" for m in tool_messages(result)), tool_messages(result)
    found = json.loads(reply_to("search-1", result["messages"]))
    assert [(item["key"], item["value"]) for item in found] == [
        (key, {"content": "Giulia works in the Billing team"})
    ]
    item = korely_store(engine).get(("memories", "giulia"), key)
    assert item is not None and item.value == {"content": "Giulia works in the Billing team"}
    assert [v.content for v in engine.history(GIULIA, fact_key(engine))] == [
        "Giulia works in the Payments team",
        "Giulia works in the Billing team",
    ]


# 3. LangMem's background manager writes; `KorelyMiddleware` reads it to the next agent.


INSTANCE = re.compile(r'<instance id=(\S+) schema_type="Memory">')


def patch_the_memory(messages: list[BaseMessage]) -> AIMessage:
    """trustcall's update step: patch the one existing memory the prompt lists."""
    system = messages[0]
    assert isinstance(system, SystemMessage), "trustcall sends the existing memories first"
    ids = INSTANCE.findall(system.text)
    assert len(ids) == 1, f"the manager found {len(ids)} existing memories: {system.text}"
    return call(
        "PatchDoc",
        "patch-1",
        json_doc_id=ids[0],
        planned_edits="She eats fish now.",
        patches=[{"op": "replace", "path": "/content", "value": "Giulia eats fish, no meat"}],
    )


async def manage(
    manager_model: ScriptedChatModel,
    store: KorelyStore,
    conversation: list[dict[str, str]],
    wiring: str,
    use_async: bool,
) -> list[dict[str, Any]]:
    """One pass of LangMem's manager over a conversation, as the user wired it."""
    if wiring == "store":
        manager = create_memory_store_manager(
            manager_model, namespace=LANGMEM_NAMESPACE, store=store
        )
        if use_async:
            written: list[dict[str, Any]] = await manager.ainvoke(
                {"messages": conversation}, config=AS_GIULIA
            )
        else:
            written = manager.invoke({"messages": conversation}, config=AS_GIULIA)
        return written
    # LangMem's docs: the manager inside a workflow, finding the store with get_store().
    manager = create_memory_store_manager(manager_model, namespace=LANGMEM_NAMESPACE)
    if use_async:

        @entrypoint(store=store)
        async def aremember(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
            done: list[dict[str, Any]] = await manager.ainvoke({"messages": messages})
            return done

        return await aremember.ainvoke(conversation, config=AS_GIULIA)  # type: ignore[return-value]

    @entrypoint(store=store)
    def remember(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
        done: list[dict[str, Any]] = manager.invoke({"messages": messages})
        return done

    return remember.invoke(conversation, config=AS_GIULIA)  # type: ignore[return-value]


@langmem_only
@pytest.mark.parametrize("wiring", ["store", "entrypoint"])
async def test_langmem_manager_writes_what_the_middleware_reads(
    engine: MemoryEngine, use_async: bool, wiring: str
) -> None:
    """LangMem's manager extracts a memory (a fact of the configured user), then updates it in
    a later conversation (a new version of the same fact); an agent with `KorelyMiddleware` for
    that user is given the latest."""
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    store = korely_store(engine)
    manager_model = scripted(
        call("Memory", "extract-1", content="Giulia is vegetarian"),
        patch_the_memory,
    )

    written = await manage(
        manager_model,
        store,
        [
            {"role": "user", "content": "Book me dinner; remember I'm vegetarian."},
            {"role": "assistant", "content": "Booked, a vegetarian menu."},
        ],
        wiring,
        use_async,
    )

    assert [put["value"] for put in written] == [
        {"kind": "Memory", "content": {"content": "Giulia is vegetarian"}}
    ]
    key = written[0]["key"]
    assert [fact.content for fact in engine.get_facts(GIULIA)] == ["Giulia is vegetarian"]
    item = store.get(("memories", "giulia"), key)
    assert item is not None and item.value == written[0]["value"]

    rewritten = await manage(
        manager_model,
        store,
        [
            {"role": "user", "content": "I'm not strictly vegetarian any more: I eat fish now."},
            {"role": "assistant", "content": "Noted: no longer vegetarian, fish is fine."},
        ],
        wiring,
        use_async,
    )

    assert manager_model.replies == [], "the manager did not ask the model twice"
    assert [(put["key"], put["value"]) for put in rewritten] == [
        (key, {"kind": "Memory", "content": {"content": "Giulia eats fish, no meat"}})
    ]
    assert [v.content for v in engine.history(GIULIA, fact_key(engine))] == [
        "Giulia is vegetarian",
        "Giulia eats fish, no meat",
    ]
    assert contents(MARCO, engine) == [] and contents(THE_AGENT, engine) == []

    model = scripted("A fish restaurant, then.")
    agent = create_agent(
        model,
        system_prompt="You are Giulia's assistant.",
        middleware=[
            KorelyMiddleware(
                engine,
                reader="assistant-bot",
                identity_from=lambda run: Identity(
                    ACCOUNT, run.config["configurable"]["langgraph_user_id"], AGENT
                ),
            )
        ],
        store=store,
    )
    await run(agent, "Where should we go for dinner?", use_async, config=AS_GIULIA)

    assert "Giulia eats fish, no meat" in model.prompts[0]
    assert "Giulia is vegetarian" not in model.prompts[0]


@langmem_only
async def test_langmem_manager_updates_a_memory_its_query_has_no_word_of(
    engine: MemoryEngine, use_async: bool
) -> None:
    """LangMem's manager looks for the memories to update with the conversation's last message
    as the query. LangGraph's stores answer a query with the namespace's items ranked, never
    filtered out: the manager is shown the memory and updates it, rather than add a second."""
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    store = korely_store(engine)
    store.put(
        ("memories", "giulia"),
        "diet",
        {"kind": "Memory", "content": {"content": "Giulia is vegetarian"}},
    )
    manager = create_memory_store_manager(
        scripted(patch_the_memory), namespace=LANGMEM_NAMESPACE, store=store
    )
    conversation = [
        {"role": "user", "content": "I eat fish now."},
        {"role": "assistant", "content": "Noted, fish it is."},
    ]

    if use_async:
        written: list[dict[str, Any]] = await manager.ainvoke(
            {"messages": conversation}, config=AS_GIULIA
        )
    else:
        written = manager.invoke({"messages": conversation}, config=AS_GIULIA)

    assert [(put["key"], put["value"]["content"]) for put in written] == [
        ("diet", {"content": "Giulia eats fish, no meat"})
    ]
    assert [fact.content for fact in engine.get_facts(GIULIA)] == ["Giulia eats fish, no meat"]
    assert len(engine.history(GIULIA, "diet")) == 2


# 4. Search ranked by an embedder: the engine's, or the store's `index`.


TOPICS = (
    ("coffee", "espresso", "cappuccino", "latte"),
    ("flight", "airport", "train", "trip"),
    ("jazz", "piano", "concert", "music"),
)


class TopicEmbeddings(Embeddings):
    """Deterministic: how many words of each topic a text has, and a constant 1."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        words = re.findall(r"[a-z]+", text.lower())
        return [float(sum(word in topic for word in words)) for topic in TOPICS] + [1.0]


def nearest_first(query: str, texts: Sequence[str]) -> list[str]:
    embed = TopicEmbeddings()
    q = embed.embed_query(query)

    def cosine(text: str) -> float:
        v = embed.embed_query(text)
        dot = sum(a * b for a, b in zip(q, v, strict=True))
        return dot / (math.hypot(*q) * math.hypot(*v))

    return sorted(texts, key=cosine, reverse=True)


# No query below shares a word with any of them, and neither the order they are written in, nor
# its reverse, nor their keys' order is the order of any query: only the embedder ranks them.
PREFERENCES = {
    "travel": "She flies from Linate airport",
    "hobby": "She plays jazz piano at weekends",
    "drink": "She starts every day with a cappuccino",
}


@pytest.mark.parametrize("embedder", ["engine", "index"])
async def test_search_ranks_by_the_embedder(db_url: str, embedder: str) -> None:
    """`store.search(ns, query=...)` puts the item nearest the query first, by the engine's
    embedder when the store has no `index`, by the index's when given one."""
    with MemoryEngine(db_url, embed=TopicEmbeddings() if embedder == "engine" else None) as eng:
        index = {"dims": 4, "embed": TopicEmbeddings(), "fields": ["content"]}
        store = korely_store(eng, index=index) if embedder == "index" else korely_store(eng)
        namespace = ("memories", "giulia")
        for key, text in PREFERENCES.items():
            store.put(namespace, key, {"content": text})

        for query in ("espresso", "a train"):
            expected = nearest_first(query, list(PREFERENCES.values()))
            found = store.search(namespace, query=query)
            assert [item.value["content"] for item in found] == expected, query
            afound = await store.asearch(namespace, query=query, limit=1)
            assert [item.value["content"] for item in afound] == expected[:1], query
            scores = [item.score for item in found if item.score is not None]
            assert len(scores) == len(found), "a ranked search scores every item"
            assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1], scores


# 5. A put is a new version: an agent's `KorelyMiddleware` reader is told of it once.


async def test_a_reader_is_told_once_of_what_a_store_put_changed(
    engine: MemoryEngine, use_async: bool
) -> None:
    """Three conversations of one agent (`KorelyMiddleware` with a reader, and the store), while
    another part of the application puts through the store between the first two: the second
    prompt holds the change, the third does not."""
    store = korely_store(engine)
    store.put(("memories", "giulia"), "home-city", {"content": "Giulia lives in Rome"})
    model = fake("Hello.", "Noted.", "Hello again.")
    agent = create_agent(
        model,
        system_prompt="You are Giulia's assistant.",
        middleware=[KorelyMiddleware(engine, reader="assistant-bot")],
        store=store,
    )

    await ask(agent, "Hi", GIULIA, use_async)
    store.put(("memories", "giulia"), "home-city", {"content": "Giulia lives in Milan"})
    await ask(agent, "I moved", GIULIA, use_async)
    await ask(agent, "Hi again", GIULIA, use_async)

    first, second, third = (prompt_text(messages) for messages in model.received)
    told = [line for line in second.splitlines() if "was: " in line]
    assert "Giulia lives in Rome" in first and CHANGED not in first
    assert len(told) == 1 and "Rome" in told[0] and "Milan" in told[0].split("now:")[1]
    assert CHANGED not in third and "Giulia lives in Milan" in third
