"""Every statement the engine sends for one person reaches one partition of each table: on a
database whose tables are hash-partitioned by account (``korely db create --partitions``), as on
one that distributes them by account across servers, such a statement is routed to one shard.

The common paths run on a partitioned PostgreSQL database, with every statement recorded and its
parameters; PostgreSQL's own plan of each (``EXPLAIN``, with the same parameters) then says which
partitions it reads or changes. An INSERT routes each row by the account it holds: it must name
the account, of the person's account only.

The exceptions: ``trim``, which works through every account (``test_the_exceptions_are_what_they_
say``), and the command line's ``korely confirm ID`` / ``reject ID``, which finds a proposal by its
id alone (``_versions.in_any_account``). The statements on ``korely_settings`` (the language, the
sealing secret: every node holds all of it) and the schema's revision route nowhere in particular.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine, Operation, Scope
from korely_memory._db._database import create, resolve_url
from korely_memory._db._migrations import (
    SHARED,
    VERSION_TABLE,
    create_partitioned,
    schema_transaction,
)

pytestmark = pytest.mark.new_database

PARTITIONS = 8
ACME = "acme"
GIULIA = Identity(ACME, "giulia", "support-copilot")
MARCO = Identity(ACME, "marco", "support-copilot")
ANNA = Identity(ACME, "anna", "support-copilot")
# Other accounts' rows in every partition, so that a statement that reads past its own
# account's partition has rows there to read.
OTHERS = [f"account-{n}" for n in range(24)]

Sent = list[tuple[str, Any, bool]]  # statement, parameters, executemany


@pytest.fixture
def engine(postgresql_url: str) -> Iterator[MemoryEngine]:
    """A partitioned database, with a person of each other account already in it."""
    made = create(resolve_url(postgresql_url))
    with schema_transaction(made) as conn:
        create_partitioned(conn, PARTITIONS)
    made.dispose()
    with MemoryEngine(postgresql_url) as opened:
        for account in OTHERS:
            other = Identity(account, "someone", "support-copilot")
            opened.remember(other, "home-city", "Someone lives in Rome")
            opened.add_memory(other, "Someone asked where Giulia lives, in Rome")
            opened.get_context(other, "Rome", reader="bot")
        yield opened


def record(engine: MemoryEngine) -> tuple[Sent, Callable[[], None]]:
    sent: Sent = []

    def seen(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _c: Any, many: bool
    ) -> None:
        sent.append((statement, parameters, many))

    sa.event.listen(engine.db, "before_cursor_execute", seen)
    return sent, lambda: sa.event.remove(engine.db, "before_cursor_execute", seen)


def common_paths(engine: MemoryEngine) -> None:
    """What an application does for one person: every write, every read."""
    engine.grant_admin(ACME, "anna")
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    engine.remember(GIULIA, "diet", "Giulia is vegetarian")
    memory = engine.add_memory(GIULIA, "Giulia asked about running shoes in Rome")
    engine.remember(GIULIA, "shoe-size", "Giulia wears 38", source_memory_id=memory.id)
    engine.get_context(GIULIA, "Where does Giulia live?")
    engine.get_context(GIULIA, "Where does Giulia live?", reader="bot")
    engine.correct(GIULIA, "home-city", "Giulia lives in Milan")
    engine.get_context(GIULIA, "Where does Giulia live?", reader="bot")
    held = engine.get_context(GIULIA, "What does she eat?", reader="bot", hold=60)
    engine.correct(GIULIA, "diet", "Giulia is vegan")
    held = engine.get_context(GIULIA, "What does she eat?", reader="bot", hold=60)
    assert held.receipt is not None
    engine.acknowledge(held.receipt)
    engine.get_context(GIULIA, "Where does Giulia live?", conversation="c1")
    engine.get_context(GIULIA, "Where does Giulia live?", conversation="c1")
    engine.remember(MARCO, "hours", "Acme opens at nine", scope=Scope.ACCOUNT)
    engine.confirm(ANNA, engine.proposals(ACME)[-1].id)
    engine.search(GIULIA, "Rome shoes")
    engine.history(GIULIA, "home-city")
    engine.get_facts(GIULIA)
    engine.get_facts(GIULIA, include_invalidated=True)
    engine.forget(GIULIA, "diet")
    engine.forget(GIULIA, "shoe-size", erase=True)
    engine.forget_memory(GIULIA, engine.add_memory(GIULIA, "Giulia likes trams").id)
    engine.get_context(GIULIA, "Where does Giulia live?", reader="bot")
    held_for_approval(engine)
    store_items(engine)
    exported = engine.export_user(ACME, "giulia")
    engine.delete_reader(ACME, "bot")
    erased = engine.erase_user(ACME, "giulia")
    engine.import_user(exported, pseudonym=erased.pseudonym, administrator=True)
    engine.erase_user(ACME, "giulia")
    engine.get_context(MARCO, "When does Acme open?", reader="bot")


def held_for_approval(engine: MemoryEngine) -> None:
    """Captured facts held for the person's approval: approved (each operation), declined, and
    one left held for the export, the erasure and the import."""
    said = [("user", "I moved to Turin, and I have a dog.")]
    changes = [
        Operation("replace", "home-city", "Giulia lives in Turin"),
        Operation("record", "pet", "Giulia has a dog"),
        Operation("record", "pet", "Giulia has a dog"),  # held once
    ]
    engine.capture(GIULIA, said, extractor=lambda m, f: changes, hold_for_owner=True, reader="bot")
    city, pet = engine.pending(GIULIA)
    engine.approve(GIULIA, city.id, reader="app")
    engine.decline(GIULIA, pet.id)
    ending = [Operation("end", "home-city")]
    engine.capture(GIULIA, said, extractor=lambda m, f: ending, hold_for_owner=True, reader="bot")
    (ended,) = engine.pending(GIULIA)
    engine.approve(GIULIA, ended.id, reader="app")
    engine.capture(
        GIULIA,
        [("user", "I have a cat.")],
        extractor=lambda m, f: [Operation("record", "pet", "Giulia has a cat")],
        hold_for_owner=True,
    )


def store_items(engine: MemoryEngine) -> None:
    """What a LangGraph store of the person does (``KorelyStore``, through ``engine.items``)."""
    space = ("memories", "giulia")
    items = engine.items
    for key, text in (("trip", "Giulia goes to Paris"), ("pet", "Giulia has a cat")):
        items.put(GIULIA, space, key, {"text": text}, text=text, text_at=["text"], ttl=60)
    items.get(ACME, GIULIA.agent, [(space, "trip")], refresh=True)
    items.list(ACME, GIULIA.agent, ("memories",), limit=10)
    items.list(ACME, GIULIA.agent, ("memories",), equal={"text": "Giulia has a cat"})
    items.refresh(ACME, GIULIA.agent, [(space, "pet")])
    items.namespaces(ACME, GIULIA.agent)
    items.relevance("Paris", ["Giulia goes to Paris"], account=ACME)
    items.delete(ACME, GIULIA.agent, space, "pet")


def test_every_statement_for_one_person_reaches_one_partition(engine: MemoryEngine) -> None:
    sent, stop = record(engine)
    try:
        common_paths(engine)
    finally:
        stop()
    checked = unrouted(engine, sent)
    assert checked["routed"] > 100, checked  # the paths did send what this checks
    assert checked["failures"] == [], "\n\n".join(checked["failures"])


def test_the_exceptions_are_what_they_say(engine: MemoryEngine) -> None:
    """``trim`` works through every account's marks, notes and expired facts, and reaches every
    partition (which also shows that the check above sees a statement that does); the listing
    of an account's proposals, an administrator's, names its account."""
    common_paths(engine)
    sent, stop = record(engine)
    try:
        engine.trim()
    finally:
        stop()
    assert unrouted(engine, sent)["failures"]
    sent, stop = record(engine)
    try:
        engine.proposals(ACME)
        engine.proposals(ACME, "support-copilot")
    finally:
        stop()
    assert unrouted(engine, sent) == {"routed": 2, "failures": []}


def unrouted(engine: MemoryEngine, sent: Sent) -> dict[str, Any]:
    """How many statements reached one partition of each table, and what every other did."""
    failures: list[str] = []
    routed = 0
    with engine.db.connect() as conn:
        for statement, parameters, many in sent:
            if not _TABLE.search(statement) or _only_shared(statement):
                continue
            if statement.lstrip().upper().startswith("INSERT") and " SELECT " not in statement:
                rows = parameters if many else [parameters]
                accounts = {_account_of(row) for row in rows}
                if accounts != {ACME}:
                    failures.append(f"inserts rows of {accounts}: {statement}")
                routed += 1
                continue
            for one in parameters if many else [parameters]:
                plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", one).scalar_one()
                spread = _partitions(plan if isinstance(plan, list) else json.loads(plan))
                wide = {t: sorted(p) for t, p in spread.items() if len(p) > 1}
                if wide:
                    failures.append(f"reaches {wide}: {_short(statement)}")
                else:
                    routed += 1
    return {"routed": routed, "failures": failures}


_TABLE = re.compile(r"\bkorely_\w+")
_PARTITION = re.compile(r"^(korely_\w+)_p(\d+)$")


def _only_shared(statement: str) -> bool:
    named = set(_TABLE.findall(statement))
    return named <= {*SHARED, VERSION_TABLE}


def _account_of(row: Any) -> str | None:
    if isinstance(row, dict):
        return row.get("account")
    return None


def _short(statement: str) -> str:
    """A statement, short enough to read among many in a failure."""
    flat = " ".join(statement.split())
    return flat if len(flat) < 400 else f"{flat[:300]} ... {flat[-100:]}"


def _partitions(plan: Any) -> dict[str, set[str]]:
    """The partitions of each table (as ``table alias``) a plan reads or changes."""
    found: dict[str, set[str]] = {}
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            name = node.get("Relation Name")
            matched = _PARTITION.match(name) if isinstance(name, str) else None
            if matched:
                table = f"{matched[1]} {node.get('Alias', '').rsplit('_', 1)[0]}"
                found.setdefault(table, set()).add(matched[2])
            stack.extend(node.values())
    return found
