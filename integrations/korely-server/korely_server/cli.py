"""The `korely-server` command.

    korely-server --tokens /etc/korely/tokens.json [--host 127.0.0.1] [--port 8080] [--url URL]
    korely-server new-token      # a token for a client, and the hash for the token file
    korely-server hash-token     # the hash of a token read from stdin

The database is ``--url``, else ``KORELY_DATABASE_URL``, else ``./korely-memory.db``; the token
file ``--tokens``, else ``KORELY_SERVER_TOKENS``. The token file is `korely-mcp`'s, with two
more fields an entry may carry: ``any_user`` and ``admin``. A SQLite file is made only at the
default place: one named that is not there is refused, as `korely` refuses it (a mistyped path
would otherwise serve a new, empty memory). A database that does not open, a token file that
does not read, or a port that is taken stops the command with one line saying why, and exit
status 2.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence

import anyio

from korely_mcp import TokenFile, bind, hash_token, new_token, run_http
from korely_mcp import cli as mcp_cli
from korely_mcp.server import endpoint
from korely_memory import KorelyError, limits

from .app import MAX_BODY, create_app

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns its exit status.

    Args:
        argv: The arguments, without the program's name (default: ``sys.argv[1:]``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["new-token"], ["hash-token"]):
        return _token_command(args)
    parser = _parser()
    options = parser.parse_args(args)
    try:
        _serve(parser, options)
    except KorelyError as error:
        parser.exit(2, f"korely-server: {error}\n")
    except KeyboardInterrupt:
        pass
    return 0


TOKEN_COMMANDS = {
    "new-token": "makes a token for a client, and the SHA-256 to put in the token file",
    "hash-token": "prints the SHA-256 of a token read from stdin, for the token file",
}


def _token_command(args: list[str]) -> int:
    usage = f"usage: korely-server {args[0]}\n\n{TOKEN_COMMANDS[args[0]]}; it takes no argument"
    if args[1:] in (["-h"], ["--help"]):
        print(usage)
        return 0
    if len(args) > 1:
        print(f"{usage}\nkorely-server {args[0]}: not an argument: {args[1]}", file=sys.stderr)
        return 2
    if args[0] == "new-token":
        token = new_token()
        print(f"token:  {token}")
        print(f"sha256: {hash_token(token)}")
        return 0
    token = sys.stdin.readline().strip()
    if not token:
        print("korely-server: hash-token reads a token from stdin; none was given", file=sys.stderr)
        return 2
    print(hash_token(token))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="korely-server",
        description="korely-memory over HTTP: the REST API (/v1), MCP (/mcp) and the "
        "administrator's page (/admin). Also: 'korely-server new-token' makes a token and its "
        "hash; 'korely-server hash-token' hashes a token read from stdin.",
    )
    parser.add_argument(
        "--url",
        help="the database (default: $KORELY_DATABASE_URL, else sqlite:///korely-memory.db in "
        "the working folder)",
    )
    parser.add_argument(
        "--tokens",
        default=os.environ.get("KORELY_SERVER_TOKENS"),
        help="the token file (default: $KORELY_SERVER_TOKENS)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default: 8080; 0: any)")
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host header to accept (name or name:port; repeat for more): off loopback, "
        "turns the Host and Origin checks against DNS rebinding on",
    )
    parser.add_argument(
        "--token-budget",
        type=int,
        default=limits.DEFAULT_BUDGET,
        help=f"a block's budget when the request gives none (default: {limits.DEFAULT_BUDGET})",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=limits.DEFAULT_HOLD.total_seconds(),
        help="seconds an MCP block's change notices wait for the client's next call "
        "(default: %(default)g)",
    )
    parser.add_argument("--max-facts", help="refuse a new key once a person keeps this many facts")
    parser.add_argument(
        "--max-body",
        type=int,
        default=MAX_BODY,
        help="the largest request body taken, in bytes (default: %(default)d)",
    )
    return parser


def _serve(parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
    if not options.tokens:
        parser.error("--tokens (or $KORELY_SERVER_TOKENS) must name the token file")
    if options.max_body < 1024:
        parser.error("--max-body must be at least 1024 bytes")
    tokens = TokenFile(options.tokens)
    _refuse_a_missing_file(options.url)
    try:
        sock = bind(options.host, options.port)
    except OSError as error:
        parser.exit(2, f"korely-server: cannot listen on {options.host}:{options.port}: {error}\n")
    try:
        engine = mcp_cli.open_engine(options.url)
    except KorelyError:
        sock.close()
        raise
    try:
        app = create_app(
            engine,
            tokens,
            host=options.host,
            port=sock.getsockname()[1],
            allowed_hosts=options.allowed_host,
            token_budget=options.token_budget,
            hold=options.hold,
            max_facts=mcp_cli._count(options.max_facts),
            max_body=options.max_body,
        )
    except KorelyError:
        sock.close()
        engine.close()
        raise
    if not mcp_cli._is_loopback(options.host):
        _warn(
            f"serving plain HTTP on {options.host}: bearer tokens travel in clear text; put "
            "the server behind a proxy that terminates TLS"
        )
        if not options.allowed_host:
            _warn(
                "Host and Origin headers are not checked (DNS rebinding); name the server's "
                "host names with --allowed-host"
            )
    print(
        f"korely-server: serving {endpoint(sock, '')} (REST /v1, MCP /mcp, admin /admin) "
        f"for {len(tokens)} token(s)",
        file=sys.stderr,
        flush=True,
    )
    mcp_cli._log_to_stderr()
    try:
        anyio.run(run_http, app, sock)
    finally:
        engine.close()


def _refuse_a_missing_file(named: str | None) -> None:
    """Refuse a SQLite file that is not there, unless it is the default one: a path named
    (``--url`` or ``$KORELY_DATABASE_URL``) that holds no file is a typo far more often than a
    wish for a new memory, and serving one would answer every read with nothing.

    Raises:
        CannotOpen: The file named is not there; the message says how to make it.
    """
    url = mcp_cli.database_url(named)
    if not (named or os.environ.get("KORELY_DATABASE_URL")) or url.get_backend_name() != "sqlite":
        return
    path = url.database
    if not path or path == ":memory:" or path.startswith("file:") or url.query.get("uri"):
        return  # in memory, or a URI filename: SQLite's to read
    if not os.path.exists(path):
        shown = url.render_as_string(hide_password=True)
        raise mcp_cli.CannotOpen(
            f"cannot open the database {shown}: no database at {path} "
            f"(korely --url {shlex.quote(shown)} db upgrade creates one)"
        )


def _warn(message: str) -> None:
    print(f"korely-server: warning: {message}", file=sys.stderr, flush=True)
