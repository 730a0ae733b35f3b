"""The `korely-mcp` command.

    korely-mcp --account acme --user giulia --agent support-copilot --reader giulia-laptop
    korely-mcp --transport http --tokens /etc/korely/tokens.json [--host 127.0.0.1] [--port 8000]
    korely-mcp new-token      # a token for a client, and the hash for the token file
    korely-mcp hash-token     # the hash of a token read from stdin

Over stdio the identity and the reader come from the flags, or else from ``KORELY_ACCOUNT``,
``KORELY_USER``, ``KORELY_AGENT`` and ``KORELY_READER``; over HTTP, from each request's
token. The database is ``--url``, else ``KORELY_DATABASE_URL``, else ``./korely-memory.db``; in
a SQLite URL ``~`` is the home folder, and a missing folder of the file is made. A database that
does not open stops the command with one line naming it and why, and exit status 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from korely_memory import Identity, InvalidRequest, KorelyError, MemoryEngine, limits

from .server import (
    bind,
    caller_from_token,
    create_server,
    endpoint,
    http_app,
    run_http,
    run_stdio,
    transport_security,
)
from .tokens import TokenFile, hash_token, new_token
from .tools import Caller, KorelyTools

DEFAULT_URL = limits.DEFAULT_URL  # the engine's own default, in the working folder
_ENV = {
    "account": "KORELY_ACCOUNT",
    "user": "KORELY_USER",
    "agent": "KORELY_AGENT",
    "reader": "KORELY_READER",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns its exit status.

    Args:
        argv: The arguments, without the program's name (default: ``sys.argv[1:]``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["new-token"]:
        token = new_token()
        print(f"token:  {token}")
        print(f"sha256: {hash_token(token)}")
        return 0
    if args[:1] == ["hash-token"]:
        token = sys.stdin.readline().strip()
        if not token:
            print(
                "korely-mcp: hash-token reads a token from stdin; none was given", file=sys.stderr
            )
            return 2
        print(hash_token(token))
        return 0
    parser = _parser()
    options = parser.parse_args(args)
    try:
        if options.transport == "stdio":
            _serve_stdio(parser, options)
        else:
            _serve_http(parser, options)
    except KorelyError as error:
        parser.exit(2, f"korely-mcp: {error}\n")
    except KeyboardInterrupt:
        pass
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="korely-mcp",
        description="korely-memory over the Model Context Protocol. Also: 'korely-mcp new-token' "
        "makes a token and its hash; 'korely-mcp hash-token' hashes a token read from stdin.",
    )
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--url", help="the database (default: $KORELY_DATABASE_URL)")
    who = parser.add_argument_group("stdio: whose memory, and the reader name of this client")
    for name, variable in _ENV.items():
        who.add_argument(f"--{name}", help=f"(default: ${variable})")
    who.add_argument(
        "--no-user",
        action="store_true",
        help="memory of the agent with no particular person (instead of --user)",
    )
    http = parser.add_argument_group("http")
    http.add_argument("--tokens", default=os.environ.get("KORELY_MCP_TOKENS"), help="token file")
    http.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    http.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0: any)")
    http.add_argument("--path", default="/mcp", help="the endpoint's path (default: /mcp)")
    http.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host header to accept (name or name:port; repeat for more): off loopback, "
        "turns the Host and Origin checks against DNS rebinding back on",
    )
    reading = parser.add_argument_group("reading and writing")
    reading.add_argument(
        "--token-budget",
        type=int,
        default=limits.DEFAULT_BUDGET,
        help=f"a block's budget when the model gives none (default: {limits.DEFAULT_BUDGET})",
    )
    reading.add_argument(
        "--hold",
        type=float,
        default=limits.DEFAULT_HOLD.total_seconds(),
        help="seconds a block's change notices wait for the caller's next call before they "
        "are told again (default: %(default)g; 0: spend them as they are read)",
    )
    reading.add_argument(
        "--max-facts",
        help="refuse a new key once an identity keeps this many facts (0: no new key)",
    )
    return parser


def _tools(options: argparse.Namespace) -> KorelyTools:
    engine = open_engine(options.url)
    try:
        return KorelyTools(
            engine,
            token_budget=options.token_budget,
            hold=options.hold,
            max_facts=_count(options.max_facts),
        )
    except KorelyError:
        engine.close()
        raise


def _count(text: str | int | None) -> Any:
    # A number as the flag was written; anything else is handed on as it came, for the
    # engine's rule (limits.check_max_facts) to refuse naming the field.
    if isinstance(text, str) and re.fullmatch(r"[+-]?[0-9]+", text.strip()):
        return int(text)
    return text


class CannotOpen(KorelyError):
    """The database named does not open; the message names it (no password) and says why."""

    code = "database"


def database_url(named: str | None) -> URL:
    """The URL the server opens: ``named``, else ``$KORELY_DATABASE_URL``, else ``DEFAULT_URL``.

    In a SQLite URL a leading ``~`` is the home folder, as a shell would read it.

    Raises:
        CannotOpen: It is not a database URL.
    """
    text = named or os.environ.get("KORELY_DATABASE_URL") or DEFAULT_URL
    try:
        # The engine's own reading of a URL: its ``~``, its refusal (no password repeated).
        return limits.check_url(text)
    except InvalidRequest as error:
        raise CannotOpen(str(error).removeprefix("url: ")) from None


def open_engine(named: str | None) -> MemoryEngine:
    """The memory at `database_url(named)`, its SQLite file's folder made when missing.

    Raises:
        CannotOpen: The database does not open (no such folder and none can be made, a
            server that does not answer, a driver that is not installed); the message
            names the URL without its password and the cause.
        KorelyError: The engine refuses the database (its schema, its language).
    """
    url = database_url(named)
    shown = url.render_as_string(hide_password=True)
    try:
        _make_folder(url)
        return MemoryEngine(url)
    except SQLAlchemyError as error:
        said = str(getattr(error, "orig", None) or error).strip()
        cause = said.splitlines()[0] if said else type(error).__name__
        raise CannotOpen(f"cannot open the database {shown}: {cause}") from None
    except (OSError, ModuleNotFoundError) as error:
        raise CannotOpen(f"cannot open the database {shown}: {error}") from None


def _make_folder(url: URL) -> None:
    # The folder of a new SQLite file, as ~/.korely/ for ~/.korely/memory.db: for its owner
    # only, like the file. A URI filename (?uri=true, file:...) is SQLite's to read.
    path = url.database
    if url.get_backend_name() != "sqlite" or not path or path == ":memory:":
        return
    if url.query.get("uri") in ("true", "1") or path.startswith("file:"):
        return
    folder = Path(path).parent
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder")
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True)


def _log_to_stderr() -> None:
    # stdout is the protocol's channel over stdio: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)


def _serve_stdio(parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
    # check_identity checks each name below; here they are only gathered.
    named: dict[str, Any] = {
        name: getattr(options, name) or os.environ.get(env) or None for name, env in _ENV.items()
    }
    if named["user"] is not None and options.no_user:
        parser.error("--user (or $KORELY_USER) and --no-user exclude each other")
    missing = [
        "--user (or --no-user)" if name == "user" else f"--{name}"
        for name, value in named.items()
        if value is None and not (name == "user" and options.no_user)
    ]
    if missing:
        listed = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else missing[0]
        parser.error(f"over stdio, {listed} must be given (flags or environment)")
    who = limits.check_identity(Identity(named["account"], named["user"], named["agent"]))
    reader = limits.check_reader(named["reader"])
    assert reader is not None
    caller = Caller(who, reader)
    tools = _tools(options)
    _log_to_stderr()
    try:
        anyio.run(run_stdio, create_server(tools, lambda: caller))
    finally:
        tools.engine.close()


def _serve_http(parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
    if options.no_user or any(getattr(options, name) is not None for name in _ENV):
        # An identity on the command line would read as if it applied: it never does here.
        parser.error("over http the identity comes from each request's token, not from flags")
    if not options.tokens:
        parser.error("over http, --tokens (or $KORELY_MCP_TOKENS) must name the token file")
    tokens = TokenFile(options.tokens)
    security = transport_security(options.host, options.allowed_host)
    try:
        sock = bind(options.host, options.port)
    except OSError as error:
        parser.exit(1, f"korely-mcp: cannot listen on {options.host}:{options.port}: {error}\n")
    try:
        tools = _tools(options)
    except KorelyError:
        sock.close()
        raise
    port = sock.getsockname()[1]
    app = http_app(
        create_server(tools, caller_from_token),
        tokens,
        host=options.host,
        port=port,
        path=options.path,
        security=security,
    )
    if not _is_loopback(options.host):
        print(
            f"korely-mcp: warning: serving plain HTTP on {options.host}: bearer tokens travel "
            "in clear text; put the server behind a proxy that terminates TLS",
            file=sys.stderr,
            flush=True,
        )
        if security is None:
            print(
                "korely-mcp: warning: Host and Origin headers are not checked (DNS rebinding); "
                "name the server's host names with --allowed-host",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"korely-mcp: serving {endpoint(sock, options.path)} for {len(tokens)} token(s)",
        file=sys.stderr,
        flush=True,
    )
    _log_to_stderr()
    try:
        anyio.run(run_http, app, sock)
    finally:
        tools.engine.close()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
