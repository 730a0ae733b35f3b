"""The REST API, under ``/v1``: the engine's calls, each for the caller its token names.

Routes are plain functions: FastAPI runs them in its thread pool, as the engine's calls block.
Who a call works on comes from `_auth.person` (the token, and ``user_id`` where the token may
name any user); the engine checks every name and argument, and its errors become the JSON
errors `app` draws.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Callable
from typing import Annotated, Any

import anyio.from_thread
from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from korely_mcp import Caller
from korely_memory import (
    Fact,
    Identity,
    InvalidRequest,
    MemoryEngine,
    NotFound,
    PermissionDenied,
    Scope,
    limits,
)

from . import _models as out
from ._auth import caller_of, person, reaches_everyone, require_admin

__all__ = ["router"]


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route takes, its dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    for below in dependant.dependencies:
        names |= _query_names(below)
    return names


def known_query(request: Request) -> None:
    """Refuse a query parameter the route does not take, as a body field it does not take is
    refused: a misspelt or misplaced one (``?user_id=`` on a route that works on no person)
    would otherwise be ignored, and the call work on what the token alone names.

    The token comes first: a request without one the server knows is a 401 whatever its
    query, and is never told the names a route takes."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or route.path == "/v1/{rest:path}":
        return
    caller_of(request)  # every route of the API takes a token: a 401 before the query's 422
    taken = _query_names(route.dependant)
    for name in request.query_params:
        if name not in taken:
            path = route.path.replace(":path}", "}")
            takes = f"it takes {', '.join(sorted(taken))}" if taken else "it takes none"
            raise InvalidRequest(name, f"is not a query parameter of {path}: {takes}")


router = APIRouter(prefix="/v1", dependencies=[Depends(known_query)])

CallerDep = Annotated[Caller, Depends(caller_of)]
UserId = Annotated[
    str | None,
    Query(description="Whose memory: required with a token for any user of the account."),
]
Reader = Annotated[
    str | None,
    Query(description="The reader name to read under (default: the token's)."),
]
PAGE = 100
PAGE_MOST = 500


def engine_of(request: Request) -> MemoryEngine:
    engine: MemoryEngine = request.app.state.engine
    return engine


EngineDep = Annotated[MemoryEngine, Depends(engine_of)]


def _moment(field: str, text: str | None) -> dt.date | dt.datetime | None:
    return None if text is None else limits.check_moment(field, text)


def _reader(caller: Caller, reader: str | None) -> str:
    """The reader name a read goes under: the token's, or another that ``caller`` may name.

    A reader's marks are the account's (what that client was handed, told once): only a token
    that reaches every user of the account may read under a name not its own, as an application
    serving many clients does; a person's token would spend another client's notices.
    """
    if reader is None:
        return caller.reader
    checked = limits.check_reader(reader)
    assert checked is not None
    if checked != caller.reader and not reaches_everyone(caller):
        raise PermissionDenied(
            f"this token reads as {caller.reader!r}: only a token for any user of the account, "
            "or an administrator's, may read under another reader name"
        )
    return checked


def _version(engine: MemoryEngine, who: Identity, fact_id: int) -> Fact:
    """The version ``fact_id`` among those ``who`` can see, current or ended."""
    for version in engine.get_facts(who, include_invalidated=True):
        if version.id == fact_id:
            return version
    raise NotFound(f"no fact {fact_id} in this memory")


def _tell(request: Request, changed: Callable[[Identity], bool]) -> None:
    """Tell the MCP clients of this server subscribed to ``korely://context`` whose memory a
    write changed (``changed`` says which identities' memories), as an MCP tool's write tells
    them. Called after the write: a refused one changed nothing, and tells nothing."""
    anyio.from_thread.run(request.app.state.tools.subscribers.changed_where, changed)


def _tell_of(request: Request, fact: Fact) -> None:
    """Tell the subscribers that see ``fact``: every user of the account and agent once it is
    the account's, else the one memory it is in."""
    if fact.effective_scope is Scope.ACCOUNT:
        _tell(request, lambda who: (who.account, who.agent) == (fact.account, fact.agent))
    else:
        _tell(request, lambda who: who == Identity(fact.account, fact.owner, fact.agent))


