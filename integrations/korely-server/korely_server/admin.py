"""The administrator's page, ``/admin``: the review queue, a person's facts and their history,
and a person's export and erasure. Server-rendered HTML, no JavaScript.

Sign-in takes a token whose entry in the token file has ``admin``; the session is a random id in
an HttpOnly, SameSite=Strict cookie scoped to ``/admin`` (`_sessions`), and every page looks the
token up in the token file again. Every form that changes something carries the session's CSRF
token, and a POST whose Origin is another site's is refused. Whatever the page shows of facts is
data: the templates escape everything, and no data is marked safe.

A person's page shows its lists a page at a time, as ``/v1/facts`` does: ``limit`` items at most
(the API's default and most), in the API's order and with its cursors; each page links the
next, the previous and the first by plain links.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import importlib.resources
import logging
import threading
import unicodedata
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from sqlalchemy.exc import SQLAlchemyError

from korely_mcp import Caller, TokenFile
from korely_memory import (
    Fact,
    Identity,
    InvalidRequest,
    KorelyError,
    Memory,
    MemoryEngine,
    PendingFact,
    limits,
)

from ._sessions import LIFETIME, Session, Sessions
from ._timeline import WIDTH, histories
from .api import PAGE, PAGE_MOST, _cursor, _next_cursor, _tell, _tell_of

__all__ = ["COOKIE", "router"]

logger = logging.getLogger("korely_server")

COOKIE = "korely_admin"
"""The session cookie's name (its path is the page's, ``/admin``)."""
STATUS = {
    "invalid_request": 422,
    "not_found": 404,
    "forbidden": 403,
    "fact_not_current": 409,
    "already_decided": 409,
}
UNAVAILABLE = "The memory's database is not answering; try again shortly."
SIGNED_OUT = {
    "signed-out": "You are signed out.",
    "expired": "Your session ended: sign in again.",
    "revoked": "Your token is no longer an administrator's in the token file: you were signed out.",
}
HEADERS = {
    # Personal data: kept by no cache; the page is framed by no other, loads nothing from
    # elsewhere and runs no script.
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a form's Origin "null"
}


class _SignedOut(Exception):
    """The request has no live session, or its token no longer serves: sign in again."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


class _Refused(Exception):
    """A form without this session's CSRF token, or from another site (HTTP 403)."""


@dataclass(frozen=True)
class _Admin:
    """The administrator a request comes from."""

    caller: Caller
    session_id: str
    session: Session

    @property
    def who(self) -> Identity:
        return self.caller.who


class _Page(APIRoute):
    """A route of the page: what it raises is shown as a page (or a sign-in), never a trace."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                return await handler(request)
            except _SignedOut as out:
                return _to_sign_in(request, out.reason)
            except _Refused as refused:
                return _problem(request, 403, str(refused))
            except KorelyError as error:
                status = STATUS.get(error.code, 422)
                return _problem(request, status, error.message)
            except SQLAlchemyError as error:
                logger.error("the database failed a request of the administrator's page: %s", error)
                return _problem(request, 503, UNAVAILABLE)

        return page


router = APIRouter(prefix="/admin", include_in_schema=False, route_class=_Page)


def _when(moment: dt.datetime | None) -> str:
    """A time as the page shows it: in UTC, to the minute; a midnight as its day."""
    if moment is None:
        return ""
    utc = moment.astimezone(dt.timezone.utc)
    if utc.time() == dt.time():
        return utc.strftime("%Y-%m-%d")
    return utc.strftime("%Y-%m-%d %H:%M UTC")


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("korely_server", "templates"),
        autoescape=True,  # every template: whatever a fact says is shown as text
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["when"] = _when
    environment.filters["path"] = lambda name: quote(str(name), safe="")
    return environment


templates = Jinja2Templates(env=_environment())


@functools.cache
def _stylesheet() -> bytes:
    return importlib.resources.files("korely_server").joinpath("static/admin.css").read_bytes()


_sessions_lock = threading.Lock()


def _sessions(app: FastAPI) -> Sessions:
    """The application's sessions, made with its first sign-in."""
    with _sessions_lock:
        sessions: Sessions | None = getattr(app.state, "admin_sessions", None)
        if sessions is None:
            sessions = app.state.admin_sessions = Sessions()
        return sessions


