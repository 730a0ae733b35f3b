"""LangGraph's own BaseStore tests, run against KorelyStore on SQLite and PostgreSQL: the async
API (``abatch``, ``aget``, ``aput``, ``asearch``, ``alist_namespaces``, ``adelete``), and the
sync one from worker threads while an event loop runs.

Ported from https://github.com/langchain-ai/langgraph at commit
f09cfe8ffc1eeffd68f4b628ed69c30f7cad229f:

- ``libs/checkpoint/tests/test_store.py``, its async tests (run there against
  ``InMemoryStore`` and ``MockAsyncBatchedStore``, an ``AsyncBatchedBaseStore`` over it),
- ``libs/checkpoint-sqlite/tests/test_async_store.py`` (``AsyncSqliteStore``),
- ``libs/checkpoint-postgres/tests/test_async_store.py`` (``AsyncPostgresStore``).

LangGraph's tests are MIT-licensed (Copyright (c) 2024 LangChain, Inc.). A test that is in
more than one of these suites is here once, with the assertions of every version (the
PostgreSQL ``test_batch_search_ops`` counts what the SQLite one only types; the PostgreSQL
``test_vector_search_with_filters`` checks what the SQLite one runs without checking). The
synchronous tests of the same suites are in ``test_store_langgraph.py``; a test both have
is in each, on its own API. Every test runs on SQLite and on PostgreSQL (``db_url``).

Adapted (see also ``test_store_langgraph.py``, whose stores, clock and TTL these share):

- The stores: ``store`` is LangGraph's PostgreSQL ``store`` fixture (a TTL of 6 seconds,
  refresh on read, the sweeper started every 0.1 s of real time) on an engine with a
  ``FakeClock``; ``vector_store`` the fake embeddings on the whole value; cosine similarity
  only (no pgvector ``vector``/``halfvec`` × ``l2``/``inner_product``/``cosine``
  parametrisation, no SQLite ``memory``/``file`` one).
- Time: where the TTL tests sleep (``asyncio.sleep`` of 4 to 5 seconds, four times) they
  move the engine's clock on; ``_aexpire_now``, ``_arow_exists``, ``_astored_expires_at``
  and the backdating of ``updated_at`` become moving the clock and reading, as in the sync
  module. The SQLite ``test_basic_store_ops`` sleeps 1.01 s between a put and its update;
  here the clock moves on a second.
- Sizes: ``test_large_batches_async`` runs 20 × 10 × 6 operations (PostgreSQL 1000 × 10 × 6,
  SQLite 100 × 10 × 6), and ``test_large_batches`` (sync methods from 10 threads) 20 × 10 × 6
  (100 × 10 × 6): the same mix of put, get, list, search, put and delete of the same keys,
  in seconds rather than minutes.
- ``test_async_batched_vector_search_concurrent`` ran on ``MockAsyncBatchedStore``, which
  keeps the order of concurrent calls; KorelyStore runs each call by itself, so its put,
  delete and put-again waves are awaited one after another (each wave concurrent), then
  the nine filtered searches run concurrently as in the original.
- InMemoryStore's ``test_cannot_put_empty_namespace``: its async half, on KorelyStore, with
  the checks its ``MockAsyncBatchedStore`` half adds (a search without a query, an
  ``abatch`` put in a valid namespace); the sync half is in the sync module.
- InMemoryStore's async ``test_embed_with_path`` is three tests, as in the sync module
  (store-level fields, a put's own ``index=``, an unindexed item in a search with a query);
  its ``ccc`` query is compared with 0.9 as the SQLite and PostgreSQL versions do.
- ``test_vector_store_initialization`` checks attributes, not async behaviour: it is in the
  sync module only.

Left out, as tests of the peer stores' internals:

- ``test_no_running_loop`` (SQLite and PostgreSQL): their async classes refuse sync calls
  from the event loop's thread with ``InvalidStateError``; KorelyStore is one class with
  both APIs.
- ``test_abatch_uses_single_pool_checkout``: AsyncPostgresStore's connection pool.
- ``test_async_batch_store``, ``test_async_batch_store_handles_cancellation``,
  ``test_async_batch_store_resilience``, ``test_async_batch_store_deduplication``:
  ``AsyncBatchedBaseStore``'s batching task, its cancellation and its deduplication of
  concurrent calls, with a stub store and ``mocker``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
)

from langchain_korely import KorelyStore

from ._langgraph_store import (
    TTL_MINUTES,
    TTL_SECONDS,
    CharacterEmbeddings,
    FakeClock,
    aeventually,
    index_config,
    keys,
    korely_store,
    namespaces,
    score,
    sweeping_ttl,
)

LARGE_N = 20
"""Keys per round in the large batches (LangGraph: 100 and 1000)."""
LARGE_M = 10
"""Rounds in the large batches, as in LangGraph."""


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[KorelyStore]:
    """LangGraph's PostgreSQL ``store``: default TTL, refresh on read, the sweeper running."""
    with korely_store(db_url, clock=clock, ttl=sweeping_ttl(), sweeping=True) as opened:
        yield opened


