"""Alembic's entry point for the memory's revisions.

Run through ``korely db upgrade`` or the engine, which hand over a connection
already in the transaction that holds the schema lock; offline (``korely db
upgrade --sql``), it writes the SQL instead.
"""

from __future__ import annotations

from alembic import context

from korely_memory._db._migrations._alembic import options


def _run() -> None:
    config = context.config
    if context.is_offline_mode():
        context.configure(url=config.attributes["url"], literal_binds=True, **options())
    else:
        connection = config.attributes.get("connection")
        if connection is None:
            raise RuntimeError("the memory's revisions run through `korely db upgrade`")
        context.configure(connection=connection, **options())
    with context.begin_transaction():
        context.run_migrations()


_run()
