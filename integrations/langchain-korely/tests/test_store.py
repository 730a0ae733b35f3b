"""`KorelyStore`: LangGraph's store contract on korely's engine, and what korely adds to it.

An item is a fact: a put records it (a new version when its words change), a delete
forgets it, a correction made elsewhere is what a get returns, erasure takes the items
with the person. Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from korely_memory import EndCause, Identity, InvalidRequest, Items, MemoryEngine
from langchain_korely import KorelyStore
from langchain_korely.store import words_of

ACCOUNT, AGENT = "acme", "assistant"
GIULIA = Identity(ACCOUNT, "giulia", AGENT)
TEAM = Identity(ACCOUNT, None, AGENT)
MINE = ("memories", "giulia")


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


@pytest.fixture
def store(engine: MemoryEngine) -> KorelyStore:
    return KorelyStore(engine, account=ACCOUNT, agent=AGENT)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def timed(db_url: str, clock: Clock) -> Iterator[KorelyStore]:
    with MemoryEngine(db_url, clock=clock) as engine:
        yield KorelyStore(engine, account=ACCOUNT, agent=AGENT, ttl={"default_ttl": 10})


def rows(engine: MemoryEngine) -> dict[str, int]:
    with engine.db.connect() as conn:
        return {
            table: conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("korely_items", "korely_facts")
        }


# -- the contract: what goes in comes back -------------------------------------------------------


NAMESPACES = [
    MINE,
    ("Memories", "Giulia Rossi", "Home Office"),
    ("notes",),
    ("a", "b", "c", "d", "e"),
    ("with space ", " and\ttab", "ünïcödé ✓"),
    ("%", "_", "*", "[x]", "\\"),
    (str(uuid.UUID(int=7)), "User-ID"),
]
KEYS = ["home-city", "Home City", "v1.2.3", str(uuid.UUID(int=42)), "  padded  ", "ÉTÉ", "a/b?c#d"]


@pytest.mark.parametrize("namespace", NAMESPACES, ids=repr)
def test_any_namespace_and_key_round_trip_exactly(
    store: KorelyStore, namespace: tuple[str, ...]
) -> None:
    for n, key in enumerate(KEYS):
        store.put(namespace, key, {"content": f"item {n}", "n": n})
    for n, key in enumerate(KEYS):
        item = store.get(namespace, key)
        assert item is not None and item.key == key and item.namespace == namespace
        assert item.value == {"content": f"item {n}", "n": n}
    assert {i.key for i in store.search(namespace, limit=100)} == set(KEYS)
    assert namespace in store.list_namespaces()


def test_json_values_round_trip_exactly(store: KorelyStore) -> None:
    value = {
        "content": "Giulia's profile",
        "nested": {"list": [1, 2.5, -3e-9, True, False, None, "x"], "empty": {}, "deep": [[{}]]},
        "big": 2**62,
        "unicode": "ünïcödé \u2603 \U0001f600",
        "quotes": "\"'`<memory>",
        "ordered": {"z": 1, "a": 2},
    }
    store.put(MINE, "profile", value)
    item = store.get(MINE, "profile")
    assert item is not None
    assert item.value == value
    assert json.dumps(item.value) == json.dumps(value)  # the order of the keys too


def test_items_carry_their_times_and_a_put_keeps_the_creation(
    timed: KorelyStore, clock: Clock
) -> None:
    timed.put(MINE, "k", {"content": "one"})
    created = clock.now
    clock.advance(minutes=3)
    timed.put(MINE, "k", {"content": "two"})
    item = timed.get(MINE, "k")
    assert item is not None
    assert (item.created_at, item.updated_at) == (created, clock.now)


# -- bad input: refused, naming the field, and nothing written -----------------------------------


@pytest.mark.parametrize(
    ("namespace", "key", "value", "field"),
    [
        (MINE, "k", "not a dict", "value"),
        (MINE, "k", ["a", "list"], "value"),
        (MINE, "k", {"content": "x" * 100_001}, "value"),
        (MINE, "k", {1: "a key that is not a string"}, "value"),
        (MINE, "k", {"when": dt.date(2026, 1, 1)}, "value"),
        (MINE, "k", {"nan": float("nan")}, "value"),
        (MINE, "k", {"content": "a NUL \x00 inside"}, "value"),
        (MINE, "k", {"nested": [{"nul\x00key": 1}]}, "value"),
        (MINE, "k" * 256, {"content": "x"}, "key"),
        (MINE, "", {"content": "x"}, "key"),
        (MINE, "nul\x00", {"content": "x"}, "key"),
        (("a.b", "c"), "k", {"content": "x"}, "namespace"),
        (("",), "k", {"content": "x"}, "namespace"),
        ((), "k", {"content": "x"}, "namespace"),
        (("x" * 256,), "k", {"content": "x"}, "namespace"),
        (("memories", "giu/lia"), "k", {"content": "x"}, "namespace"),
        (MINE, "k", {"content": "x"}, "index"),
        (MINE, "k", {"content": "x"}, "ttl"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_a_bad_put_in_a_batch_is_refused_naming_the_field_and_writes_nothing(
    store: KorelyStore, namespace: Any, key: Any, value: Any, field: str
) -> None:
    good = PutOp(MINE, "good", {"content": "would be written"})
    bad = PutOp(namespace, key, value)
    if field == "index":
        bad = PutOp(namespace, key, value, index=[3])  # type: ignore[list-item]
    if field == "ttl":
        bad = PutOp(namespace, key, value, ttl=-5)
    with pytest.raises(InvalidRequest) as refused:
        store.batch([good, bad])
    assert refused.value.field == field
    assert rows(store.engine) == {"korely_items": 0, "korely_facts": 0}


def test_langgraph_s_own_namespace_errors_come_through_put(store: KorelyStore) -> None:
    for namespace in [(), ("a.b",), ("",), ("langgraph", "x")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"content": "x"})
    assert rows(store.engine) == {"korely_items": 0, "korely_facts": 0}


FILTERED = {
    "int": {"n": 3, "s": "50%_off\\now", "nested": {"n": 3}},
    "float": {"n": 3.0, "s": "50% off"},
    "bool": {"n": True, "s": "50x_off\\now"},
    "string": {"n": "3", "s": 'Ünï "quoted" \n line'},
    "big": {"n": 1e16, "s": "x"},
    "inside": {"note": '{"n":3}', "s": "the text of another's field"},
}


@pytest.mark.parametrize(
    ("where", "keys"),
    [
        ({"n": 3}, ["float", "int"]),
        ({"n": 3.0}, ["float", "int"]),
        ({"n": {"$eq": 3}}, ["float", "int"]),
        ({"n": 1}, []),  # never the boolean true
        ({"n": True}, ["bool"]),
        ({"n": "3"}, ["string"]),
        ({"n": 1e16}, ["big"]),
        ({"n": 10**16}, ["big"]),
        ({"s": "50%_off\\now"}, ["int"]),  # LIKE's wildcards and escape are letters here
        ({"s": 'Ünï "quoted" \n line'}, ["string"]),
        ({"nested": {"n": 3}}, ["int"]),
        ({"nested.n": 3}, ["int"]),
        ({"n": {"$gt": 2, "$lt": 4}}, ["float", "int"]),
        ({"n": {"$ne": 3}}, ["big", "bool", "inside", "string"]),
        ({"n": 3, "s": "50% off"}, ["float"]),
    ],
    ids=repr,
)
def test_filters_compare_as_json_does(
    store: KorelyStore, where: dict[str, Any], keys: list[str]
) -> None:
    """Equality on a top-level field is checked by the database (and must agree with the rest):
    numbers by value, never equal to a boolean or a string; text exactly, whatever it holds."""
    for key, value in FILTERED.items():
        store.put(("docs",), key, value)
    found = store.search(("docs",), filter=where, limit=20)
    assert sorted(i.key for i in found) == keys
    paged = [store.search(("docs",), filter=where, limit=1, offset=n) for n in range(len(keys))]
    assert sorted(i.key for page in paged for i in page) == keys


def test_a_bad_filter_operator_is_refused_naming_the_field(store: KorelyStore) -> None:
    store.put(MINE, "k", {"content": "x", "n": 1})
    with pytest.raises(InvalidRequest) as refused:
        store.search(MINE, filter={"n": {"$regex": ".*"}})
    assert refused.value.field == "filter"


# -- an item is a fact ---------------------------------------------------------------------------


def test_a_put_is_a_fact_of_the_user_the_namespace_names(store: KorelyStore) -> None:
    store.put(MINE, "home-city", {"content": "Giulia lives in Rome", "source": "chat"})
    (fact,) = store.engine.get_facts(GIULIA)
    assert (fact.key, fact.content) == ("home-city", "Giulia lives in Rome")
    assert "Giulia lives in Rome" in store.engine.get_context(GIULIA, "Where?").text
    assert store.engine.get_facts(Identity(ACCOUNT, "marco", AGENT)) == []


def test_a_put_under_the_same_key_is_a_new_version_and_readers_are_told_once(
    store: KorelyStore,
) -> None:
    engine = store.engine
    store.put(MINE, "home", {"content": "Giulia lives in Rome"})
    assert "Rome" in engine.get_context(GIULIA, reader="bot").text
    store.put(MINE, "home", {"content": "Giulia lives in Milan"})
    told = engine.get_context(GIULIA, reader="bot")
    assert [(c.was.content, c.now.content if c.now else None) for c in told.changed] == [
        ("Giulia lives in Rome", "Giulia lives in Milan")
    ]
    assert engine.get_context(GIULIA, reader="bot").changed == ()
    assert [v.content for v in engine.history(GIULIA, "home")] == [
        "Giulia lives in Rome",
        "Giulia lives in Milan",
    ]


def test_a_put_that_changes_only_other_fields_makes_no_new_version(store: KorelyStore) -> None:
    store.put(MINE, "home", {"content": "Giulia lives in Rome", "seen": 1})
    store.put(MINE, "home", {"content": "Giulia lives in Rome", "seen": 2})
    assert len(store.engine.history(GIULIA, "home")) == 1
    item = store.get(MINE, "home")
    assert item is not None and item.value["seen"] == 2


def test_a_delete_forgets_the_fact_and_history_keeps_it(store: KorelyStore) -> None:
    store.put(MINE, "home", {"content": "Giulia lives in Rome"})
    store.delete(MINE, "home")
    assert store.get(MINE, "home") is None
    assert store.engine.get_facts(GIULIA) == []
    (version,) = store.engine.history(GIULIA, "home")
    assert version.end_cause is EndCause.FORGOTTEN
    store.delete(MINE, "never-there")  # a delete of nothing is no error, as in LangGraph


def test_a_correction_made_elsewhere_is_written_into_the_value(store: KorelyStore) -> None:
    """korely's `correct` (or `remember` again) writes the new words where the value held them:
    what a get returns, what a filter compares and what a search ranks are the same."""
    store.put(MINE, "home", {"content": "Giulia lives in Rome", "source": "chat"})
    store.put(MINE, "diet", {"kind": "Memory", "content": {"content": "Giulia eats meat"}})
    store.put(MINE, "profile", {"name": "Giulia", "age": 31})
    store.engine.correct(GIULIA, "home", "Giulia lives in Milan")
    store.engine.remember(GIULIA, "diet", "Giulia eats fish, no meat")
    (profile,) = [f for f in store.engine.get_facts(GIULIA) if f.key == "profile"]
    store.engine.correct(GIULIA, "profile", "Giulia is 32")
    item = store.get(MINE, "home")
    assert item is not None
    assert item.value == {"content": "Giulia lives in Milan", "source": "chat"}
    diet = store.get(MINE, "diet")
    assert diet is not None
    assert diet.value == {"kind": "Memory", "content": {"content": "Giulia eats fish, no meat"}}
    changed = store.get(MINE, "profile")  # no text field: the words come as `content`
    assert changed is not None
    assert changed.value == {"name": "Giulia", "age": 31, "content": "Giulia is 32"}
    assert profile.content == '{"name": "Giulia", "age": 31}'
    milan = {"content": "Giulia lives in Milan"}
    assert [i.key for i in store.search(MINE, filter=milan)] == ["home"]
    assert store.search(MINE, filter={"content": "Giulia lives in Rome"}) == []
    assert next(i.key for i in store.search(MINE, query="Milan")) == "home"


def test_a_fact_forgotten_elsewhere_takes_its_item(store: KorelyStore) -> None:
    store.put(MINE, "home", {"content": "Giulia lives in Rome", "street": "Via Roma 1"})
    store.engine.forget(GIULIA, "home")
    assert store.get(MINE, "home") is None
    assert store.search(MINE) == []
    assert store.list_namespaces() == []
    assert rows(store.engine)["korely_items"] == 0  # the value is not kept for nothing
    store.engine.remember(GIULIA, "home", "Giulia lives in Milan")  # korely's own fact again
    served = store.get(MINE, "home")  # no item holds it: the store serves it, stores nothing
    assert served is not None
    assert served.value == {"kind": "Memory", "content": {"content": "Giulia lives in Milan"}}
    assert rows(store.engine)["korely_items"] == 0


def test_what_a_value_shows(store: KorelyStore) -> None:
    assert words_of({"content": "  Giulia likes tea  "}) == "Giulia likes tea"
    assert words_of({"kind": "Memory", "content": {"content": "Giulia likes tea"}}) == (
        "Giulia likes tea"
    )
    assert words_of({"text": "t", "content": ""}) == "t"
    assert words_of({"name": "Giulia", "age": 31}) == '{"name": "Giulia", "age": 31}'
    long = words_of({"content": "x" * 5000})
    assert len(long) == 2000 and long.endswith("…")
    store.put(MINE, "long", {"content": "y" * 5000})
    (fact,) = store.engine.get_facts(GIULIA)
    assert fact.content == "y" * 1999 + "…"
    item = store.get(MINE, "long")
    assert item is not None and item.value == {"content": "y" * 5000}


def test_a_uuid_key_is_a_short_fact_key(store: KorelyStore) -> None:
    """LangMem names each memory by a UUID; a block shows every fact's key, so a UUID (about
    twenty tokens) is kept as ``memory-`` and 12 hex digits, the same for the same UUID."""
    key = str(uuid.uuid4())
    store.put(MINE, key, {"content": "Giulia likes tea"})
    store.put(MINE, key, {"content": "Giulia likes green tea"})
    (fact,) = store.engine.get_facts(GIULIA)
    assert re.fullmatch("memory-[0-9a-f]{12}", fact.key)
    assert len(store.engine.history(GIULIA, fact.key)) == 2
    assert f"- {fact.key}: Giulia likes green tea" in store.engine.get_context(GIULIA).text
    item = store.get(MINE, key)
    assert item is not None and item.key == key


def test_labels_past_the_pattern_and_other_namespaces(store: KorelyStore) -> None:
    store.put(("memories", "giulia", "prefs"), "Theme", {"content": "Giulia likes dark mode"})
    store.put(("shared", "faq"), "hours", {"content": "The office opens at nine"})
    (fact,) = store.engine.get_facts(GIULIA)
    assert fact.key.startswith("prefs.theme:") and fact.content == "Giulia likes dark mode"
    (team,) = store.engine.get_facts(TEAM)
    assert team.key.startswith("shared.faq.hours:")
    assert team.content == "The office opens at nine"


def test_the_namespace_rule_can_be_set(engine: MemoryEngine) -> None:
    store = KorelyStore(
        engine, account=ACCOUNT, agent=AGENT, namespaces=[("users", "{user}", "facts")]
    )
    store.put(("users", "giulia", "facts"), "home", {"content": "Giulia lives in Rome"})
    with pytest.warns(UserWarning, match=r"\('memories', 'giulia'\) matches no pattern"):
        store.put(("memories", "giulia"), "home", {"content": "not Giulia's: the agent's"})
    assert [f.content for f in engine.get_facts(GIULIA)] == ["Giulia lives in Rome"]
    assert [f.content for f in engine.get_facts(TEAM)] == ["not Giulia's: the agent's"]
    for bad in ["users", [("a.b", "{user}")], [("{user}", "{user}")], [()]]:
        with pytest.raises(InvalidRequest) as refused:
            KorelyStore(engine, namespaces=bad)  # type: ignore[arg-type]
        assert refused.value.field == "namespaces"


# -- erasure -------------------------------------------------------------------------------------


def test_erasing_a_person_deletes_their_items(store: KorelyStore) -> None:
    store.put(MINE, "home", {"content": "Giulia lives in Rome", "street": "Via Roma 1"})
    store.put(("memories", "marco"), "home", {"content": "Marco lives in Turin"})
    report = store.engine.erase_user(ACCOUNT, "giulia")
    assert report.items == 1
    assert store.get(MINE, "home") is None
    assert store.get(("memories", "marco"), "home") is not None
    with store.engine.db.connect() as conn:
        kept = conn.execute(sa.text("SELECT value FROM korely_items")).scalars().all()
    assert not any("Via Roma" in v for v in kept)


def test_a_person_s_export_holds_their_items(store: KorelyStore) -> None:
    store.put(MINE, "home", {"content": "Giulia lives in Rome", "street": "Via Roma 1"})
    store.put(("memories", "marco"), "home", {"content": "Marco lives in Turin"})
    store.engine.correct(GIULIA, "home", "Giulia lives in Milan")
    exported = store.engine.export_user(ACCOUNT, "giulia")
    (item,) = exported.items
    assert (item.namespace, item.key, item.text_at) == (MINE, "home", ("content",))
    assert item.value == {"content": "Giulia lives in Milan", "street": "Via Roma 1"}
    assert exported.to_dict()["items"][0]["value"]["street"] == "Via Roma 1"


def test_forgetting_with_erase_deletes_the_item_s_value(store: KorelyStore) -> None:
    store.put(MINE, "home", {"content": "Giulia lives in Rome", "street": "Via Roma 1"})
    store.engine.forget(GIULIA, "home", erase=True)
    assert rows(store.engine)["korely_items"] == 0


# -- time to live --------------------------------------------------------------------------------


def test_an_item_lives_its_ttl_from_its_last_read(timed: KorelyStore, clock: Clock) -> None:
    timed.put(MINE, "home", {"content": "Giulia lives in Rome"})
    clock.advance(minutes=8)
    assert timed.get(MINE, "home") is not None  # read: ten minutes again
    clock.advance(minutes=8)
    assert timed.get(MINE, "home", refresh_ttl=False) is not None
    clock.advance(minutes=3)
    timed.ttl_config["omit_expired"] = True
    assert timed.get(MINE, "home") is None
    assert timed.search(MINE) == []
    timed.ttl_config["omit_expired"] = False
    assert timed.get(MINE, "home") is not None  # not swept yet


def test_a_sweep_deletes_what_ran_out_and_ends_its_fact_as_expired(
    timed: KorelyStore, clock: Clock
) -> None:
    timed.put(MINE, "home", {"content": "Giulia lives in Rome"})
    timed.put(MINE, "job", {"content": "Giulia is a nurse"}, ttl=None)
    clock.advance(minutes=11)
    assert timed.sweep_ttl() == 1
    assert timed.get(MINE, "home") is None and timed.get(MINE, "job") is not None
    (version,) = timed.engine.history(GIULIA, "home")
    assert version.end_cause is EndCause.EXPIRED
    assert version.invalid_at == clock.now - dt.timedelta(minutes=1)
    assert [f.key for f in timed.engine.get_facts(GIULIA)] == ["job"]


# -- many writers --------------------------------------------------------------------------------


def test_writers_racing_on_one_item_leave_one_fact_and_the_item_that_recorded_it(
    db_url: str,
) -> None:
    """Two engines (two processes' worth of connections), eight threads, one new item: every
    put succeeds, one fact is true, and the item holds the value whose words it shows."""
    with MemoryEngine(db_url) as one, MemoryEngine(db_url) as two:
        stores = [KorelyStore(e, account=ACCOUNT, agent=AGENT) for e in (one, two)]
        start = threading.Barrier(8)
        failed: list[BaseException] = []

        def put(n: int) -> None:
            start.wait()
            try:
                for round_ in range(5):
                    stores[n % 2].put(MINE, "home", {"content": f"city {n}.{round_}", "n": n})
            except BaseException as error:
                failed.append(error)

        threads = [threading.Thread(target=put, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failed == []
        (fact,) = one.get_facts(GIULIA)
        item = stores[0].get(MINE, "home")
        assert item is not None and item.value["content"] == fact.content
        assert len(one.history(GIULIA, "home")) == 40


# -- batches -------------------------------------------------------------------------------------


def test_a_batch_reads_before_it_writes_and_the_last_put_to_an_item_wins(
    store: KorelyStore,
) -> None:
    store.put(MINE, "k", {"content": "before"})
    results = store.batch(
        [
            PutOp(MINE, "k", {"content": "first"}),
            GetOp(MINE, "k"),
            PutOp(MINE, "k", {"content": "last"}),
            SearchOp(MINE),
        ]
    )
    assert results[0] is None and results[2] is None
    got = results[1]
    assert got is not None and got.value == {"content": "before"}  # type: ignore[union-attr]
    item = store.get(MINE, "k")
    assert item is not None and item.value == {"content": "last"}
    assert [v.content for v in store.engine.history(GIULIA, "k")] == ["before", "last"]


async def test_the_async_twins_read_and_write_the_same_items(store: KorelyStore) -> None:
    await store.aput(MINE, "k", {"content": "Giulia likes tea"})
    item = await store.aget(MINE, "k")
    assert item is not None and item.value == {"content": "Giulia likes tea"}
    assert [i.key for i in await store.asearch(("memories",), query="tea")] == ["k"]
    assert await store.alist_namespaces(prefix=("memories",)) == [MINE]
    await store.adelete(MINE, "k")
    assert await store.aget(MINE, "k") is None


async def test_the_engines_items_are_one_object_whose_async_twins_do_the_same(
    engine: MemoryEngine,
) -> None:
    items = engine.items
    assert isinstance(items, Items) and engine.items is items
    public = [n for n in dir(Items) if not n.startswith("_")]
    for name in public:
        if not (name.startswith("a") and name[1:] in public):
            assert asyncio.iscoroutinefunction(getattr(Items, "a" + name)), name
    tea = {"content": "Giulia likes tea"}
    fact = await items.aput(GIULIA, MINE, "tea", tea, text=tea["content"], place=())
    assert (fact.key, fact.content) == ("tea", "Giulia likes tea")
    assert await items.aget(ACCOUNT, AGENT, [(MINE, "tea")]) == items.get(
        ACCOUNT, AGENT, [(MINE, "tea")]
    )
    assert [i.key for i in await items.alist(ACCOUNT, AGENT, ("memories",))] == ["tea"]
    assert await items.anamespaces(ACCOUNT, AGENT) == [MINE]
    assert await items.arefresh(ACCOUNT, AGENT, [(MINE, "tea")]) == 0  # no time to live
    assert len(await items.arelevance("tea", ["tea", "coffee"], account=ACCOUNT)) == 2
    assert await items.adelete(ACCOUNT, AGENT, MINE, "tea") is True
    assert await items.asweep() == 0
    assert items.get(ACCOUNT, AGENT, [(MINE, "tea")]) == [None]
    assert not any(hasattr(engine, n) for n in ("put_item", "get_items", "relevance"))


# -- what the review of the store found ----------------------------------------------------------


def test_the_same_key_under_two_patterns_is_two_facts(engine: MemoryEngine) -> None:
    store = KorelyStore(
        engine,
        account=ACCOUNT,
        agent=AGENT,
        namespaces=[("memories", "{user}"), ("profile", "{user}")],
    )
    key = str(uuid.uuid4())
    for name in ("name", key):
        store.put(("memories", "giulia"), name, {"content": f"memories: {name}"})
        store.put(("profile", "giulia"), name, {"content": f"profile: {name}"})
    assert len(engine.get_facts(GIULIA)) == 4
    for name in ("name", key):
        item = store.get(("profile", "giulia"), name)
        assert item is not None and item.value == {"content": f"profile: {name}"}


@pytest.mark.parametrize("ttl", [float("inf"), 1e12, 0, float("nan"), True])
def test_a_ttl_out_of_range_is_refused(store: KorelyStore, ttl: float) -> None:
    with pytest.raises(InvalidRequest) as refused:
        store.put(MINE, "k", {"content": "x"}, ttl=ttl)
    assert refused.value.field == "ttl"
    assert rows(store.engine) == {"korely_items": 0, "korely_facts": 0}


@pytest.mark.parametrize("odd", ["k\x00", "\ud800", "a.b"], ids=repr)
def test_reads_of_what_cannot_be_kept_find_nothing(store: KorelyStore, odd: str) -> None:
    """Never a database's error: nothing, or LangGraph's own refusal of such a namespace."""
    store.put(MINE, "k", {"content": "x", "s": "y"})

    def nothing(read: Callable[[], Any]) -> None:
        with contextlib.suppress(InvalidNamespaceError):
            assert read() in (None, [])

    nothing(lambda: store.get(MINE, odd))
    nothing(lambda: store.get(("memories", odd), "k"))
    nothing(lambda: store.search(("memories", odd)))
    nothing(lambda: store.search(MINE, filter={"s": odd}))
    nothing(lambda: store.list_namespaces(prefix=(odd,)))
    assert store.search(MINE, filter={"s": odd}) == []


ODD_VALUES: list[Any] = [
    0,
    -0.0,
    0.0,
    1,
    3,
    3.0,
    -3,
    1 / 3,
    0.1 + 0.2,
    0.3,
    1e15,
    1e16,
    10**16,
    2**53,
    2**53 + 1,
    2**64,
    10**30,
    1e30,
    5e-324,
    True,
    False,
    None,
    "3",
    "",
    'quote " and \\ backslash',
    "50%_off",
    "ünïcödé ✓",
    "x" * 60_000,
    {"n": 3},
    [3],
]


def test_a_filter_the_database_checks_agrees_with_every_value(store: KorelyStore) -> None:
    """Every filter on one field against every value kept there: what the store returns is what
    `matches` (the filter's meaning, in Python) says, whether the database or Python checks it."""
    from langchain_korely.store import matches

    fields = ["n", "città", "with space"]
    kept = {}
    for n, value in enumerate(ODD_VALUES):
        for field in fields:
            kept[f"{field}-{n}"] = {field: value}
    for key, value in kept.items():
        store.put(("odd",), key, value)
    for field in fields:
        for wanted in ODD_VALUES:
            where = {field: wanted}
            expected = sorted(k for k, v in kept.items() if matches(v, where))
            found = sorted(i.key for i in store.search(("odd",), filter=where, limit=1000))
            assert found == expected, (field, repr(wanted)[:40])


def test_a_sweep_spares_an_item_put_again_since_it_read_it(postgresql_url: str) -> None:
    """On PostgreSQL a put may commit between the sweep's read of what ran out and its delete
    (on SQLite writers take turns: none can). Forced here: the sweep finds the item run out,
    another engine puts it again for an hour, then the sweep goes on."""
    from korely_memory._store import _items

    clock = Clock()
    with (
        MemoryEngine(postgresql_url, clock=clock) as sweeping,
        MemoryEngine(postgresql_url, clock=clock) as other,
    ):
        mine = KorelyStore(sweeping, account=ACCOUNT, agent=AGENT)
        theirs = KorelyStore(other, account=ACCOUNT, agent=AGENT)
        mine.put(MINE, "k", {"content": "old words"}, ttl=1)
        clock.advance(minutes=2)
        run_out = _items.run_out

        def then_put_again(*args: Any, **kwargs: Any) -> Any:
            found = run_out(*args, **kwargs)
            theirs.put(MINE, "k", {"content": "new words"}, ttl=60)
            return found

        _items.run_out = then_put_again  # type: ignore[assignment]
        try:
            assert mine.sweep_ttl() == 0
        finally:
            _items.run_out = run_out  # type: ignore[assignment]
        item = mine.get(MINE, "k")
        assert item is not None and item.value == {"content": "new words"}
        assert [f.content for f in sweeping.get_facts(GIULIA)] == ["new words"]


def test_sweeps_at_once_count_each_item_once(db_url: str, clock: Clock) -> None:
    with MemoryEngine(db_url, clock=clock) as engine:
        store = KorelyStore(engine, account=ACCOUNT, agent=AGENT)
        for n in range(30):
            store.put(("memories", f"user-{n}"), "k", {"content": f"fact {n}"}, ttl=1)
        clock.advance(minutes=2)
        counted: list[int] = []
        threads = [
            threading.Thread(target=lambda: counted.append(store.sweep_ttl())) for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(counted) == 30
        assert store.search(("memories",)) == []


def test_the_background_sweeper_outlives_a_failed_sweep(
    timed: KorelyStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    timed.put(MINE, "k", {"content": "x"}, ttl=1)
    clock.advance(minutes=2)
    sweep = timed.sweep_ttl
    failures = iter([RuntimeError("the database is away")])

    def flaky() -> int:
        for error in failures:
            raise error
        return sweep()

    monkeypatch.setattr(timed, "sweep_ttl", flaky)
    timed.start_ttl_sweeper(sweep_interval_minutes=0.05 / 60)
    try:
        for _ in range(200):
            if timed.get(MINE, "k") is None:
                break
            threading.Event().wait(0.02)
    finally:
        assert timed.stop_ttl_sweeper(timeout=5)
    assert timed.get(MINE, "k") is None
