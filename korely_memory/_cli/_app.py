"""The root command, its options, how it opens the database and how it reports an error.

``--url`` and ``--json`` are taken before the command or after it; without
``--url``, the database is ``$KORELY_DATABASE_URL``, else ``./korely-memory.db``,
as for the engine. Every error is one line on stderr, ``korely: CODE:
message``, with a non-zero exit status: 1 for an error of the memory or the
database, 2 for a command line that does not parse.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from .. import limits
from .._db import _database, _migrations
from .._engine import MemoryEngine
from .._values._errors import InvalidRequest, KorelyError, NotFound

F = TypeVar("F", bound=Callable[..., Any])
ENV = "KORELY_DATABASE_URL"
_NO_ARGS: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2 and later


class Failed(KorelyError):
    """A command that ran but could not do all it was asked (the message says what is left)."""

    code = "incomplete"


@dataclass
class Settings:
    """What the options before and after the command name say."""

    url: str | None = None
    json: bool = False


class KorelyGroup(click.Group):
    """A group whose errors are one line with a code, whatever command raised them."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            status = result if isinstance(result, int) else 0
        except click.exceptions.Abort:
            status = _fail("aborted", "nothing was changed", 1)
        except click.ClickException as error:
            if isinstance(error, _NO_ARGS):  # a group named alone: its help, as click prints it
                click.echo(error.format_message(), err=True)
                status = error.exit_code
            else:
                status = _fail("usage", error.format_message(), error.exit_code)
        except KorelyError as error:
            status = _fail(error.code, error.message, 1)
        except SQLAlchemyError as error:
            status = _fail("database", _first_line(error), 1)
        except ModuleNotFoundError as error:  # a postgresql:// URL without psycopg
            status = _fail("missing_module", str(error), 1)
        if standalone_mode:
            sys.exit(status)
        return status


class ListByDefault(KorelyGroup):
    """``korely review ACCOUNT`` is ``korely review list ACCOUNT``: a group that lists unless a
    command of it is named."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["list", *args]
        return super().parse_args(ctx, args)


def _fail(code: str, message: str, status: int) -> int:
    click.echo(f"korely: {code}: {message}", err=True)
    return status


def _first_line(error: SQLAlchemyError) -> str:
    said = str(getattr(error, "orig", None) or error).strip()
    return said.splitlines()[0] if said else type(error).__name__


def _set_url(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(Settings).url = value


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Settings).json = True


URL_HELP = f"The database, as a SQLAlchemy URL (default: ${ENV}, else {limits.DEFAULT_URL})."


def common(command: F) -> F:
    """``--url`` and ``--json`` after the command name too."""
    command = click.option(
        "--json", is_flag=True, expose_value=False, callback=_set_json, help="Print JSON."
    )(command)
    return click.option("--url", expose_value=False, callback=_set_url, help=URL_HELP)(command)


@click.group("korely", cls=KorelyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", envvar=ENV, show_envvar=True, help=URL_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.version_option(package_name="korely-memory-engine", prog_name="korely")
@click.pass_context
def cli(ctx: click.Context, url: str | None, as_json: bool) -> None:
    """See and change what the memory holds, and keep it in shape.

    Names the database with --url, else $KORELY_DATABASE_URL, else
    ./korely-memory.db (as the engine does). Prints tables, or JSON with
    --json. An error is one line, `korely: CODE: message`, and a non-zero exit
    status.
    """
    ctx.obj = Settings(url=url, json=as_json)


def main() -> None:
    """The console script ``korely``."""
    cli.main(prog_name="korely")


# -- opening the database ----------------------------------------------------------------


def database_url(settings: Settings, *, may_create: bool = False) -> URL:
    """The URL named (``--url``, else ``$KORELY_DATABASE_URL``, else the engine's default),
    refusing a SQLite file that is not there (a typo would make a new one).

    Raises:
        InvalidRequest: The URL is empty, or not one the engine runs on (``limits.check_url``).
        NotFound: The SQLite file does not exist and ``may_create`` is False.
    """
    if settings.url == "":
        raise InvalidRequest("url", f"must name a database (or leave out --url and ${ENV})")
    url = limits.check_url(settings.url)
    if url.get_backend_name() == "sqlite" and not _database.is_memory_sqlite(url):
        path = url.database or ""
        if not may_create and not os.path.exists(path):
            if settings.url or os.environ.get(ENV):
                raise NotFound(f"no database at {path} (korely db upgrade creates one)")
            raise NotFound(
                f"no database at {path}, the default (name one with --url or ${ENV}; "
                "korely db upgrade creates it)"
            )
    return url


def _read_only(url: URL) -> Engine | None:
    """A SQLite file not in WAL mode (an empty file, another application's), opened read-only:
    the engine's first connection would turn it into a WAL database. None for the others."""
    path = url.database
    if url.get_backend_name() != "sqlite" or _database.is_memory_sqlite(url) or not path:
        return None
    if url.query.get("uri") in ("true", "1") or path.startswith("file:"):
        return None
    try:
        with open(path, "rb") as file:
            header = file.read(20)
    except OSError:  # unreadable, or a folder: SQLite says so, in one line
        return None
    if header.startswith(b"SQLite format 3\x00") and header[18:19] == b"\x02":
        return None  # WAL already: the engine changes nothing of it
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    return sa.create_engine(
        "sqlite://",
        creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False),
        poolclass=NullPool,
    )


def open_engine(ctx: click.Context) -> MemoryEngine:
    """The memory, closed when the command ends. It never creates or upgrades the schema
    (``korely db upgrade`` does).

    Raises:
        InvalidRequest: The server is one the engine does not run on (``check_server``).
        NotFound: The database holds none of the memory's tables (a wrong database or schema).
    """
    url = database_url(ctx.find_object(Settings) or Settings())
    probe = _read_only(url) or _database.create(url)
    try:
        _database.check_server(probe)
        with probe.connect() as conn:
            empty = _migrations.state(conn) == _migrations.EMPTY
    finally:
        probe.dispose()
    if empty:
        raise NotFound("the database holds no memory (korely db upgrade creates one)")
    engine = MemoryEngine(url, auto_upgrade=False)
    ctx.call_on_close(engine.close)
    return engine


def open_database(
    ctx: click.Context, *, may_create: bool = False, read_only: bool = False
) -> Engine:
    """A SQLAlchemy engine on the database, without the memory's start-up check; with
    ``read_only``, a SQLite file is left byte for byte as it was.

    Raises:
        InvalidRequest: The server is one the engine does not run on (``check_server``).
    """
    url = database_url(ctx.find_object(Settings) or Settings(), may_create=may_create)
    db = (_read_only(url) if read_only else None) or _database.create(url)
    ctx.call_on_close(db.dispose)  # refused too: disposed when the command ends
    _database.check_server(db)
    return db


# -- arguments ------------------------------------------------------------------------------


def moment(_ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A date (midnight UTC) or an ISO 8601 time; without an offset, UTC (``limits.check_moment``,
    refused in its words)."""
    if value is None:
        return None
    field = param.name or "moment"
    try:
        return limits.check_moment(field, value)
    except InvalidRequest as error:
        raise click.BadParameter(error.message.removeprefix(f"{field}: "), param=param) from None


def moment_option(name: str, help: str) -> Callable[[F], F]:
    """An option that takes a moment (``moment``)."""
    return click.option(name, callback=moment, metavar="WHEN", help=help)


def user_or_none(user: str) -> str | None:
    """The USER argument: '' names the memory of an agent that serves no particular person."""
    return user or None
