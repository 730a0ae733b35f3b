"""What `KorelyStore` returns is plain JSON: LangMem encodes it with orjson, which takes no
numpy number.

An embedder may return numpy's numbers (LangChain's `DeterministicFakeEmbedding` does), and a
cosine of them is numpy's too: every score is a plain `float`, and every item `get`, `search`
and `list_namespaces` return (and their async twins) survives `json.dumps` and `orjson.dumps`.
LangMem's `search_memory` tool, in a real agent, answers the model rather than take the run down.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import orjson
import pytest
from langchain.agents import create_agent
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import SearchOp

from korely_memory import MemoryEngine
from langchain_korely import KorelyStore

from ._agents import scripted, skip_async_on_python_3_10, tool_messages
from .test_store_users import AS_GIULIA, LANGMEM_ASYNC, call, langmem_only, reply_to, run

ACCOUNT, AGENT = "acme", "assistant"
MINE = ("memories", "giulia")


def plain(found: Any) -> None:
    """`found` is what JSON encoders take as it is: no numpy number anywhere."""
    json.dumps(found, allow_nan=False)
    orjson.dumps(found)


def kinds(store: KorelyStore) -> None:
    """Items in the user's memory and the agent's own, with words the queries share."""
    store.put(MINE, "drink", {"content": "Giulia drinks tea", "rank": 1.5})
    store.put(MINE, "city", {"content": "Giulia lives in Milan", "tags": ["home", 2]})
    store.put(("faq",), "hours", {"text": "Open from 9 to 18"}, index=False)


@pytest.fixture(params=["index", "engine", "bm25"])
def store(request: pytest.FixtureRequest, db_url: str) -> Any:
    """The store ranking by its index's embedder, by the engine's, or by the engine's BM25: the
    embedders are LangChain's own fake, whose vectors are numpy's numbers."""
    embed = DeterministicFakeEmbedding(size=16)
    engine = MemoryEngine(db_url, embed=embed if request.param == "engine" else None)
    index = {"embed": embed, "dims": 16} if request.param == "index" else None
    with engine:
        made = KorelyStore(engine, account=ACCOUNT, agent=AGENT, index=index)  # type: ignore[arg-type]
        kinds(made)
        yield made


def test_scores_are_plain_floats_and_every_answer_is_json(store: KorelyStore) -> None:
    found = store.search(MINE, query="Where does Giulia live? tea")
    assert len(found) == 2
    assert all(type(item.score) is float for item in found), [type(i.score) for i in found]
    plain([item.dict() for item in found])
    everything = store.search((), query="tea", limit=10)
    assert {item.key for item in everything} == {"drink", "city", "hours"}
    assert all(item.score is None or type(item.score) is float for item in everything)
    plain([item.dict() for item in everything])
    plain([item.dict() for item in store.search(MINE, filter={"rank": 1.5})])
    item = store.get(MINE, "city")
    assert item is not None
    assert item.value == {"content": "Giulia lives in Milan", "tags": ["home", 2]}
    plain(item.dict())
    plain(store.list_namespaces())
    assert store.list_namespaces() == [("faq",), MINE]


async def test_the_async_twins_answer_json_too(store: KorelyStore) -> None:
    found = await store.asearch(MINE, query="tea")
    assert found and all(type(item.score) is float for item in found)
    plain([item.dict() for item in found])
    item = await store.aget(MINE, "drink")
    assert item is not None
    plain(item.dict())
    plain(await store.alist_namespaces(prefix=("memories",)))
    (batched,) = await store.abatch([SearchOp(MINE, None, 10, 0, "tea")])
    assert isinstance(batched, list) and all(type(i.score) is float for i in batched)


@langmem_only
async def test_langmem_s_search_tool_answers_with_an_embedder_of_numpy_numbers(
    engine: MemoryEngine, use_async: bool
) -> None:
    """LangMem's `search_memory` dumps what the store found with orjson: a numpy score took the
    whole `agent.invoke` down ("Type is not JSON serializable")."""
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Importing Send from langgraph.constants")
        from langmem import create_manage_memory_tool, create_search_memory_tool

    embed = DeterministicFakeEmbedding(size=16)
    store = KorelyStore(engine, account=ACCOUNT, agent=AGENT, index={"embed": embed, "dims": 16})
    model = scripted(
        call("manage_memory", "create-1", content="Giulia prefers dark mode", action="create"),
        call("search_memory", "search-1", query="dark mode"),
        "Noted.",
    )
    namespace = ("memories", "{langgraph_user_id}")
    agent = create_agent(
        model,
        tools=[
            create_manage_memory_tool(namespace=namespace),
            create_search_memory_tool(namespace=namespace),
        ],
        store=store,
    )

    result = await run(agent, "I like dark mode.", use_async, config=AS_GIULIA)

    assert not any(m.status == "error" for m in tool_messages(result)), tool_messages(result)
    (found,) = json.loads(reply_to("search-1", result["messages"]))
    assert found["value"] == {"content": "Giulia prefers dark mode"}
    assert type(found["score"]) is float
    assert sys.modules.get("numpy") is not None, "the embedder's vectors were numpy's"
