"""The work every contender does: the same facts, the same query, loaded the same way.

Facts are made from a fixed vocabulary with a fixed seed, so every run and
every contender reads the same text. Large amounts are loaded with one
``executemany`` per batch (PostgreSQL: ``COPY``), never one engine call per fact.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine

ACCOUNT = "acme"
AGENT = "support-copilot"
QUERY = "Where does Giulia live, and which invoices does she want on paper?"
SINCE = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)

_SUBJECTS = ["Giulia", "The customer", "She", "Her team", "The account", "Their office"]
_VERBS = [
    "prefers",
    "asks for",
    "uses",
    "wants",
    "reviews",
    "files",
    "keeps",
    "needs",
    "sends",
    "approves",
]
_THINGS = [
    "invoices",
    "reports",
    "contracts",
    "tickets",
    "budgets",
    "orders",
    "forecasts",
    "licences",
    "renewals",
    "refunds",
    "dashboards",
    "exports",
    "backups",
    "audits",
    "quotes",
    "shipments",
    "payments",
    "credits",
    "meetings",
    "calls",
]
_MANNER = [
    "on paper",
    "by email",
    "every Monday",
    "before noon",
    "in Italian",
    "in euros",
    "as PDF",
    "monthly",
    "weekly",
    "with a summary",
    "from the Milan office",
    "for the Rome region",
    "after review",
    "without attachments",
    "in the shared folder",
    "through the portal",
    "on the first day",
    "with two approvals",
]
_TOPICS = [
    "billing",
    "region",
    "plan",
    "language",
    "timezone",
    "contact",
    "channel",
    "format",
    "schedule",
    "approval",
    "currency",
    "vendor",
    "office",
    "device",
    "team",
    "project",
    "printer",
    "login",
    "escalation",
    "holiday",
]


@dataclass(frozen=True)
class Item:
    key: str
    content: str


def items(n: int, seed: int = 7) -> list[Item]:
    """``n`` distinct facts of one person, one of which answers ``QUERY``."""
    rng = random.Random(seed)
    out = [Item("home-city", "Giulia lives in Milan and works from the Milan office")]
    for i in range(1, n):
        content = (
            f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_THINGS)} "
            f"{rng.choice(_MANNER)} and {rng.choice(_THINGS)} {rng.choice(_MANNER)}"
        )
        out.append(Item(f"{rng.choice(_TOPICS)}-{i}", content))
    return out[:n]


def person(user: str = "giulia") -> Identity:
    return Identity(ACCOUNT, user, AGENT)


def _fact_rows(
    user: str, batch: list[Item], moment: dt.datetime, first_id: int
) -> Iterator[dict[str, object]]:
    for i, item in enumerate(batch):
        t = moment + dt.timedelta(microseconds=i)
        yield {
            "id": first_id + i,
            "account": ACCOUNT,
            "owner": user,
            "owner_key": user,
            "agent": AGENT,
            "key": item.key,
            "content": item.content,
            "scope": "user",
            "valid_from": SINCE,
            "recorded_at": t,
            "created_at": t,
            "modified_at": t,
        }


def load(engine: MemoryEngine, owners: dict[str, list[Item]], batch: int = 20_000) -> None:
    """Insert true facts for each owner, with the words and counts the engine keeps beside them.

    One statement per batch (PostgreSQL: COPY), not one engine call per fact.
    """
    from korely_memory._db._schema import fact_terms, facts
    from korely_memory._store import _word_index

    now = dt.datetime.now(dt.timezone.utc)
    rows: list[dict[str, object]] = []
    terms: list[dict[str, object]] = []
    lengths: dict[str, int] = {}
    with engine.db.begin() as conn:
        next_id = (conn.execute(sa.select(sa.func.max(facts.c.id))).scalar() or 0) + 1
        for user, owned in owners.items():
            for row in _fact_rows(user, owned, now, next_id):
                counted = _word_index.terms_of(str(row["key"]), str(row["content"]), engine._words)
                row["words"] = sum(counted.values())
                lengths[user] = lengths.get(user, 0) + row["words"]
                rows.append(row)
                terms.extend(
                    {
                        "account": ACCOUNT,
                        "agent": AGENT,
                        "space": user,
                        "term": t,
                        "fact_id": row["id"],
                        "tf": n,
                    }
                    for t, n in counted.items()
                )
            next_id += len(owned)
            if len(rows) >= batch:
                _flush(conn, facts, rows)
                _flush(conn, fact_terms, terms)
                rows, terms = [], []
        _flush(conn, facts, rows)
        _flush(conn, fact_terms, terms)
        _word_index.add_counts(
            conn,
            {
                (ACCOUNT, AGENT, user): (len(owned), lengths[user], 0)
                for user, owned in owners.items()
            },
        )
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('korely_facts', 'id'), max(id)) "
                "FROM korely_facts"
            )
    vacuum_analyze(engine)


def load_memories(engine: MemoryEngine, owners: dict[str, list[str]], batch: int = 500) -> None:
    """Insert memories for each owner, with the words the engine indexes them by (as
    ``add_memory`` writes them), one statement per batch (PostgreSQL: COPY)."""
    from korely_memory._db._schema import memories, memory_terms
    from korely_memory._store._memories import MAX_TERMS

    now = dt.datetime.now(dt.timezone.utc)
    rows: list[dict[str, object]] = []
    terms: list[dict[str, object]] = []
    with engine.db.begin() as conn:
        next_id = (conn.execute(sa.select(sa.func.max(memories.c.id))).scalar() or 0) + 1
        for user, texts in owners.items():
            for text in texts:
                said = engine._words(text)
                rows.append(
                    {
                        "id": next_id,
                        "account": ACCOUNT,
                        "owner": user,
                        "owner_key": user,
                        "agent": AGENT,
                        "content": text,
                        "created_at": now + dt.timedelta(microseconds=next_id),
                        "words": len(said),
                        "chars": len(text),
                    }
                )
                terms.extend(
                    {
                        "account": ACCOUNT,
                        "agent": AGENT,
                        "space": user,
                        "term": term,
                        "memory_id": next_id,
                        "tf": n,
                    }
                    for term, n in Counter(said).most_common(MAX_TERMS)
                )
                next_id += 1
                if len(rows) >= batch:
                    _flush(conn, memories, rows)
                    _flush(conn, memory_terms, terms)
                    rows, terms = [], []
        _flush(conn, memories, rows)
        _flush(conn, memory_terms, terms)
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('korely_memories', 'id'), max(id)) "
                "FROM korely_memories"
            )
    vacuum_analyze(engine)


# The tables of the session's schema, for VACUUM: a bare ``VACUUM ANALYZE`` would go through
# every schema of the database and its catalogs, none of which the load touched.
SCHEMA_TABLES = (
    "SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables "
    "WHERE schemaname = current_schema()"
)


def vacuum_analyze(engine: MemoryEngine) -> None:
    """PostgreSQL: vacuum and analyse the engine's tables after a load, as autovacuum would."""
    if engine.db.dialect.name == "postgresql":
        with engine.db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            tables = conn.exec_driver_sql(SCHEMA_TABLES).scalar_one()
            conn.exec_driver_sql(f"VACUUM ANALYZE {tables}")


def _flush(conn: sa.Connection, table: sa.Table, rows: list[dict[str, object]]) -> None:
    if not rows:
        return
    if conn.dialect.name != "postgresql":
        conn.execute(table.insert(), rows)
        return
    columns = list(rows[0])
    raw = conn.connection.driver_connection
    assert raw is not None
    with (
        raw.cursor() as cur,
        cur.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row([row[c] for c in columns])


def others(count: int, per_owner: int = 10) -> dict[str, list[Item]]:
    """``count`` other people with ``per_owner`` short facts each."""
    return {
        f"user-{u:06d}": [
            Item(f"topic-{k}", f"Note {k} on {_THINGS[(u + k) % len(_THINGS)]}")
            for k in range(per_owner)
        ]
        for u in range(count)
    }