@pytest.fixture
def vector_store(db_url: str, fake_embeddings: CharacterEmbeddings) -> Iterator[KorelyStore]:
    """LangGraph's PostgreSQL async ``vector_store``: the fake embeddings on the whole value."""
    with korely_store(db_url, index=index_config(fake_embeddings)) as opened:
        yield opened


async def test_aput_refuses_invalid_namespaces_but_abatch_takes_a_langgraph_root(
    store: KorelyStore,
) -> None:
    """The async half of InMemoryStore's ``test_cannot_put_empty_namespace``."""
    doc = {"foo": "bar"}

    with pytest.raises(InvalidNamespaceError):
        await store.aput((), "foo", doc)
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("the", "thing.about"), "foo", doc)
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("some", "fun", ""), "foo", doc)
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("langgraph", "foo"), "bar", doc)

    await store.aput(("foo", "langgraph", "foo"), "bar", doc)
    item = await store.aget(("foo", "langgraph", "foo"), "bar")
    assert item is not None and item.value == doc
    assert (await store.asearch(("foo", "langgraph", "foo")))[0].value == doc
    assert (await store.asearch(("foo", "langgraph", "foo"), query="bar"))[0].value == doc
    await store.adelete(("foo", "langgraph", "foo"), "bar")
    assert await store.aget(("foo", "langgraph", "foo"), "bar") is None

    # Past the public put API.
    await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
    item = await store.aget(("langgraph", "foo"), "bar")
    assert item is not None and item.value == doc
    assert (await store.asearch(("langgraph", "foo")))[0].value == doc
    await store.adelete(("langgraph", "foo"), "bar")
    assert await store.aget(("langgraph", "foo"), "bar") is None

    await store.abatch([PutOp(("valid", "namespace"), "key", doc)])
    item = await store.aget(("valid", "namespace"), "key")
    assert item is not None and item.value == doc
    assert (await store.asearch(("valid", "namespace")))[0].value == doc
    await store.adelete(("valid", "namespace"), "key")
    assert await store.aget(("valid", "namespace"), "key") is None


async def test_large_batches(store: KorelyStore) -> None:
    """The sync API from ten threads at once, while the event loop runs."""
    with ThreadPoolExecutor(max_workers=10) as executor:
        futures: list[Future[Any]] = []
        for m in range(LARGE_M):
            ns = ("test", "foo", "bar", "baz", str(m % 2))
            for i in range(LARGE_N):
                futures += [
                    executor.submit(store.put, ns, f"key{i}", value={"foo": "bar" + str(i)}),
                    executor.submit(store.get, ns, f"key{i}"),
                    executor.submit(store.list_namespaces, prefix=None, max_depth=m + 1),
                    executor.submit(store.search, ("test",)),
                    executor.submit(store.put, ns, f"key{i}", value={"foo": "bar" + str(i)}),
                    executor.submit(store.put, ns, f"key{i}", None),
                ]

        results = await asyncio.gather(*(asyncio.wrap_future(future) for future in futures))
    assert len(results) == LARGE_M * LARGE_N * 6


async def test_large_batches_async(store: KorelyStore) -> None:
    coros = []
    for m in range(LARGE_M):
        ns = ("test", "foo", "bar", "baz", str(m % 2))
        for i in range(LARGE_N):
            coros += [
                store.aput(ns, f"key{i}", value={"foo": "bar" + str(i)}),
                store.aget(ns, f"key{i}"),
                store.alist_namespaces(prefix=None, max_depth=m + 1),
                store.asearch(("test",)),
                store.aput(ns, f"key{i}", value={"foo": "bar" + str(i)}),
                store.adelete(ns, f"key{i}"),
            ]

    results = await asyncio.gather(*coros)
    assert len(results) == LARGE_M * LARGE_N * 6


