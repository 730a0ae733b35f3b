"""Bearer tokens for the HTTP transport: a file of token hashes, each mapped to a caller.

The operator keeps a JSON file such as::

    {
      "tokens": [
        {
          "name": "giulia-laptop",
          "sha256": "<64 hex digits: the SHA-256 of the token>",
          "account": "acme",
          "user": "giulia",
          "agent": "support-copilot",
          "reader": "giulia-laptop"
        }
      ]
    }

Two fields may be added to an entry, both false when absent: ``"any_user": true`` (with
``"user": null``) for an application's backend that serves every user of the account and names
one in each request, and ``"admin": true`` for an administrator (``user`` names them). Both are
read by the REST server (``korely-server``); MCP tools work for one person, so a token for any
user is refused there.

The file holds no token, only its hash: `new_token()` makes a token and `hash_token()` its
hash (``korely-mcp new-token`` on the command line). A request's identity is the entry its
token's hash matches; `TokenFile` is the SDK's `TokenVerifier` for it. The file is read
again when it changes, so a token is added or revoked without a restart; a file that no
longer reads refuses every token until it is fixed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict

from korely_memory import Identity, InvalidRequest, limits

from .tools import Caller

__all__ = ["CallerToken", "TokenFile", "hash_token", "new_token", "read_token_file"]

logger = logging.getLogger("korely_mcp")

_FIELDS = ("name", "sha256", "account", "user", "agent", "reader")
_FLAGS = ("any_user", "admin")
_HEX = re.compile(r"[0-9a-f]{64}")


def new_token() -> str:
    """A new random token (256 bits), for one client."""
    return "kmcp_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What the token file keeps of a token: its SHA-256, in hex.

    A plain hash is enough for tokens made by `new_token` (random, not guessable); it
    would not be for a password.
    """
    return hashlib.sha256(token.encode()).hexdigest()


class CallerToken(AccessToken):
    """An access token the file vouched for, with the caller it is mapped to."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    caller: Caller


@dataclass(frozen=True)
class _Snapshot:
    stamp: tuple[int, int, int, int] | None
    callers: Mapping[str, Caller]


def read_token_file(path: str | os.PathLike[str]) -> dict[str, Caller]:
    """The callers of a token file, by token hash.

    Args:
        path: The file.

    Returns:
        Each entry's caller, under its ``sha256``.

    Raises:
        InvalidRequest: The file cannot be read, group or others may write it, it is not
            such a file, or an entry breaks a rule (a bad name, a repeated name or hash);
            ``field`` names the entry's field.
    """
    _check_mode(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InvalidRequest("tokens", f"cannot read the token file {path}: {error}") from None
    entries = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(entries, list) or (isinstance(data, dict) and set(data) != {"tokens"}):
        raise InvalidRequest("tokens", f'{path} must hold an object {{"tokens": [...]}}')
    callers: dict[str, Caller] = {}
    names: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"tokens[{index}]"
        digest, caller = _entry(entry, where, path)
        if digest in callers:
            raise InvalidRequest(f"{where}.sha256", f"repeats an earlier entry's hash in {path}")
        if caller.name in names:
            raise InvalidRequest(f"{where}.name", f"repeats {caller.name!r} in {path}")
        names.add(caller.name)
        callers[digest] = caller
    return callers


def _check_mode(path: str | os.PathLike[str]) -> None:
    if os.name == "nt":  # no such mode bits there
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # reading it says why
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InvalidRequest(
            "tokens",
            f"{path} may be written by group or others (mode {stat.S_IMODE(mode):04o}): whoever "
            f"can write it can let themselves in; chmod go-w {path}",
        )


def _entry(entry: Any, where: str, path: str | os.PathLike[str]) -> tuple[str, Caller]:
    if not isinstance(entry, dict):
        raise InvalidRequest(where, f"must be an object with {', '.join(_FIELDS)} in {path}")
    missing = [f for f in _FIELDS if f not in entry]
    other = sorted(set(entry) - set(_FIELDS) - set(_FLAGS))
    if missing or other:
        said = f"lacks {', '.join(missing)}" if missing else f"has unknown {', '.join(other)}"
        raise InvalidRequest(
            where,
            f"{said} in {path} (an entry has {', '.join(_FIELDS)}, and may have "
            f"{' and '.join(_FLAGS)})",
        )
    digest = entry["sha256"]
    if not isinstance(digest, str) or not _HEX.fullmatch(digest.lower()):
        raise InvalidRequest(f"{where}.sha256", f"must be 64 hex digits (a SHA-256) in {path}")
    try:
        name = _name("name", entry["name"])
        reader = _name("reader", entry["reader"])
        who = limits.check_identity(Identity(entry["account"], entry["user"], entry["agent"]))
    except InvalidRequest as error:
        said = error.message.removeprefix(f"{error.field}: ")
        raise InvalidRequest(f"{where}.{error.field}", f"{said} (in {path})") from None
    flags = {flag: entry.get(flag, False) for flag in _FLAGS}
    for flag, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidRequest(f"{where}.{flag}", f"must be true or false in {path}")
    if flags["any_user"] and who.user is not None:
        raise InvalidRequest(
            f"{where}.user", f"must be null in an entry for any user of the account in {path}"
        )
    if flags["admin"] and who.user is None:
        raise InvalidRequest(f"{where}.user", f"must name the administrator in {path}")
    return digest.lower(), Caller(who, reader, name, **flags)


def _name(field: str, value: Any) -> str:
    # A token's name and a reader follow the engine's rule for names; None is no name here.
    if value is None:
        raise InvalidRequest(field, "is required")
    try:
        checked = limits.check_reader(value)
    except InvalidRequest as error:
        raise InvalidRequest(field, error.message.removeprefix("reader: ")) from None
    assert checked is not None
    return checked


class TokenFile:
    """The token file as the SDK's token verifier: a token is good when its hash is listed.

    Args:
        path: The file (see the module's docstring for its format).

    Raises:
        InvalidRequest: The file does not read when the verifier is made.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        stamp = self._stamp()
        self._snapshot = _Snapshot(stamp, read_token_file(self.path))

    def __len__(self) -> int:
        return len(self._current().callers)

    def caller(self, token: str) -> Caller | None:
        """The caller ``token`` is mapped to, or None when the file does not list it."""
        return self._current().callers.get(hash_token(token))

    async def verify_token(self, token: str) -> AccessToken | None:
        """The caller of ``token``, or None (the request is then refused with 401)."""
        digest = hash_token(token)
        caller = self.caller(token)
        if caller is None:
            logger.info("refused a request whose bearer token is not in %s", self.path)
            return None
        # The session's owner is (client_id, subject): a session opened with one token
        # cannot be used with another.
        return CallerToken(
            token=digest, client_id=caller.name, subject=caller.name, scopes=[], caller=caller
        )

    def _current(self) -> _Snapshot:
        stamp = self._stamp()
        with self._lock:
            if stamp == self._snapshot.stamp:
                return self._snapshot
            try:
                callers: Mapping[str, Caller] = read_token_file(self.path)
            except InvalidRequest as error:
                logger.error("refusing every token until the token file reads again: %s", error)
                callers = {}
            self._snapshot = _Snapshot(stamp, callers)
            return self._snapshot

    def _stamp(self) -> tuple[int, int, int, int] | None:
        # The mode too: a chmod that lets group or others write it changes no content.
        try:
            status = self.path.stat()
        except OSError:
            return None
        return (status.st_mtime_ns, status.st_size, status.st_ino, status.st_mode)