def _engine(request: Request) -> MemoryEngine:
    engine: MemoryEngine = request.app.state.engine
    return engine


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")) + "/admin"


def _signed_in(request: Request) -> _Admin:
    """The administrator of the request's session, its token checked in the token file again.

    Raises:
        _SignedOut: No live session, or its token is no longer an administrator's.
    """
    session_id = request.cookies.get(COOKIE)
    sessions = _sessions(request.app)
    session = sessions.get(session_id)
    if session is None or session_id is None:
        raise _SignedOut("expired" if session_id else None)
    tokens: TokenFile = request.app.state.tokens
    caller = tokens.caller(session.token)
    if caller is None or not caller.admin:
        sessions.end(session_id)
        raise _SignedOut("revoked")
    admin = _Admin(caller, session_id, session)
    request.state.admin = admin
    return admin


def _same_origin(request: Request) -> None:
    """Refuse a POST a page of another site sent (a browser names the page's origin)."""
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise _Refused("This form was sent from another site: nothing was changed.")


def _check_form(request: Request, admin: _Admin, csrf: str) -> None:
    _same_origin(request)
    if not csrf or not admin.session.carries(csrf):
        raise _Refused(
            "This form does not carry your session's token (it is older than your sign-in, "
            "or came from elsewhere): nothing was changed. Reload the page and try again."
        )


def _page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    admin: _Admin | None = getattr(request.state, "admin", None)
    context = {
        "base": _base(request),
        "admin": admin,
        "csrf": admin.session.csrf if admin is not None else "",
        "notice": admin.session.take_notice() if admin is not None else None,
        "error": None,
        **context,
    }
    return templates.TemplateResponse(request, name, context, status, headers=HEADERS)


def _problem(request: Request, status: int, message: str) -> HTMLResponse:
    return _page(request, "problem.html", status, error=message)


def _redirect(request: Request, path: str) -> RedirectResponse:
    return RedirectResponse(_base(request) + path, 303, headers=HEADERS)


def _to_sign_in(request: Request, reason: str | None) -> RedirectResponse:
    response = _redirect(request, "/sign-in" + (f"?out={reason}" if reason else ""))
    response.delete_cookie(COOKIE, path=_base(request), httponly=True, samesite="strict")
    return response


def _person(admin: _Admin, user: str, agent: str | None = None) -> Identity:
    """The person ``user`` of the administrator's account, under ``agent`` (default: the
    administrator's token's).

    Raises:
        InvalidRequest: A name breaks the engine's name rule.
    """
    return limits.check_identity(
        Identity(admin.who.account, user, admin.who.agent if agent is None else agent)
    )


def _whole(text: str, most: int) -> int | None:
    """``text`` as a whole number from 1 to ``most``, or None."""
    # ASCII digits only: str.isdigit() also takes '²' (which int() refuses) and other scripts';
    # and no more of them than ``most`` has (int() refuses a number of 4,301 digits).
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(most)):
        return None
    return int(text) if 1 <= int(text) <= most else None


def _fact_id(text: str) -> int:
    fid = _whole(text, 2**63 - 1)
    if fid is None:
        raise InvalidRequest("fact_id", f"must be a fact's id (a whole number), got {text!r}")
    return fid


Csrf = Annotated[str, Form()]


@router.get("/admin.css")
def stylesheet() -> Response:
    return Response(
        _stylesheet(),
        media_type="text/css",
        headers={"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"},
    )


