"""Connections: one the server dropped costs no failed call (the call runs again on a new one),
and a closed engine leaves none open."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine

from .helpers import statements


def test_a_dropped_idle_connection_is_replaced_without_a_failed_call(
    postgresql_url: str, giulia: Identity
) -> None:
    with MemoryEngine(postgresql_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        pids = idle_backends(engine)
        assert pids
        terminate(postgresql_url, pids)  # a restart, a failover, an idle timeout
        assert "Giulia lives in Rome" in engine.get_context(giulia, "where").text
        terminate(postgresql_url, idle_backends(engine))
        assert engine.correct(giulia, "home-city", "Giulia lives in Milan").content.endswith(
            "Milan"
        )
        terminate(postgresql_url, idle_backends(engine))
        assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Milan"]


def test_a_read_pays_one_round_trip_on_postgresql(postgresql_url: str, giulia: Identity) -> None:
    with MemoryEngine(postgresql_url) as engine:
        for i in range(40):
            engine.remember(giulia, f"topic-{i}", f"Giulia prefers option {i} for invoices")
        engine.get_context(giulia, "invoices")
        with statements(engine.db) as sent:
            engine.get_context(giulia, "Which invoices does she want on paper?")
        assert len(sent) == 1, sent  # no BEGIN, no liveness ping, no second statement


def idle_backends(engine: MemoryEngine) -> list[int]:
    """The server processes behind the engine's pooled connections."""
    pids = []
    pool = engine.db.pool
    for _ in range(pool.checkedin()):
        raw = engine.db.raw_connection()
        pids.append(raw.driver_connection.info.backend_pid)
        raw.close()
    return pids


def terminate(url: str, pids: list[int]) -> None:
    admin = sa.create_engine(url)
    with admin.connect() as conn:
        for pid in pids:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    admin.dispose()


def test_a_call_still_running_when_the_engine_closes_leaves_no_connection_open(
    db_url: str, giulia: Identity
) -> None:
    reading, go_on = threading.Event(), threading.Event()

    def slow_count(text: str) -> int:
        if "Rome" in text and not go_on.is_set():
            reading.set()  # the read holds its connection now
            go_on.wait(10)
        return len(text.split())

    engine = MemoryEngine(db_url, tokenizer=slow_count)
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    used: list[Any] = []
    sa.event.listen(engine.db, "checkout", lambda dbapi, *_: used.append(dbapi))
    late = threading.Thread(target=engine.get_context, args=(giulia, "where"))
    late.start()
    assert reading.wait(10)
    engine.close()  # a background capture or an acknowledgement may still be at work
    go_on.set()
    late.join(10)
    engine.get_facts(giulia)  # a call after close, too
    assert used and all(closed(dbapi) for dbapi in used)


def closed(dbapi_connection: Any) -> bool:
    """Whether a DBAPI connection (psycopg or sqlite3) is closed."""
    if hasattr(dbapi_connection, "closed"):
        return bool(dbapi_connection.closed)
    try:
        dbapi_connection.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False