def _tell_who(request: Request, whose: Identity) -> None:
    _tell(request, lambda who: who == whose)


@router.get("/context", summary="The context block: the facts true now, fitted to a budget")
def get_context(
    engine: EngineDep,
    caller: CallerDep,
    request: Request,
    user_id: UserId = None,
    query: Annotated[str | None, Query(description="The person's message.")] = None,
    reader: Reader = None,
    token_budget: Annotated[int | None, Query(description="50 to 8000")] = None,
    changes: Annotated[
        list[str] | None, Query(description="'all', or end causes such as 'corrected'")
    ] = None,
    as_of: Annotated[str | None, Query(description="What was true in the world then")] = None,
    known_as_of: Annotated[str | None, Query(description="What the store knew then")] = None,
) -> out.ContextOut:
    who = person(caller, user_id)
    block = engine.get_context(
        who,
        query,
        reader=_reader(caller, reader),
        token_budget=request.app.state.token_budget if token_budget is None else token_budget,
        changes=None if changes is None else (changes[0] if changes == ["all"] else changes),
        as_of=_moment("as_of", as_of),
        known_as_of=_moment("known_as_of", known_as_of),
    )
    return out.context(block)


def _cursor(text: str | None) -> tuple[str, int] | None:
    if text is None:
        return None
    try:
        key, _, fid = base64.urlsafe_b64decode(text.encode()).decode().rpartition("\x00")
        return key, int(fid)
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidRequest("cursor", "is not a cursor this list gave") from None


def _next_cursor(version: Fact) -> str:
    return base64.urlsafe_b64encode(f"{version.key}\x00{version.id}".encode()).decode()


@router.get("/facts", summary="The facts, in key order (each key's versions newest first)")
def get_facts(
    engine: EngineDep,
    caller: CallerDep,
    user_id: UserId = None,
    reader: Reader = None,
    as_of: str | None = None,
    known_as_of: str | None = None,
    include_invalidated: bool = False,
    limit: Annotated[int, Query(ge=1, le=PAGE_MOST)] = PAGE,
    cursor: Annotated[str | None, Query(description="next_cursor of the page before")] = None,
) -> out.FactPage:
    who = person(caller, user_id)
    after = _cursor(cursor)
    found = engine.get_facts(
        who,
        as_of=_moment("as_of", as_of),
        known_as_of=_moment("known_as_of", known_as_of),
        include_invalidated=include_invalidated,
        reader=_reader(caller, reader),
    )
    # Key order, then newest first: a page ends at a (key, id) that later writes never move.
    found.sort(key=lambda f: (f.key, -f.id))
    if after is not None:
        found = [f for f in found if (f.key, -f.id) > (after[0], -after[1])]
    page = found[:limit]
    more = len(found) > limit
    return out.FactPage(
        facts=[out.fact(f) for f in page], next_cursor=_next_cursor(page[-1]) if more else None
    )


@router.post("/facts", status_code=201, summary="Remember a fact (replacing its key's)")
def remember(
    engine: EngineDep,
    caller: CallerDep,
    request: Request,
    body: out.RememberBody,
    user_id: UserId = None,
) -> out.FactOut:
    who = person(caller, user_id)
    written = engine.remember(
        who,
        body.key,
        body.content,
        scope=body.scope,
        valid_from=body.valid_from,
        valid_until=body.valid_until,
        reader=caller.reader,
        max_facts=request.app.state.max_facts,
    )
    _tell_of(request, written)
    return out.fact(written)


ID_MOST = 2**63 - 1
FactId = Annotated[int, Path(ge=1, le=ID_MOST, description="A fact version's id")]


@router.patch("/facts/{fact_id}", summary="Correct a fact: a new version under its key")
def correct(
    engine: EngineDep,
    caller: CallerDep,
    request: Request,
    fact_id: FactId,
    body: out.CorrectBody,
    user_id: UserId = None,
) -> out.FactOut:
    who = person(caller, user_id)
    # The version named must still be the key's true one when the write holds the key: one
    # replaced meanwhile is a 409 naming the true one, never a correction of that.
    written = engine.correct(
        who,
        _version(engine, who, fact_id).key,
        body.content,
        valid_from=body.valid_from,
        valid_until=body.valid_until,
        reader=caller.reader,
        expected_id=fact_id,
    )
    _tell_of(request, written)
    return out.fact(written)


