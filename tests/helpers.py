"""Small helpers shared by the engine's tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import ModuleType
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


def exported(module: ModuleType, *also: str) -> list[str]:
    """What ``__all__`` must be, as httpx pins its own: every name in ``vars(module)`` that does
    not start with "_" (but not its own submodules, bound when anything imports them) and
    ``also``, in ruff's order for ``__all__``: constants, then classes, then the rest."""
    inside = module.__name__ + "."
    names = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not (isinstance(value, ModuleType) and value.__name__.startswith(inside))
    }
    return sorted(
        names | set(also), key=lambda n: (0 if n.isupper() else int(n[0].islower()) + 1, n)
    )


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
