"""Small helpers shared by the engine's tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa

from korely_memory import Identity, MemoryEngine, _versions
from korely_memory._schema import Base


def snapshot(engine: MemoryEngine) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, in primary-key order.

    Equal snapshots mean an unchanged database.
    """
    out = {}
    with engine.db.connect() as conn:
        for table in Base.metadata.sorted_tables:
            rows = conn.execute(sa.select(table).order_by(*table.primary_key.columns)).all()
            out[table.name] = [tuple(r) for r in rows]
    return out


@contextlib.contextmanager
def statements(db: sa.Engine) -> Iterator[list[str]]:
    """Every SQL statement ``db`` sends to the database while the block runs, in order."""
    sent: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    sa.event.listen(db, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        sa.event.remove(db, "before_cursor_execute", record)


def hold_the_mark_lock(url: str, giulia: Identity) -> Callable[[], None]:
    """Hold what a read's mark step needs for longer than it waits; returns the release."""
    holder = sa.create_engine(url)
    conn = holder.connect()
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        trans = conn.begin()
        _versions.lock_person(conn, giulia.account, giulia.user, erasing=True)
        assert trans.is_active

    def release() -> None:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("ROLLBACK")
        conn.close()
        holder.dispose()

    return release
