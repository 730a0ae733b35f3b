"""What every reliability test shares: a database emptied between examples, and the invariants of
the stored versions."""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine
from korely_memory._db._schema import Base, facts, marks, memories

from ..helpers import one_statement

GIULIA = Identity("acme", "giulia", "support")
# Few identities, so that the ones met share history often, and each pair differs in one part only,
# so that a leak has a neighbour to reach. Giulia twice: she is met most.
IDENTITIES = (
    GIULIA,
    GIULIA,
    Identity("acme", "giulia", "sales"),
    Identity("acme", "marco", "support"),
    Identity("acme", None, "support"),
    Identity("acme", "anna", "support"),
    Identity("globex", "giulia", "support"),
    Identity("globex", None, "sales"),
)


def empty(engine: MemoryEngine) -> None:
    """Delete every row: a fresh database for the next example, without creating one."""
    unlink = facts.update().values(replaced_by_id=None, source_memory_id=None)
    deletes = [table.delete() for table in reversed(Base.metadata.sorted_tables)]  # children first
    if engine.db.dialect.name != "postgresql":
        with engine.db.connect() as conn, conn.begin():
            for statement in [unlink, *deletes]:
                conn.execute(statement)
        return
    # PostgreSQL: the same statements in one round trip, which the server runs as one
    # transaction. Not prepared (a string of several statements cannot be), and outside a
    # transaction of the driver's, so that nothing rolls back the engine's prepared statements.
    dialect = engine.db.dialect
    sql = "; ".join(
        str(s.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
        for s in [unlink, *deletes]
    )
    with engine.db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.connection.driver_connection.execute(sql, prepare=False)  # type: ignore[union-attr]


def broken_invariants(engine: MemoryEngine) -> list[str]:
    """Every way the stored rows break the promises of versions; empty when they hold.

    At most one true row per key and namespace; every ended row says why it
    ended; a replacement points at an existing row of the same key; a mark and a
    fact's memory point at rows that exist.
    """
    problems: list[str] = []
    with one_statement(engine.db) as conn:
        found = conn.execute(_EVERY_ROW_CHECKED).all()
    rows = [r for r in found if r.kind == "fact"]
    by_id = {r.id: r for r in rows}
    true_keys: Counter[tuple[object, ...]] = Counter()
    for r in rows:
        if r.ended_recorded_at is None:
            space = ("account",) if r.scope == "account" else ("personal", r.owner_key)
            true_keys[(r.account, r.agent, *space, r.key)] += 1
            if r.end_cause is not None or r.invalid_at is not None:
                problems.append(f"true fact {r.id} has an end ({r.end_cause}, {r.invalid_at})")
        else:
            if r.end_cause is None and r.replaced_by_id is None:
                problems.append(f"ended fact {r.id} has neither end_cause nor replaced_by_id")
            if r.end_cause not in (
                "stated",
                "corrected",
                "forgotten",
                "read_from_memory",
                "rejected",
                "expired",
            ):
                problems.append(f"ended fact {r.id} has end_cause {r.end_cause!r}")
        if r.replaced_by_id is not None:
            nxt = by_id.get(r.replaced_by_id)
            if nxt is None:
                problems.append(f"fact {r.id} replaced by missing fact {r.replaced_by_id}")
            elif nxt.key != r.key or nxt.account != r.account or nxt.agent != r.agent:
                problems.append(f"fact {r.id} replaced by fact {nxt.id} of another key")
            if r.ended_recorded_at is None:
                problems.append(f"true fact {r.id} already replaced by {r.replaced_by_id}")
    problems += [f"{n} true rows for {k}" for k, n in true_keys.items() if n > 1]
    memory_ids = {r.id for r in found if r.kind == "memory"}
    problems += [
        f"fact {r.id} read from missing memory {r.source_memory_id}"
        for r in rows
        if r.source_memory_id is not None and r.source_memory_id not in memory_ids
    ]
    for r in found:
        if r.kind == "mark" and r.id not in by_id:
            problems.append(f"mark of missing fact {r.id}")
    return problems


# What ``broken_invariants`` reads, in one statement (one round trip, where a statement per table
# and a transaction around them made five on PostgreSQL): the facts, with "fact" as their kind;
# the ids of the memories ("memory"); the facts the marks point at ("mark", in ``id``).
_FACT_COLUMNS = (
    facts.c.id,
    facts.c.account,
    facts.c.agent,
    facts.c.scope,
    facts.c.owner_key,
    facts.c.key,
    facts.c.ended_recorded_at,
    facts.c.end_cause,
    facts.c.invalid_at,
    facts.c.replaced_by_id,
    facts.c.source_memory_id,
)
_NONE = [sa.null()] * (len(_FACT_COLUMNS) - 1)
_EVERY_ROW_CHECKED = sa.union_all(
    sa.select(sa.literal_column("'fact'").label("kind"), *_FACT_COLUMNS),
    sa.select(sa.literal_column("'memory'"), memories.c.id, *_NONE),
    sa.select(sa.literal_column("'mark'"), marks.c.fact_id, *_NONE),
)