async def test_abatch_order(store: KorelyStore) -> None:
    await store.aput(("test", "foo"), "key1", {"data": "value1"})
    await store.aput(("test", "bar"), "key2", {"data": "value2"})

    ops: list[Op] = [
        GetOp(namespace=("test", "foo"), key="key1"),
        PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
        SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        GetOp(namespace=("test",), key="key3"),
    ]

    results: list[Any] = await store.abatch(ops)
    assert len(results) == 5
    assert isinstance(results[0], Item)
    assert isinstance(results[0].value, dict)
    assert results[0].value == {"data": "value1"}
    assert results[0].key == "key1"
    assert results[1] is None
    assert isinstance(results[2], list)
    assert len(results[2]) == 1
    assert isinstance(results[3], list)
    assert ("test", "foo") in results[3] and ("test", "bar") in results[3]
    assert results[4] is None

    ops_reordered: list[Op] = [
        SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
        GetOp(namespace=("test", "bar"), key="key2"),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
        PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
        GetOp(namespace=("test", "foo"), key="key1"),
    ]

    results = await store.abatch(ops_reordered)
    assert len(results) == 5
    assert isinstance(results[0], list)
    assert len(results[0]) == 2
    assert isinstance(results[1], Item)
    assert results[1].value == {"data": "value2"}
    assert results[1].key == "key2"
    assert isinstance(results[2], list)
    assert ("test", "foo") in results[2] and ("test", "bar") in results[2]
    assert results[3] is None
    assert isinstance(results[4], Item)
    assert results[4].value == {"data": "value1"}
    assert results[4].key == "key1"


async def test_batch_get_ops(store: KorelyStore) -> None:
    await store.aput(("test",), "key1", {"data": "value1"})
    await store.aput(("test",), "key2", {"data": "value2"})

    ops: list[Op] = [
        GetOp(namespace=("test",), key="key1"),
        GetOp(namespace=("test",), key="key2"),
        GetOp(namespace=("test",), key="key3"),
    ]

    results: list[Any] = await store.abatch(ops)

    assert len(results) == 3
    assert results[0] is not None
    assert results[1] is not None
    assert results[2] is None
    assert results[0].key == "key1"
    assert results[1].key == "key2"


async def test_batch_put_ops(store: KorelyStore) -> None:
    ops: list[Op] = [
        PutOp(namespace=("test",), key="key1", value={"data": "value1"}),
        PutOp(namespace=("test",), key="key2", value={"data": "value2"}),
        PutOp(namespace=("test",), key="key3", value=None),
    ]

    results = await store.abatch(ops)
    assert len(results) == 3
    assert all(result is None for result in results)

    items = await store.asearch(("test",), limit=10)
    assert len(items) == 2  # key3 had None value so wasn't stored


async def test_batch_search_ops(store: KorelyStore) -> None:
    await store.aput(("test", "foo"), "key1", {"data": "value1"})
    await store.aput(("test", "bar"), "key2", {"data": "value2"})

    ops: list[Op] = [
        SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
        SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
    ]

    results: list[Any] = await store.abatch(ops)

    assert len(results) == 2
    assert len(results[0]) == 1
    assert len(results[1]) == 2


async def test_batch_list_namespaces_ops(store: KorelyStore) -> None:
    await store.aput(("test", "namespace1"), "key1", {"data": "value1"})
    await store.aput(("test", "namespace2"), "key2", {"data": "value2"})

    ops: list[Op] = [ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0)]

    results: list[Any] = await store.abatch(ops)

    assert len(results) == 1
    assert len(results[0]) == 2
    assert ("test", "namespace1") in results[0]
    assert ("test", "namespace2") in results[0]


# Vector search with the fake embeddings.


async def test_vector_insert_with_auto_embedding(vector_store: KorelyStore) -> None:
    docs = [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
        ("doc6", {"body": "text in body field"}),
    ]
    for key, value in docs:
        await vector_store.aput(("test",), key, value)

    results = await vector_store.asearch(("test",), query="long text")
    assert len(results) > 0

    doc_order = keys(results)
    assert "doc2" in doc_order
    assert "doc3" in doc_order