@router.post("/facts/{fact_id}/forget", summary="Forget a fact (erase: its words too)")
def forget(
    engine: EngineDep,
    caller: CallerDep,
    request: Request,
    fact_id: FactId,
    body: out.ForgetBody | None = None,
    user_id: UserId = None,
) -> out.ForgetOut:
    who = person(caller, user_id)
    asked = body or out.ForgetBody.model_validate({})
    ended = engine.forget(
        who,
        _version(engine, who, fact_id).key,
        at=asked.at,
        erase=asked.erase,
        reader=caller.reader,
        expected_id=fact_id,
    )
    _tell_of(request, ended)
    return out.ForgetOut(fact=out.fact(ended))


@router.get("/facts/{fact_id}/history", summary="Every version of the fact's key, oldest first")
def history(
    engine: EngineDep, caller: CallerDep, fact_id: FactId, user_id: UserId = None
) -> out.FactsOut:
    who = person(caller, user_id)
    version = _version(engine, who, fact_id)
    return out.FactsOut(facts=[out.fact(f) for f in engine.history(who, version.key)])


@router.post("/memories", status_code=201, summary="Keep a memory: free text for recall")
def add_memory(
    engine: EngineDep,
    caller: CallerDep,
    request: Request,
    body: out.MemoryBody,
    user_id: UserId = None,
) -> out.MemoryOut:
    who = person(caller, user_id)
    kept = engine.add_memory(who, body.content)
    _tell_who(request, who)
    return out.memory(kept)


@router.post("/memories/search", summary="The memories about a query, best first")
def search_memories(
    engine: EngineDep, caller: CallerDep, body: out.SearchBody, user_id: UserId = None
) -> out.MemoriesOut:
    found = engine.search_memories(person(caller, user_id), body.query, limit=body.limit)
    return out.MemoriesOut(memories=[out.memory(m) for m in found])


@router.post("/memories/{memory_id}/forget", summary="Forget a memory, and what was read from it")
def forget_memory(
    engine: EngineDep,
    caller: CallerDep,
    request: Request,
    memory_id: Annotated[int, Path(ge=1, le=ID_MOST)],
    user_id: UserId = None,
) -> out.MemoryOut:
    who = person(caller, user_id)
    forgotten = engine.forget_memory(who, memory_id)
    _tell_who(request, who)  # the memory, and the facts read only from it
    return out.memory(forgotten)


@router.post("/search", summary="The facts and the memories about a query, best first")
def search(
    engine: EngineDep, caller: CallerDep, body: out.SearchBody, user_id: UserId = None
) -> out.SearchOut:
    return out.search(engine.search(person(caller, user_id), body.query, limit=body.limit))


def _everyone(caller: Caller, what: str) -> None:
    if not reaches_everyone(caller):
        raise PermissionDenied(f"{what} needs a token for any user of the account, or an admin's")


@router.delete("/agents/{agent_id:path}", summary="Delete what a reader name was handed")
def delete_reader(
    engine: EngineDep,
    caller: CallerDep,
    agent_id: Annotated[str, Path(description="The reader name")],
) -> out.ReadMarksOut:
    _everyone(caller, "deleting a reader's read marks")
    reader = limits.check_reader(agent_id)
    assert reader is not None
    return out.ReadMarksOut(read_marks_deleted=engine.delete_reader(caller.who.account, reader))


def _administers(engine: MemoryEngine, caller: Caller) -> bool:
    """Whether ``caller``'s token is an administrator's, of a user the engine lists as one."""
    user = caller.who.user
    return caller.admin and user is not None and engine.is_admin(caller.who.account, user)