@router.get("/sign-in")
def sign_in_form(request: Request, out: str | None = None) -> Response:
    if _sessions(request.app).get(request.cookies.get(COOKIE)) is not None:
        return _redirect(request, "")
    return _page(request, "sign_in.html", notice=SIGNED_OUT.get(out or ""))


@router.post("/sign-in")
def sign_in(request: Request, token: Annotated[str, Form()] = "") -> Response:
    _same_origin(request)
    tokens: TokenFile = request.app.state.tokens
    caller = tokens.caller(token.strip()) if token.strip() else None
    if caller is None:
        return _page(
            request,
            "sign_in.html",
            401,
            error="That is not a token the server knows. Paste an administrator's token.",
        )
    if not caller.admin:
        return _page(
            request,
            "sign_in.html",
            403,
            error="That token is not an administrator's: only a token whose entry in the token "
            'file has "admin": true may sign in here.',
        )
    sessions = _sessions(request.app)
    sessions.end(request.cookies.get(COOKIE))  # a sign-in is a new session, never an old one
    session_id, _ = sessions.start(token.strip())
    logger.info("%r signed in to the administrator's page", caller.name)
    response = _redirect(request, "")
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=int(LIFETIME.total_seconds()),
        path=_base(request),
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/sign-out")
def sign_out(request: Request, csrf: Csrf = "") -> Response:
    admin = _signed_in(request)
    _check_form(request, admin, csrf)
    _sessions(request.app).end(admin.session_id)
    return _to_sign_in(request, "signed-out")


@router.get("")
@router.get("/")
def queue(request: Request) -> Response:
    return _queue(request, _signed_in(request))


def _queue(
    request: Request, admin: _Admin, status: int = 200, error: str | None = None
) -> Response:
    proposals = _engine(request).proposals(admin.who.account)
    return _page(request, "queue.html", status, proposals=proposals, error=error)


@router.post("/proposals/{fact_id}/confirm")
def confirm(request: Request, fact_id: str, csrf: Csrf = "") -> Response:
    return _decide(request, fact_id, csrf, confirm=True)


@router.post("/proposals/{fact_id}/reject")
def reject(request: Request, fact_id: str, csrf: Csrf = "") -> Response:
    return _decide(request, fact_id, csrf, confirm=False)


def _decide(request: Request, fact_id: str, csrf: str, *, confirm: bool) -> Response:
    admin = _signed_in(request)
    _check_form(request, admin, csrf)
    engine = _engine(request)
    try:
        fid = _fact_id(fact_id)
        fact = engine.confirm(admin.who, fid) if confirm else engine.reject(admin.who, fid)
    except KorelyError as error:
        return _queue(request, admin, STATUS.get(error.code, 422), error.message)
    _tell_of(request, fact)  # the MCP subscribers whose block it changes, as /v1's review does
    admin.session.notice = (
        f"Confirmed {fact.key!r}: every user of the account sees it now."
        if confirm
        else f"Rejected {fact.key!r}: it is shown to nobody, and kept for review."
    )
    return _redirect(request, "")


@router.get("/people")
def look_up(request: Request, user: str = "") -> Response:
    admin = _signed_in(request)
    if not user:
        raise InvalidRequest("user", "name a person: their user name")
    who = _person(admin, user)
    return _redirect(request, f"/people/{quote(who.user or '', safe='')}")


T = TypeVar("T")
Place = tuple[Any, ...]


@dataclass(frozen=True)
class _Links:
    """Where a list's other pages are: a link to each that applies, else None."""

    first: str | None = None
    previous: str | None = None
    next: str | None = None


@dataclass(frozen=True)
class _Part(Generic[T]):
    """One page of a list the person's page shows."""

    items: Sequence[T]
    first: int
    """The place of the first item shown in the list, from 1."""
    total: int
    links: _Links

    @property
    def last(self) -> int:
        return self.first + len(self.items) - 1