async def test_vector_update_with_embedding(vector_store: KorelyStore) -> None:
    await vector_store.aput(("test",), "doc1", {"text": "zany zebra Xerxes"})
    await vector_store.aput(("test",), "doc2", {"text": "something about dogs"})
    await vector_store.aput(("test",), "doc3", {"text": "text about birds"})

    results_initial = await vector_store.asearch(("test",), query="Zany Xerxes")
    assert len(results_initial) > 0
    assert results_initial[0].key == "doc1"
    initial_score = score(results_initial[0])

    await vector_store.aput(("test",), "doc1", {"text": "new text about dogs"})

    results_after = await vector_store.asearch(("test",), query="Zany Xerxes")
    after_score = next((score(r) for r in results_after if r.key == "doc1"), 0.0)
    assert after_score < initial_score

    results_new = await vector_store.asearch(("test",), query="new text about dogs")
    for r in results_new:
        if r.key == "doc1":
            assert score(r) > after_score

    # Don't index this one
    await vector_store.aput(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    results_new = await vector_store.asearch(("test",), query="new text about dogs", limit=3)
    assert not any(r.key == "doc4" for r in results_new)


async def test_vector_search_with_filters(vector_store: KorelyStore) -> None:
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        await vector_store.aput(("test",), key, value)

    results = await vector_store.asearch(("test",), query="apple", filter={"color": "red"})
    assert len(results) == 2
    assert results[0].key == "doc1"

    results = await vector_store.asearch(("test",), query="car", filter={"color": "red"})
    assert len(results) == 2
    assert results[0].key == "doc2"

    results = await vector_store.asearch(
        ("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}}
    )
    assert len(results) == 3
    assert results[0].key == "doc4"

    results = await vector_store.asearch(
        ("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
    )
    assert len(results) == 1
    assert results[0].key == "doc3"


async def test_vector_search_concurrent_with_filters(vector_store: KorelyStore) -> None:
    """InMemoryStore's ``test_async_batched_vector_search_concurrent``."""
    colors = ["red", "blue", "green", "yellow", "purple"]
    items = ["apple", "car", "house", "book", "phone"]
    scores = [3.0, 3.5, 4.0, 4.5, 5.0]

    docs = []
    for i in range(50):
        color = colors[i % len(colors)]
        item = items[i % len(items)]
        docs.append(
            (
                f"doc{i}",
                {"text": f"{color} {item}", "color": color, "score": scores[i % 5], "index": i},
            )
        )
    await asyncio.gather(*(vector_store.aput(("test",), key, value) for key, value in docs))
    await asyncio.gather(*(vector_store.adelete(("test",), key) for key, _ in docs))
    await asyncio.gather(*(vector_store.aput(("test",), key, value) for key, value in docs))

    search_queries: list[tuple[str, dict[str, Any]]] = [
        ("apple", {"color": "red"}),
        ("car", {"color": "blue"}),
        ("house", {"color": "green"}),
        ("phone", {"score": {"$gt": 4.99}}),
        ("book", {"score": {"$lte": 3.5}}),
        ("apple", {"score": {"$gte": 3.0}, "color": "red"}),
        ("car", {"score": {"$lt": 5.1}, "color": "blue"}),
        ("house", {"index": {"$gt": 25}}),
        ("phone", {"index": {"$lte": 10}}),
    ]

    all_results = await asyncio.gather(
        *(
            vector_store.asearch(("test",), query=query, filter=filter_)
            for query, filter_ in search_queries
        )
    )

    for results, (query, filter_) in zip(all_results, search_queries, strict=True):
        assert len(results) > 0, f"No results for query '{query}' with filter {filter_}"
        for result in results:
            if "color" in filter_:
                assert result.value["color"] == filter_["color"]
            for field in ("score", "index"):
                for op, bound in filter_.get(field, {}).items():
                    assert _holds(result.value[field], op, bound), (result.value, filter_)


def _holds(found: float, op: str, bound: float) -> bool:
    return {
        "$gt": found > bound,
        "$gte": found >= bound,
        "$lt": found < bound,
        "$lte": found <= bound,
    }[op]


async def test_vector_search_pagination(vector_store: KorelyStore) -> None:
    for i in range(5):
        await vector_store.aput(("test",), f"doc{i}", {"text": f"test document number {i}"})

    results_page1 = await vector_store.asearch(("test",), query="test", limit=2)
    results_page2 = await vector_store.asearch(("test",), query="test", limit=2, offset=2)

    assert len(results_page1) == 2
    assert len(results_page2) == 2
    assert results_page1[0].key != results_page2[0].key

    all_results = await vector_store.asearch(("test",), query="test", limit=10)
    assert len(all_results) == 5


async def test_vector_search_edge_cases(vector_store: KorelyStore) -> None:
    await vector_store.aput(("test",), "doc1", {"text": "test document"})

    perfect_match = await vector_store.asearch(("test",), query="text test document")
    perfect_score = score(perfect_match[0])

    results = await vector_store.asearch(("test",), query="")
    assert len(results) == 1
    assert results[0].score is None

    results = await vector_store.asearch(("test",), query=None)
    assert len(results) == 1
    assert results[0].score is None

    results = await vector_store.asearch(("test",), query="test " * 100)
    assert len(results) == 1

    results = await vector_store.asearch(("test",), query="foo " * 100)
    assert len(results) == 1
    assert score(results[0]) < perfect_score

    results = await vector_store.asearch(("test",), query="test!@#$%^&*()")
    assert len(results) == 1
    assert score(results[0]) < perfect_score


async def test_embed_with_path(db_url: str, fake_embeddings: CharacterEmbeddings) -> None:
    """Store-level ``fields``: only those paths are embedded, each as a vector of its own."""
    fields = ["key0", "key1", "key3"]  # key2 isn't included: don't index it
    with korely_store(db_url, index=index_config(fake_embeddings, fields)) as store:
        # This will have 2 vectors representing it
        doc1 = {
            # Omit key0 - check it doesn't raise an error
            "key1": "xxx",
            "key2": "yyy",
            "key3": "zzz",
        }
        # This will have 3 vectors representing it
        doc2 = {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"}
        await store.aput(("test",), "doc1", doc1)
        await store.aput(("test",), "doc2", doc2)

        # doc2.key3 and doc1.key1 both would have the highest score
        results = await store.asearch(("test",), query="xxx")
        assert len(results) == 2
        assert results[0].key != results[1].key
        ascore = score(results[0])
        bscore = score(results[1])
        assert ascore == pytest.approx(bscore, abs=1e-5)
        assert ascore > 0.9
        assert bscore > 0.9

        # ~Only match doc2
        results = await store.asearch(("test",), query="uuu")
        assert len(results) == 2
        assert results[0].key != results[1].key
        assert results[0].key == "doc2"
        assert score(results[0]) > score(results[1])
        assert ascore == pytest.approx(score(results[0]), abs=1e-5)

        # Un-indexed - will have low results for both. Not zero (because we're projecting)
        # but less than the above.
        results = await store.asearch(("test",), query="www")
        assert len(results) == 2
        assert score(results[0]) < ascore
        assert score(results[1]) < ascore
        assert score(results[0]) < 0.9
        assert score(results[1]) < 0.9


async def test_embed_with_path_operation_config(
    db_url: str, fake_embeddings: CharacterEmbeddings
) -> None:
    """A put's ``index=`` paths replace the store's ``fields``; ``index=False`` embeds nothing."""
    with korely_store(db_url, index=index_config(fake_embeddings, ["key17"])) as store:
        doc3 = {"key0": "aaa", "key1": "bbb", "key2": "ccc", "key3": "ddd"}
        doc4 = {
            "key0": "eee",
            "key1": "bbb",  # Same as doc3.key1
            "key2": "fff",
            "key3": "ggg",
        }
        await store.aput(("test",), "doc3", doc3, index=["key0", "key1"])
        await store.aput(("test",), "doc4", doc4, index=["key1", "key3"])

        results = await store.asearch(("test",), query="aaa")
        assert len(results) == 2
        assert results[0].key == "doc3"
        assert score(results[0]) > score(results[1])

        results = await store.asearch(("test",), query="ggg")
        assert len(results) == 2
        assert results[0].key == "doc4"
        assert score(results[0]) > score(results[1])

        results = await store.asearch(("test",), query="bbb")
        assert len(results) == 2
        assert results[0].key != results[1].key
        assert score(results[0]) == pytest.approx(score(results[1]), abs=1e-5)

        results = await store.asearch(("test",), query="ccc")
        assert len(results) == 2
        assert all(score(r) < 0.9 for r in results)


async def test_vector_search_returns_unindexed_items_without_score(
    db_url: str, fake_embeddings: CharacterEmbeddings
) -> None:
    """InMemoryStore's end of ``test_embed_with_path``: a search with a query also returns an
    item put with ``index=False``, with no score (PostgresStore does not yet, a TODO there)."""
    with korely_store(db_url, index=index_config(fake_embeddings, ["key17"])) as store:
        await store.aput(("test",), "doc3", {"key0": "aaa", "key1": "bbb"}, index=["key0", "key1"])
        await store.aput(("test",), "doc4", {"key0": "eee", "key1": "bbb"}, index=["key1"])
        await store.aput(("test",), "doc5", {"key0": "hhh", "key1": "iii"}, index=False)

        results = await store.asearch(("test",), query="hhh")
        assert len(results) == 3
        doc5_result = next(r for r in results if r.key == "doc5")
        assert doc5_result.score is None


async def test_search_sorting(db_url: str, fake_embeddings: CharacterEmbeddings) -> None:
    """The one match is first among many that do not match, across namespaces."""
    with korely_store(db_url, index=index_config(fake_embeddings, ["key1"])) as store:
        await store.aput(("test", "M"), "M", {"key1": "mmm"})
        n = 100
        for i in range(n):
            await store.aput(("test", "A"), f"A{i}", {"key1": "no"})
        for i in range(n):
            await store.aput(("test", "Z"), f"Z{i}", {"key1": "no"})

        results = await store.asearch(("test",), query="mmm", limit=10)
        assert len(results) == 10
        assert len(set(keys(results))) == 10
        assert results[0].key == "M"
        assert score(results[0]) > score(results[1])


# SQLite's async tests on a store with an index.


async def test_basic_store_ops_with_an_index(
    db_url: str, fake_embeddings: CharacterEmbeddings, clock: FakeClock
) -> None:
    index = index_config(fake_embeddings, ["key0", "key1", "key3"])
    with korely_store(db_url, clock=clock, index=index) as store:
        uid = uuid.uuid4().hex
        namespace = (uid, "test", "documents")
        item_id = "doc1"
        item_value = {"title": "Test Document", "content": "Hello, World!"}
        assert len(await store.asearch((uid,))) == 0

        await store.aput(namespace, item_id, item_value)
        item = await store.aget(namespace, item_id)

        assert item is not None
        assert item.namespace == namespace
        assert item.key == item_id
        assert item.value == item_value
        assert item.created_at is not None
        assert item.updated_at is not None

        clock.advance(1.01)
        updated_value = {"title": "Updated Test Document", "content": "Hello, LangGraph!"}
        await store.aput(namespace, item_id, updated_value)
        updated_item = await store.aget(namespace, item_id)
        assert updated_item is not None

        assert updated_item.value == updated_value
        assert updated_item.updated_at > item.updated_at
        assert await store.aget((uid, "test", "other_documents"), item_id) is None

        new_item_id = "doc2"
        new_item_value = {"title": "Another Document", "content": "Greetings!"}
        await store.aput(namespace, new_item_id, new_item_value)

        items = await store.asearch((uid, "test"), limit=10)
        assert len(items) == 2
        assert any(item.key == item_id for item in items)
        assert any(item.key == new_item_id for item in items)

        assert (uid, "test", "documents") in await store.alist_namespaces(prefix=(uid, "test"))

        await store.adelete(namespace, item_id)
        await store.adelete(namespace, new_item_id)
        assert await store.aget(namespace, item_id) is None
        assert await store.aget(namespace, new_item_id) is None

        assert len(await store.asearch((uid, "test"), limit=10)) == 0


async def test_list_namespaces(db_url: str, fake_embeddings: CharacterEmbeddings) -> None:
    index = index_config(fake_embeddings, ["key0", "key1", "key3"])
    with korely_store(db_url, index=index) as store:
        test_pref = str(uuid.uuid4())
        test_namespaces = [
            (test_pref, "test", "documents", "public", test_pref),
            (test_pref, "test", "documents", "private", test_pref),
            (test_pref, "test", "images", "public", test_pref),
            (test_pref, "test", "images", "private", test_pref),
            (test_pref, "prod", "documents", "public", test_pref),
            (test_pref, "prod", "documents", "some", "nesting", "public", test_pref),
            (test_pref, "prod", "documents", "private", test_pref),
        ]
        for namespace in test_namespaces:
            await store.aput(namespace, "dummy", {"content": "dummy"})

        prefix_result = await store.alist_namespaces(prefix=(test_pref, "test"))
        assert len(prefix_result) == 4
        assert all(ns[1] == "test" for ns in prefix_result)

        specific_prefix_result = await store.alist_namespaces(
            prefix=(test_pref, "test", "documents")
        )
        assert len(specific_prefix_result) == 2
        assert all(ns[1:3] == ("test", "documents") for ns in specific_prefix_result)

        suffix_result = await store.alist_namespaces(suffix=("public", test_pref))
        assert len(suffix_result) == 4
        assert all(ns[-2] == "public" for ns in suffix_result)

        prefix_suffix_result = await store.alist_namespaces(
            prefix=(test_pref, "test"), suffix=("public", test_pref)
        )
        assert len(prefix_suffix_result) == 2
        assert all(ns[1] == "test" and ns[-2] == "public" for ns in prefix_suffix_result)

        wildcard_prefix_result = await store.alist_namespaces(prefix=(test_pref, "*", "documents"))
        assert len(wildcard_prefix_result) == 5
        assert all(ns[2] == "documents" for ns in wildcard_prefix_result)

        wildcard_suffix_result = await store.alist_namespaces(suffix=("*", "public", test_pref))
        assert len(wildcard_suffix_result) == 4
        assert all(ns[-2] == "public" for ns in wildcard_suffix_result)

        wildcard_single = await store.alist_namespaces(suffix=("some", "*", "public", test_pref))
        assert len(wildcard_single) == 1
        assert wildcard_single[0] == (
            test_pref,
            "prod",
            "documents",
            "some",
            "nesting",
            "public",
            test_pref,
        )

        max_depth_result = await store.alist_namespaces(max_depth=3)
        assert all(len(ns) <= 3 for ns in max_depth_result)

        max_depth_result = await store.alist_namespaces(
            max_depth=4, prefix=(test_pref, "*", "documents")
        )
        assert len(set(max_depth_result)) == len(max_depth_result) == 5

        assert len(await store.alist_namespaces(prefix=(test_pref,), limit=3)) == 3

        offset_result = await store.alist_namespaces(prefix=(test_pref,), offset=3)
        assert len(offset_result) == len(test_namespaces) - 3

        empty_prefix_result = await store.alist_namespaces(prefix=(test_pref,))
        assert len(empty_prefix_result) == len(test_namespaces)
        assert set(empty_prefix_result) == set(test_namespaces)

        for namespace in test_namespaces:
            await store.adelete(namespace, "dummy")


async def test_search_items(db_url: str, fake_embeddings: CharacterEmbeddings) -> None:
    base = "test_search_items"
    test_namespaces = [
        (base, "documents", "user1"),
        (base, "documents", "user2"),
        (base, "reports", "department1"),
        (base, "reports", "department2"),
    ]
    test_items = [
        {"title": "Doc 1", "author": "John Doe", "tags": ["important"]},
        {"title": "Doc 2", "author": "Jane Smith", "tags": ["draft"]},
        {"title": "Report A", "author": "John Doe", "tags": ["final"]},
        {"title": "Report B", "author": "Alice Johnson", "tags": ["draft"]},
    ]
    index = index_config(fake_embeddings, ["key0", "key1", "key3"])
    with korely_store(db_url, index=index) as store:
        for ns, item in zip(test_namespaces, test_items, strict=True):
            await store.aput(ns, f"item_{ns[-1]}", item)

        docs = await store.asearch((base, "documents"))
        assert len(docs) == 2
        assert all(item.namespace[1] == "documents" for item in docs)

        reports = await store.asearch((base, "reports"))
        assert len(reports) == 2
        assert all(item.namespace[1] == "reports" for item in reports)

        first_page = await store.asearch((base,), limit=2, offset=0)
        second_page = await store.asearch((base,), limit=2, offset=2)
        assert len(first_page) == 2
        assert len(second_page) == 2
        assert set(keys(first_page)).isdisjoint(keys(second_page))
        assert len(await store.asearch((base,))) == 4

        john_items = await store.asearch((base,), filter={"author": "John Doe"})
        assert len(john_items) == 2
        assert all(item.value["author"] == "John Doe" for item in john_items)

        draft_items = await store.asearch((base,), filter={"tags": ["draft"]})
        assert len(draft_items) == 2
        assert all("draft" in item.value["tags"] for item in draft_items)

        for ns in test_namespaces:
            await store.adelete(ns, f"item_{ns[-1]}")


async def test_async_namespace_segment_boundary(store: KorelyStore) -> None:
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("user_1",),
        ("userX1",),
    ]:
        await store.aput(namespace, "k", {"v": 1})

    assert namespaces(await store.asearch(("foo",), limit=100)) == {("foo",), ("foo", "child")}
    assert namespaces(await store.asearch(("user_1",), limit=100)) == {("user_1",)}
    assert set(await store.alist_namespaces(suffix=("alice",), limit=100)) == {
        ("uid", "users", "alice"),
    }


# TTL (PostgreSQL), on the engine's clock.


async def test_store_ttl(store: KorelyStore, clock: FakeClock) -> None:
    ns = ("foo",)
    await store.aput(ns, key="item1", value={"foo": "bar"}, ttl=TTL_MINUTES)
    clock.advance(TTL_SECONDS - 2)
    assert await store.aget(ns, key="item1", refresh_ttl=True) is not None
    clock.advance(TTL_SECONDS - 2)
    assert len(await store.asearch(ns, query="foo", refresh_ttl=True)) == 1
    clock.advance(TTL_SECONDS - 2)
    assert await store.aget(ns, key="item1", refresh_ttl=False) is not None
    clock.advance(TTL_SECONDS - 1)

    async def swept() -> bool:
        return await store.asearch(ns, query="bar", refresh_ttl=False) == []

    # Now (TTL_SECONDS - 2) * 2 + 1 past the last refresh: the sweeper deletes the item.
    assert await aeventually(swept)


async def test_omit_expired_filters_read_paths(store: KorelyStore, clock: FakeClock) -> None:
    store.stop_ttl_sweeper()  # deterministic: no background deletion
    assert store.ttl_config is not None
    store.ttl_config["omit_expired"] = True

    expired_ns = ("omit", "expired")
    control_ns = ("omit", "control")
    await store.aput(expired_ns, "e", {"data": "gone"}, ttl=TTL_MINUTES)
    await store.aput(control_ns, "c", {"data": "keep"}, ttl=None)
    clock.advance(TTL_SECONDS + 60)

    # The item is expired but still there (unswept).
    store.ttl_config["omit_expired"] = False
    assert await store.aget(expired_ns, "e", refresh_ttl=False) is not None
    store.ttl_config["omit_expired"] = True

    assert await store.aget(expired_ns, "e") is None
    assert await store.aget(control_ns, "c") is not None

    assert await store.asearch(expired_ns) == []
    assert keys(await store.asearch(control_ns)) == ["c"]

    listed = await store.alist_namespaces(prefix=("omit",))
    assert expired_ns not in listed
    assert control_ns in listed


@pytest.mark.parametrize("omit", [None, False], ids=["default", "explicit-false"])
async def test_omit_expired_disabled_preserves_expired_rows(
    store: KorelyStore, clock: FakeClock, omit: bool | None
) -> None:
    store.stop_ttl_sweeper()
    if omit is not None:
        assert store.ttl_config is not None
        store.ttl_config["omit_expired"] = omit

    ns = ("keep",)
    await store.aput(ns, "k", {"data": "still-here"}, ttl=TTL_MINUTES)
    clock.advance(TTL_SECONDS + 60)

    assert await store.aget(ns, "k", refresh_ttl=False) is not None
    assert keys(await store.asearch(ns, refresh_ttl=False)) == ["k"]
    assert ns in await store.alist_namespaces(prefix=("keep",))


async def test_omit_expired_refresh_ttl_only_refreshes_live_rows(
    store: KorelyStore, clock: FakeClock
) -> None:
    store.stop_ttl_sweeper()
    assert store.ttl_config is not None
    store.ttl_config["omit_expired"] = True

    ns = ("refresh",)
    await store.aput(ns, "expired", {"n": 0}, ttl=TTL_MINUTES)
    clock.advance(TTL_SECONDS - 2)
    await store.aput(ns, "live_get", {"n": 1}, ttl=TTL_MINUTES)
    await store.aput(ns, "live_search", {"n": 2}, ttl=TTL_MINUTES)
    clock.advance(3)  # "expired" is past its TTL; the live ones have 3 seconds left

    # refresh_ttl=True must NOT resurrect the expired item (via aget or asearch)...
    assert await store.aget(ns, "expired", refresh_ttl=True) is None
    assert "expired" not in keys(await store.asearch(ns, refresh_ttl=True))
    assert await store.aget(ns, "expired", refresh_ttl=False) is None

    # ...but must still extend the live items that were read.
    assert await store.aget(ns, "live_get", refresh_ttl=True) is not None
    clock.advance(4)  # past the live items' first expiry, within the refreshed one
    assert await store.aget(ns, "live_get", refresh_ttl=False) is not None
    assert await store.aget(ns, "live_search", refresh_ttl=False) is not None


async def test_omit_expired_search_pagination(store: KorelyStore, clock: FakeClock) -> None:
    """Expired items are left out before the page is cut, not after."""
    store.stop_ttl_sweeper()
    assert store.ttl_config is not None
    store.ttl_config["omit_expired"] = True

    ns = ("page",)
    # Newest first these are a, expired, b, c: the expired item is inside the first limit=2
    # window. Filtering before LIMIT gives pages [a, b] then [c]; after, page 1 is just [a].
    await store.aput(ns, "c", {"k": "c"}, ttl=TTL_MINUTES)
    clock.advance(1)
    await store.aput(ns, "b", {"k": "b"}, ttl=TTL_MINUTES)
    clock.advance(1)
    await store.aput(ns, "expired", {"k": "x"}, ttl=1 / 60)
    clock.advance(1)
    await store.aput(ns, "a", {"k": "a"}, ttl=TTL_MINUTES)
    clock.advance(1)

    page1 = await store.asearch(ns, limit=2, offset=0)
    page2 = await store.asearch(ns, limit=2, offset=2)
    assert keys(page1) == ["a", "b"]
    assert keys(page2) == ["c"]