@router.delete("/users/{user_id:path}", summary="Erase a person: every trace, with the report")
def erase_user(
    engine: EngineDep, caller: CallerDep, request: Request, user_id: str
) -> out.ErasureOut:
    account = person(caller, user_id).account  # may this token reach them, and is it a name
    # Erasing an administrator also ends their administration: a backend's token, which may
    # erase any person, would otherwise take the account's reviewers away one by one. That
    # takes an administrator's token (of a user the engine lists), or the person's own.
    reviewer = caller.who.user
    if (
        reviewer != user_id
        and engine.is_admin(account, user_id)
        and not _administers(engine, caller)
    ):
        raise PermissionDenied(
            f"{user_id!r} administers {account!r}: erasing an administrator takes an "
            "administrator's token, or their own"
        )
    report = engine.erase_user(account, user_id)
    _tell(request, lambda who: (who.account, who.user) == (account, user_id))  # every agent's
    return out.erasure(report)


@router.get("/users/{user_id:path}/export", summary="Everything kept about a person, as JSON")
def export_user(engine: EngineDep, caller: CallerDep, user_id: str) -> JSONResponse:
    account = person(caller, user_id).account
    body: dict[str, Any] = engine.export_user(account, user_id).to_dict()
    return JSONResponse(body)


@router.get("/proposals", summary="The review queue: account facts waiting, oldest first")
def proposals(engine: EngineDep, caller: CallerDep) -> out.FactsOut:
    admin = require_admin(caller)
    return out.FactsOut(facts=[out.fact(f) for f in engine.proposals(admin.account)])


@router.post("/proposals/{fact_id}/confirm", summary="Confirm a proposal: everyone sees it")
def confirm(engine: EngineDep, caller: CallerDep, request: Request, fact_id: FactId) -> out.FactOut:
    confirmed = engine.confirm(require_admin(caller), fact_id)
    _tell_of(request, confirmed)  # every user of the account sees it now
    return out.fact(confirmed)


@router.post("/proposals/{fact_id}/reject", summary="Reject a proposal: it ends, kept for review")
def reject(engine: EngineDep, caller: CallerDep, request: Request, fact_id: FactId) -> out.FactOut:
    rejected = engine.reject(require_admin(caller), fact_id)
    _tell_of(request, rejected)  # its proposer saw it until now
    return out.fact(rejected)


@router.get("/approvals", summary="Captured facts held for the person's own approval")
def pending(engine: EngineDep, caller: CallerDep, user_id: UserId = None) -> out.PendingListOut:
    found = engine.pending(person(caller, user_id))
    return out.PendingListOut(pending=[out.pending(p) for p in found])


PendingId = Annotated[int, Path(ge=1, le=ID_MOST)]


def _owner(caller: Caller, user_id: str | None) -> Identity:
    """The person deciding on what was captured about them: only their own token may."""
    who = person(caller, user_id)
    if reaches_everyone(caller) or who.user is None:
        raise PermissionDenied(
            "approving or declining what was captured about a person is that person's own act: "
            "use their token"
        )
    return who


@router.post("/approvals/{pending_id}/approve", summary="Approve a captured fact: it is written")
def approve(
    engine: EngineDep,
    caller: CallerDep,
    request: Request,
    pending_id: PendingId,
    user_id: UserId = None,
) -> out.ApprovedOut:
    who = _owner(caller, user_id)
    written = engine.approve(who, pending_id, reader=caller.reader)
    _tell_who(request, who)
    return out.ApprovedOut(fact=out.fact(written) if written is not None else None)


@router.post("/approvals/{pending_id}/decline", summary="Decline a captured fact: nothing is kept")
def decline(
    engine: EngineDep, caller: CallerDep, pending_id: PendingId, user_id: UserId = None
) -> out.PendingOut:
    return out.pending(engine.decline(_owner(caller, user_id), pending_id))


@router.api_route(
    "/{rest:path}",
    methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
    include_in_schema=False,
)
def unknown(rest: str, request: Request) -> None:
    allowed = sorted(
        method
        for route in router.routes
        if isinstance(route, APIRoute)
        and route.path != "/v1/{rest:path}"
        and route.path_regex.match(request.url.path)
        for method in route.methods or ()
    )
    if allowed:
        raise HTTPException(
            405, f"/v1/{rest} takes {', '.join(allowed)}", {"Allow": ", ".join(allowed)}
        )
    raise NotFound(f"no route /v1/{rest}")