@dataclass(frozen=True)
class _List(Generic[T]):
    """How one list of a person's page pages: its cursor's parameter and the section it is,
    the order it keeps, and its cursors (one names the item a page ends at)."""

    parameter: str
    anchor: str
    place: Callable[[T], Place]
    cursor: Callable[[T], str]
    after: Callable[[str], Place]
    """The place a cursor names. Raises InvalidRequest for one this list did not give."""


def _fact_after(parameter: str) -> Callable[[str], Place]:
    def after(text: str) -> Place:
        try:
            found = _cursor(text)
        except InvalidRequest:
            raise InvalidRequest(parameter, "is not a cursor this list gave") from None
        assert found is not None
        return found[0], -found[1]

    return after


def _id_after(parameter: str, newest_first: bool) -> Callable[[str], Place]:
    def after(text: str) -> Place:
        found = _whole(text, 2**63 - 1)
        if found is None:
            raise InvalidRequest(parameter, "is not a cursor this list gave")
        return (-found if newest_first else found,)

    return after


def _fact_place(fact: Fact) -> Place:
    # /v1/facts' order: by key, a key's versions newest first.
    return fact.key, -fact.id


FACTS: _List[Fact] = _List("cursor", "facts", _fact_place, _next_cursor, _fact_after("cursor"))
ACCOUNT_FACTS: _List[Fact] = _List(
    "account_cursor",
    "account-facts",
    _fact_place,
    _next_cursor,
    _fact_after("account_cursor"),
)
MEMORIES: _List[Memory] = _List(
    "memory_cursor",
    "memories",
    lambda m: (-m.id,),
    lambda m: str(m.id),
    _id_after("memory_cursor", newest_first=True),
)
HELD: _List[PendingFact] = _List(
    "held_cursor",
    "held",
    lambda p: (p.id,),
    lambda p: str(p.id),
    _id_after("held_cursor", newest_first=False),
)
LISTS: tuple[_List[Any], ...] = (FACTS, ACCOUNT_FACTS, MEMORIES, HELD)
PERSON_QUERY = ("agent", "limit", *(listed.parameter for listed in LISTS))


def _limit(text: str | None) -> int:
    if text is None:
        return PAGE
    limit = _whole(text, PAGE_MOST)
    if limit is None:
        raise InvalidRequest("limit", f"must be a whole number from 1 to {PAGE_MOST}, got {text!r}")
    return limit


def _part(
    request: Request, who: Identity, listed: _List[T], items: Sequence[T], limit: int
) -> _Part[T]:
    """The page of ``items`` (in ``listed``'s order) the request's cursor for it asks for."""
    items = sorted(items, key=listed.place)
    cursor = request.query_params.get(listed.parameter)
    start = (
        0 if cursor is None else bisect.bisect_right(items, listed.after(cursor), key=listed.place)
    )
    shown = items[start : start + limit]

    def link(at: T | None) -> str:
        return _person_link(request, who, listed, None if at is None else listed.cursor(at))

    links = _Links()
    if start + limit < len(items):
        links = _Links(next=link(shown[-1]))
    if start > 0:
        back = start - limit
        # The page before the second is the first: one link to it.
        links = _Links(link(None), link(items[back - 1]) if back > 0 else None, links.next)
    return _Part(shown, start + 1, len(items), links)


def _person_link(request: Request, who: Identity, listed: _List[Any], cursor: str | None) -> str:
    """The person's page with the request's query, but ``listed`` at ``cursor``."""
    query = {name: request.query_params.get(name) for name in PERSON_QUERY}
    query[listed.parameter] = cursor
    kept = urlencode({name: value for name, value in query.items() if value is not None})
    path = f"{_base(request)}/people/{quote(who.user or '', safe='')}"
    return f"{path}{'?' if kept else ''}{kept}#{listed.anchor}"


