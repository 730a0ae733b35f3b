"""What every reliability test shares: a database emptied between examples, and the invariants of
the stored versions."""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine
from korely_memory._db._schema import Base, facts, marks, memories

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
    with engine.db.connect() as conn, conn.begin():
        conn.execute(facts.update().values(replaced_by_id=None, source_memory_id=None))
        for table in reversed(Base.metadata.sorted_tables):  # children before parents
            conn.execute(table.delete())


def broken_invariants(engine: MemoryEngine) -> list[str]:
    """Every way the stored rows break the promises of versions; empty when they hold.

    At most one true row per key and namespace; every ended row says why it
    ended; a replacement points at an existing row of the same key; a mark and a
    fact's memory point at rows that exist.
    """
    problems: list[str] = []
    with engine.db.begin() as conn:  # committed: a rollback empties the prepared statements
        rows = conn.execute(sa.select(facts)).all()
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
        memory_ids = set(conn.execute(sa.select(memories.c.id)).scalars())
        problems += [
            f"fact {r.id} read from missing memory {r.source_memory_id}"
            for r in rows
            if r.source_memory_id is not None and r.source_memory_id not in memory_ids
        ]
        for fact_id in conn.execute(sa.select(marks.c.fact_id)).scalars():
            if fact_id not in by_id:
                problems.append(f"mark of missing fact {fact_id}")
    return problems
