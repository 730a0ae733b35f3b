"""The server's one ASGI application: the REST API (``/v1``), the administrator's page
(``/admin``) and the MCP endpoint (``/mcp``), over one engine and one token file.

    from korely_memory import MemoryEngine
    from korely_mcp import TokenFile
    from korely_server import create_app

    app = create_app(MemoryEngine(url), TokenFile("tokens.json"), host="127.0.0.1")

Every request passes two checks before any route: its body is at most ``max_body`` bytes
(413), and on a server with checked host names its Host and Origin headers name one of them
(421, 403), against DNS rebinding.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from korely_mcp import KorelyTools, TokenFile, caller_from_token, create_server, http_app
from korely_mcp.server import transport_security
from korely_memory import KorelyError, MemoryEngine, NotCurrent, limits

from . import _models, admin, api
from ._auth import Unauthorized, caller_of

__all__ = ["MAX_BODY", "create_app"]

logger = logging.getLogger("korely_server")

VERSION = "0.1.0"
MAX_BODY = 256 * 1024
"""The largest request body taken, in bytes: a memory of 16,000 characters is 64 KiB at most."""
STATUS = {
    "invalid_request": 422,
    "limit_exceeded": 422,
    "not_found": 404,
    "forbidden": 403,
    "fact_not_current": 409,
    "already_decided": 409,
    "schema_version": 503,
}
UNAVAILABLE = "The memory's database is not answering; try again shortly."


def create_app(
    engine: MemoryEngine,
    tokens: TokenFile,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    allowed_hosts: Sequence[str] = (),
    token_budget: int = limits.DEFAULT_BUDGET,
    hold: float = limits.DEFAULT_HOLD.total_seconds(),
    max_facts: int | None = None,
    max_body: int = MAX_BODY,
) -> FastAPI:
    """The server's application.

    Args:
        engine: The memory.
        tokens: The token file: every request's caller.
        host: The address served (loopback: Host and Origin are checked by default).
        port: The port served (the MCP SDK names it in its settings).
        allowed_hosts: The host names (``name`` or ``name:port``) requests may carry.
        token_budget: A block's budget when the request gives none.
        hold: Seconds an MCP block's notices wait for the client's next call.
        max_facts: Refuse a new key once a person keeps this many facts.
        max_body: The largest request body, in bytes.

    Raises:
        InvalidRequest: ``token_budget``, ``hold`` or ``max_facts`` breaks the engine's rule.
    """
    security = transport_security(host, allowed_hosts)
    tools = KorelyTools(engine, token_budget=token_budget, hold=hold, max_facts=max_facts)
    mcp = http_app(
        create_server(tools, caller_from_token),
        tokens,
        host=host,
        port=port,
        path="/mcp",
        security=security,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.router.lifespan_context(mcp):  # the MCP sessions' task group
            yield

    app = FastAPI(
        title="korely-memory",
        version=VERSION,
        summary="Durable, correctable memory for agents: facts, corrections, change notices.",
        lifespan=lifespan,
        # No /docs or /redoc: they load scripts from a CDN into the origin the administrator's
        # page signs in on. The schema is /openapi.json, for any viewer.
        docs_url=None,
        redoc_url=None,
        responses={
            401: {"model": _models.ErrorOut, "description": "No token, or a bad one"},
            403: {"model": _models.ErrorOut, "description": "The token may not do this"},
            404: {"model": _models.ErrorOut, "description": "No such fact, memory or route"},
            409: {
                "model": _models.ErrorOut,
                "description": "The fact has ended or was written since, or was reviewed",
            },
            422: {"model": _models.ErrorOut, "description": "An argument breaks a rule"},
            503: {"model": _models.ErrorOut, "description": "The database is not answering"},
        },
    )
    app.state.engine = engine
    app.state.tokens = tokens
    app.state.tools = tools  # its subscribers are told of the writes through /v1 too
    app.state.token_budget = limits.check_token_budget(token_budget)
    app.state.max_facts = limits.check_max_facts(max_facts)
    app.include_router(api.router)
    app.include_router(admin.router)
    app.mount("/", mcp)  # last: what no route above takes, /mcp among it
    _handle_errors(app)
    app.add_middleware(_HostCheck, security=security)
    app.add_middleware(RequestBodyLimitMiddleware, max_body_size=max_body)
    return app


def _matches(value: str, allowed: Sequence[str]) -> bool:
    return any(
        value == pattern or (pattern.endswith(":*") and value.startswith(pattern[:-1]))
        for pattern in allowed
    )


class _HostCheck:
    """Refuse a request whose Host (421) or Origin (403) is not one the server was told of."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings | None) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.security is None:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        origin = headers.get("origin")
        if not _matches(host, self.security.allowed_hosts):
            logger.warning("refused a request for host %r", host[:200])
            await PlainTextResponse("Invalid Host header", 421)(scope, receive, send)
        elif origin is not None and not _matches(origin, self.security.allowed_origins):
            logger.warning("refused a request from origin %r", origin[:200])
            await PlainTextResponse("Invalid Origin header", 403)(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _error(status: int, code: str, field: str | None, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(_models.error(code, field, message), status, headers=headers or None)


def _handle_errors(app: FastAPI) -> None:
    @app.exception_handler(KorelyError)
    async def korely_error(request: Request, error: KorelyError) -> JSONResponse:
        status = STATUS.get(error.code, 422)
        if status == 503:
            logger.error("refused a request: %s", error)
            return _error(503, "unavailable", None, UNAVAILABLE)
        response = _error(status, error.code, getattr(error, "field", None), error.message)
        if isinstance(error, NotCurrent) and error.current_fact_id is not None:
            response.headers["Location"] = f"/v1/facts/{error.current_fact_id}"
        return response

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, error: Unauthorized) -> JSONResponse:
        return _error(401, "unauthorized", None, error.message, **{"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        if request.url.path.startswith("/v1/"):  # a body read before the token: the token first
            try:
                caller_of(request)
            except Unauthorized as refused:
                return await unauthorized(request, refused)
        first: dict[str, Any] = error.errors()[0] if error.errors() else {}
        # ("body", "key"), ("query", "limit"), ("path", "fact_id"): the field's name; a body
        # that is not JSON is ("body", <offset>), no field.
        where = [str(part) for part in first.get("loc", ())[1:] if isinstance(part, str)]
        field = ".".join(where) or None
        said = first.get("msg", "is not valid")
        message = f"{field}: {said}" if field else f"the request's body: {said}"
        return _error(422, "invalid_request", field, message)

    @app.exception_handler(SQLAlchemyError)
    async def database(request: Request, error: SQLAlchemyError) -> JSONResponse:
        logger.error("the database failed a request: %s", error)
        return _error(503, "unavailable", None, UNAVAILABLE)

    @app.exception_handler(HTTPException)
    async def http(request: Request, error: HTTPException) -> JSONResponse:
        if error.status_code == 400:  # a body FastAPI could not parse (JSON nested too deep)
            return _error(422, "invalid_request", None, f"the request's body: {error.detail}")
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        return _error(error.status_code, code, None, str(error.detail), **(error.headers or {}))
