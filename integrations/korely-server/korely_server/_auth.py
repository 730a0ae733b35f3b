"""Who a request is: its bearer token's entry in the token file, never what its body says.

A token names an account, an agent definition and a reader, and one of:

- a user: a person's own client, which reaches that person's memory only;
- no user and ``any_user``: an application's backend, which names the person in each request
  (``user_id``);
- no user and not ``any_user``: the agent's memory with no particular person;

and ``admin`` (with a user): an administrator, who reaches every user of the account and reviews
its proposals.
"""

from __future__ import annotations

from fastapi import Request

from korely_mcp import Caller, TokenFile
from korely_memory import Identity, InvalidRequest, PermissionDenied, limits

__all__ = ["Unauthorized", "caller_of", "person", "reaches_everyone", "require_admin", "token_of"]


class Unauthorized(Exception):
    """The request carries no token the token file lists (HTTP 401)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def token_of(request: Request) -> str | None:
    """The bearer token of ``request``'s Authorization header, if it has one."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def caller_of(request: Request) -> Caller:
    """The caller the request's bearer token is mapped to.

    Raises:
        Unauthorized: No bearer token, or one the token file does not list.
    """
    token = token_of(request)
    if token is None:
        raise Unauthorized("send a bearer token: Authorization: Bearer <token>")
    tokens: TokenFile = request.app.state.tokens
    caller = tokens.caller(token)
    if caller is None:
        raise Unauthorized("the bearer token is not one the server knows")
    return caller


def reaches_everyone(caller: Caller) -> bool:
    """Whether ``caller`` may name any user of its account."""
    return caller.any_user or caller.admin


def person(caller: Caller, user_id: str | None) -> Identity:
    """Whose memory a request of ``caller`` works on.

    Args:
        caller: The token's caller.
        user_id: The ``user_id`` the request names, if any.

    Raises:
        InvalidRequest: ``user_id`` breaks the name rule, or a token for any user names none.
        PermissionDenied: A person's token names another person.
    """
    token_user = caller.who.user
    if user_id is None:
        if caller.any_user:
            raise InvalidRequest(
                "user_id", "is required: this token serves any user of the account"
            )
        return caller.who
    try:
        named = limits.check_identity(Identity(caller.who.account, user_id, caller.who.agent))
    except InvalidRequest as error:
        raise InvalidRequest("user_id", error.message.removeprefix(f"{error.field}: ")) from None
    if reaches_everyone(caller) or named.user == token_user:
        return named
    raise PermissionDenied(
        f"this token is for {token_user!r}: it reaches no other person's memory"
        if token_user is not None
        else "this token is for the agent's own memory: it reaches no person's"
    )


def require_admin(caller: Caller) -> Identity:
    """The administrator ``caller`` is.

    Raises:
        PermissionDenied: The token is not an administrator's.
    """
    if not caller.admin:
        raise PermissionDenied("only an administrator's token may review proposals")
    return caller.who
