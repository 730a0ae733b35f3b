"""Alembic, driven from inside the package: no ``alembic.ini``, the connection handed over.

Imported only when a schema has to change or be compared, so that ``import
korely_memory`` and an engine start never load Alembic.
"""

from __future__ import annotations

import io
import re
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, Connection

from .._schema import Base
from . import VERSION_TABLE

SCRIPTS = "korely_memory._db:_migrations"


def config(
    connection: Connection | None = None, *, scripts: str = SCRIPTS, **attributes: Any
) -> Config:
    """An Alembic configuration for the package's revisions, run on ``connection``."""
    cfg = Config(output_buffer=io.StringIO())
    cfg.set_main_option("script_location", scripts)
    cfg.attributes["connection"] = connection
    cfg.attributes.update(attributes)
    return cfg


def revisions(scripts: str = SCRIPTS) -> list[str]:
    """Every revision, oldest first."""
    directory = ScriptDirectory.from_config(config(scripts=scripts))
    return [r.revision for r in reversed(list(directory.walk_revisions()))]


def upgrade(conn: Connection, target: str, *, scripts: str = SCRIPTS) -> None:
    """Run the revisions up to ``target`` in the transaction ``conn`` is in (it holds the lock)."""
    command.upgrade(config(conn, scripts=scripts), target)


def stamp(conn: Connection, revision: str) -> None:
    """Record ``revision`` as the one the database is at, changing nothing else."""
    command.stamp(config(conn), revision)


def upgrade_sql(url: URL, start: str, target: str) -> str:
    """The SQL that upgrades a database at ``start`` to ``target``, for a reviewer to run."""
    cfg = config(url=url.render_as_string(hide_password=False))
    command.upgrade(cfg, f"{start}:{target}", sql=True)
    buffer = cfg.output_buffer
    assert isinstance(buffer, io.StringIO)
    return buffer.getvalue()


def differences(conn: Connection) -> list[Any]:
    """What differs between the memory's tables in the database and the models (Alembic's
    autogenerate comparison); empty when they agree."""
    context = MigrationContext.configure(conn, opts=options(conn.dialect.name))
    return list(compare_metadata(context, Base.metadata))


def options(dialect: str | None = None) -> dict[str, Any]:
    """The options every Alembic context of the memory is configured with (on ``dialect``)."""
    return {
        "target_metadata": Base.metadata,
        "version_table": VERSION_TABLE,
        "render_as_batch": True,
        "compare_type": True,
        "include_name": _include_name,
        "include_object": _for_dialect(dialect),
    }


def _include_name(name: str | None, kind: str, _parents: Any) -> bool:
    """Only the memory's own tables: an application's tables in the same database are not ours."""
    from . import is_memory_table

    if kind != "table":
        return True
    return name is not None and is_memory_table(name) and not _PARTITION.fullmatch(name)


# A partition of one of the memory's tables (``korely db create --partitions``): the models
# declare the table, PostgreSQL routes its rows.
_PARTITION = re.compile(
    "(?:" + "|".join(re.escape(t) for t in sorted(Base.metadata.tables)) + r")_p\d+"
)


def _for_dialect(dialect: str | None) -> Any:
    """Alembic's ``include_object``: what the models declare for one database only (``ddl_if``)
    is compared on that one; what PostgreSQL makes for partitions is not compared."""

    def include(obj: Any, _name: str | None, kind: str, _reflected: bool, _other: Any) -> bool:
        if kind == "foreign_key_constraint" and _PARTITION.fullmatch(obj.referred_table.name):
            return False  # PostgreSQL's own copy of a foreign key, for each partition it names
        only = getattr(obj, "_ddl_if", None)  # SQLAlchemy's record of it: Alembic reads none
        return only is None or only.dialect in (None, dialect)

    return include
