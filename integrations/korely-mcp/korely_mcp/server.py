"""The MCP server over the tools, and its two transports.

    from korely_memory import Identity, MemoryEngine
    from korely_mcp import Caller, KorelyTools, create_server, run_stdio

    tools = KorelyTools(MemoryEngine())
    caller = Caller(Identity("acme", "giulia", "support-copilot"), reader="giulia-laptop")
    anyio.run(run_stdio, create_server(tools, lambda: caller))

Over stdio the process serves one client, whose caller the operator configures. Over
streamable HTTP every request carries a bearer token; the SDK's bearer middleware asks the
`TokenFile` for the caller, refuses a request without a good token (401) before it reaches
the server, and keeps the caller where `caller_from_token` finds it.

Besides the tools the server offers one resource, ``korely://context``: the caller's block,
to read and to subscribe to (see `korely_mcp._context_resource`).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import anyio
import uvicorn
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

from korely_memory import PermissionDenied

from . import _context_resource, _reads
from .tokens import CallerToken, TokenFile
from .tools import Caller, KorelyTools

logger = logging.getLogger("korely_mcp")

__all__ = [
    "bind",
    "caller_from_token",
    "create_server",
    "endpoint",
    "http_app",
    "run_http",
    "run_stdio",
    "transport_security",
]

NAME = "korely-memory"
VERSION = "0.1.0"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
INSTRUCTIONS = (
    "This server keeps what is learnt about the person you work for between conversations. "
    f"At the start of a conversation call {_reads.GET_CONTEXT} with the person's message as "
    "the query; when it shows 'Changed since you last read', tell the person what changed if "
    "you relied on it before. Keep lasting facts, correct wrong ones and forget the ones that "
    "no longer hold with the other korely_ tools."
)


class KorelyServer(Server[Any]):
    """The low-level `mcp.server.Server` with the tools it offers (`run_stdio` spends
    their held notices when the client closes its end cleanly)."""

    def __init__(self, tools: KorelyTools, **options: Any) -> None:
        super().__init__(NAME, version=VERSION, instructions=INSTRUCTIONS, **options)
        self.tools = tools


def create_server(tools: KorelyTools, caller_of: Callable[[], Caller]) -> Server:
    """The MCP server offering ``tools``.

    Args:
        tools: The tools and the engine behind them.
        caller_of: Who the current request is: a constant over stdio, `caller_from_token`
            over HTTP. It may raise `PermissionDenied` to refuse the call.

    Returns:
        A low-level `mcp.server.Server`: run it with `run_stdio`, or serve `http_app(...)`.
    """

    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.definitions())

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            caller = caller_of()
        except PermissionDenied as error:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(error))], is_error=True
            )
        return await tools.call(caller, params.name, params.arguments)

    return KorelyServer(
        tools,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        **_context_resource.handlers(tools, caller_of),
    )


def caller_from_token() -> Caller:
    """The caller of the current HTTP request, from the token the bearer middleware checked.

    Raises:
        PermissionDenied: The request carries no token the token file vouched for (the
            middleware lets none through; this is the second lock), or its token serves any
            user of the account: the tools work for one person, whom MCP has no way to name.
    """
    token = get_access_token()
    if not isinstance(token, CallerToken):
        raise PermissionDenied("This request carries no valid bearer token.")
    if token.caller.any_user:
        raise PermissionDenied(
            "This token serves any user of the account, through the REST API where each "
            "request names the user; MCP tools work for one person: use a token for that person."
        )
    return token.caller


async def run_stdio(server: Server) -> None:
    """Serve one client over this process's stdin and stdout, until stdin closes.

    A clean close of stdin (end of file) ends the session: the notices held for the
    client's next call are spent then, since no call will follow and a pipe loses nothing
    written to it; those of blocks the client read as the resource, which may never have
    reached a model, are released for the next block to tell. A process that is killed
    spends nothing: the next block after the hold tells those notices again. A line on
    stdin that is not a JSON-RPC message is logged.
    """
    async with stdio_server() as (read_stream, write_stream):
        await server.run(
            _LoggingStream(read_stream), write_stream, server.create_initialization_options()
        )
    if isinstance(server, KorelyServer):
        await server.tools.held.end_session()


class _LoggingStream:
    """A read stream that logs what did not parse as a JSON-RPC message (the SDK passes it
    on as an exception, which the server drops without a word)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self._inner.receive()
        if isinstance(item, Exception):
            said = str(item).strip().splitlines()
            logger.warning(
                "ignored a line on stdin that is not a JSON-RPC message: %s",
                " ".join(line.strip() for line in said[:3])[:300] or type(item).__name__,
            )
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _LoggingStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _LoggingStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def http_app(
    server: Server,
    tokens: TokenFile,
    *,
    host: str,
    port: int,
    path: str = "/mcp",
    security: TransportSecuritySettings | None = None,
) -> Starlette:
    """The streamable HTTP application, every request checked against ``tokens``.

    Args:
        server: The server, made with `caller_from_token`.
        tokens: The token file.
        host: The address served (on loopback, the SDK also checks the Host and Origin
            headers against DNS rebinding).
        port: The port served.
        path: Where the endpoint is.
        security: The Host and Origin checks (`transport_security`); None: the SDK's,
            which check on loopback only (and refuse a Host with no port there).

    Returns:
        An ASGI application.
    """
    # The SDK asks for an authorization server's URL. There is none (the operator issues the
    # tokens), and with no resource_server_url the URL is published nowhere.
    auth = AuthSettings(issuer_url=AnyHttpUrl(_url(host, port)), resource_server_url=None)
    return server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        auth=auth,
        token_verifier=tokens,
        transport_security=security,
    )


def transport_security(host: str, allowed_hosts: Sequence[str]) -> TransportSecuritySettings | None:
    """The Host and Origin checks against DNS rebinding for a server on ``host``.

    Args:
        host: The address served.
        allowed_hosts: The names (``name`` or ``name:port``) a request's Host header may
            carry; its Origin, if any, must be one of them over http or https.

    Returns:
        The names given, and on loopback loopback's own, each with or without a port (a
        server on port 80, or a proxy on the same machine, sends none); None off loopback
        with no names given: no check.
    """
    loopback = host in LOOPBACK
    if not allowed_hosts and not loopback:
        return None
    hosts: list[str] = []
    for name in allowed_hosts:
        hosts.append(name)
        if not _has_port(name):
            hosts.append(f"{name}:*")
    if loopback:
        hosts += [
            f"{name}{port}" for name in ("127.0.0.1", "localhost", "[::1]") for port in ("", ":*")
        ]
    origins = [f"{scheme}://{name}" for name in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _has_port(name: str) -> bool:
    if name.startswith("["):
        return "]:" in name
    return name.count(":") == 1


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (port 0: any free port)."""
    family = socket.AF_INET6 if _is_ipv6(host) else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY on the connections of a socket whose protocol
    # says TCP, and a socket made with protocol 0 does not; without it each answer waits for
    # the client's delayed ACK, about 40 ms a call.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


async def run_http(app: Starlette, sock: socket.socket) -> None:
    """Serve ``app`` on the bound socket until the process is told to stop."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def endpoint(sock: socket.socket, path: str) -> str:
    """The URL a client connects to."""
    host, port = sock.getsockname()[:2]
    return _url(host, port) + path


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if _is_ipv6(host) else f"http://{host}:{port}"


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False