@router.get("/people/{user}")
def person(request: Request, user: str, agent: str | None = None) -> Response:
    admin = _signed_in(request)
    who = _person(admin, user, agent)
    assert who.user is not None
    limit = _limit(request.query_params.get("limit"))
    engine = _engine(request)
    versions = engine.get_facts(who, include_invalidated=True)
    export = engine.export_user(who.account, who.user)
    # The version each key of theirs holds now: a held change drawn against another is refused.
    holding = {f.key: f.id for f in versions if f.is_current and f.owner == who.user}
    agents = sorted(
        {f.agent for f in (*export.facts, *export.proposals)}
        | {m.agent for m in export.memories}
        | {who.agent}
    )
    # Their keys: one a version of which is theirs (stated, proposed or read about them); the
    # others are the account's facts they see.
    theirs = {f.key for f in versions if f.owner == who.user}
    own = [f for f in versions if f.key in theirs]
    shared = [f for f in versions if f.key not in theirs]
    facts = _part(request, who, FACTS, own, limit)
    account_facts = _part(request, who, ACCOUNT_FACTS, shared, limit)
    memories = [m for m in export.memories if m.agent == who.agent]
    held = [p for p in export.pending if p.agent == who.agent]
    return _page(
        request,
        "person.html",
        who=who,
        facts=facts,
        keys=histories(facts.items, export.marks, export.exported_at, every=own),
        account_facts=account_facts,
        shared=histories(account_facts.items, export.marks, export.exported_at, every=shared),
        opened=ACCOUNT_FACTS.parameter in request.query_params,
        limit=limit,
        width=WIDTH,
        held=_part(request, who, HELD, held, limit),
        holding=holding,
        memories=_part(request, who, MEMORIES, memories, limit),
        export=export,
        agents=agents,
    )


@router.get("/people/{user}/export")
def export_form(request: Request, user: str) -> Response:
    who = _person(_signed_in(request), user)
    return _page(request, "export.html", who=who)


@router.post("/people/{user}/export")
def export(request: Request, user: str, csrf: Csrf = "") -> Response:
    admin = _signed_in(request)
    _check_form(request, admin, csrf)
    who = _person(admin, user)
    assert who.user is not None
    body = _engine(request).export_user(who.account, who.user).to_dict()
    logger.info("%r exported a person's data", admin.caller.name)
    return JSONResponse(
        body,
        headers={
            "Content-Disposition": _attachment(f"korely-export-{who.account}-{who.user}.json"),
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        },
    )


def _attachment(name: str) -> str:
    """A Content-Disposition for a download named ``name``: the name with its letters and
    digits of every script in ``filename*`` (RFC 6266 and 5987), and as ASCII in ``filename``
    for clients that read no other; any other character is ``_`` (a quote, a slash, a
    direction override)."""
    kept = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    fallback = "".join(
        c
        if c.isascii()
        else unicodedata.normalize("NFKD", c).encode("ascii", "ignore").decode() or "_"
        for c in kept
    )
    fallback = "".join(c if c.isalnum() or c in "._-" else "_" for c in fallback)
    if fallback == kept:
        return f'attachment; filename="{kept}"'
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(kept, safe='')}"


@router.get("/people/{user}/erase")
def erase_form(request: Request, user: str) -> Response:
    who = _person(_signed_in(request), user)
    return _page(request, "erase.html", who=who, typed="")


@router.post("/people/{user}/erase")
def erase(
    request: Request, user: str, csrf: Csrf = "", confirm_user: Annotated[str, Form()] = ""
) -> Response:
    admin = _signed_in(request)
    _check_form(request, admin, csrf)
    who = _person(admin, user)
    assert who.user is not None
    if confirm_user != who.user:
        return _page(
            request,
            "erase.html",
            422,
            who=who,
            typed=confirm_user,
            error=f"The name typed is not {who.user!r}: nothing was erased.",
        )
    report = _engine(request).erase_user(who.account, who.user)
    _tell(request, lambda reads: (reads.account, reads.user) == (who.account, who.user))
    logger.info("%r erased a person, now named %s", admin.caller.name, report.pseudonym)
    return _page(request, "erased.html", who=who, report=report)
