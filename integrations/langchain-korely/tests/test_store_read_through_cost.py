"""What serving the facts no item holds costs: the facts a read returns, not all of them.

`KorelyStore` serves a user's facts that no item holds as items of the user's namespace. A
`get` (LangMem's manager reads every memory it patches), a `delete` and a `search` without a
query (LangGraph pages it: 10 by default) must not read every fact and every item of the person
to find the few they return. Measured as the work SQLite does (its virtual machine's steps,
counted by a progress handler), which does not depend on the machine's speed: doubling the
person's facts and items must leave it about the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine
from langchain_korely import KorelyStore

GIULIA = Identity("acme", "giulia", "assistant")
MINE = ("memories", "giulia")
STEP = 10  # instructions a progress handler's call stands for


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[MemoryEngine]:
    with MemoryEngine(sqlite_url) as engine:
        yield engine


def grow(engine: MemoryEngine, store: KorelyStore, start: int, n: int) -> None:
    """``n`` more facts of Giulia's own (korely's tools') and ``n`` more items of hers."""
    for i in range(start, start + n):
        engine.remember(GIULIA, f"fact-{i}", f"Giulia noted thing number {i}")
        store.put(MINE, f"item-{i}", {"content": f"An item about thing {i}"})


def steps(engine: MemoryEngine, read: Callable[[], Any]) -> int:
    """The virtual machine steps SQLite runs for ``read`` (after one call to warm caches)."""
    read()
    counted = [0]

    def count() -> int:
        counted[0] += 1
        return 0

    def watch(conn: Any, cursor: Any, *_: Any) -> None:
        conn.connection.driver_connection.set_progress_handler(count, STEP)

    sa.event.listen(engine.db, "before_cursor_execute", watch)
    try:
        read()
    finally:
        sa.event.remove(engine.db, "before_cursor_execute", watch)
    return counted[0] * STEP


def test_a_read_of_one_item_or_a_page_costs_the_same_for_a_person_with_twice_as_much(
    sqlite_engine: MemoryEngine,
) -> None:
    engine = sqlite_engine
    store = KorelyStore(engine, account="acme", agent="assistant")
    reads: dict[str, Callable[[], Any]] = {
        "get of a served fact": lambda: store.get(MINE, "fact-3"),
        "get of no item": lambda: store.get(MINE, "nothing-here"),
        "get of a stored item": lambda: store.get(MINE, "item-3"),
        "search without a query": lambda: store.search(MINE, limit=10),
        "delete of no item": lambda: store.delete(MINE, "nothing-here"),
    }
    grow(engine, store, 0, 150)
    before = {name: steps(engine, read) for name, read in reads.items()}
    assert store.get(MINE, "fact-3") is not None and len(store.search(MINE, limit=10)) == 10

    grow(engine, store, 150, 150)
    after = {name: steps(engine, read) for name, read in reads.items()}

    grew = {name: (before[name], after[name]) for name in reads if after[name] > before[name] * 1.3}
    assert not grew, f"steps before and after the person's facts and items doubled: {grew}"
    # What the page holds is what the store holds: the newest of items and facts alike.
    page = store.search(MINE, limit=4)
    assert [i.key for i in page] == ["item-299", "fact-299", "item-298", "fact-298"]
    assert [i.key for i in store.search(MINE, limit=2, offset=2)] == ["item-298", "fact-298"]
    assert {i.key for i in store.search(MINE, filter={"kind": "Memory"}, limit=3)} == {
        "fact-299",
        "fact-298",
        "fact-297",
    }
