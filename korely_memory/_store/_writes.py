"""Recording, correcting and ending facts, inside a write transaction the engine opened.

The engine checks the arguments and owns the transaction; ``capture`` runs
several of these in one. Each takes the locks it needs first, in one order:
the person (shared; erasure takes it alone), the namespace's ceiling when one
is given, the key in the identity's namespace, then the key in the account's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from .._text._words import Words
from .._values import _expiry
from .._values._errors import InvalidRequest, LimitExceeded, NotCurrent, NotFound, PermissionDenied
from .._values._identity import EndCause, Identity, Scope
from .._values._types import Fact
from . import _erasure, _items, _marks, _memories, _versions


@dataclass(frozen=True)
class Writer:
    """What every write needs besides its arguments: the engine's words, clock and admin rule."""

    words: Words
    now: Callable[[Connection], dt.datetime]
    is_admin: Callable[[Connection, str, str], bool]


def record(
    conn: Connection,
    w: Writer,
    who: Identity,
    key: str,
    content: str,
    *,
    scope: str = Scope.USER.value,
    valid_from: dt.datetime | None = None,
    valid_until: dt.datetime | None = None,
    source: int | None = None,
    ceiling: int | None = None,
    reader: str | None = None,
    read_from_memory: bool = False,
    item_written: bool = False,
) -> Fact:
    """``remember``: record ``content`` under ``key``, replacing what is there.

    ``read_from_memory``: it was read from a conversation (capture), whether or not the
    excerpt is kept as the memory ``source``: what it replaces ends with that cause.
    ``item_written``: a store's put, which writes the item holding the key itself.
    """
    _versions.lock_person(conn, who.account, who.user, reader)
    if ceiling is not None:
        _versions.lock_ceiling(conn, who)
    _versions.lock_key(conn, who, key)
    now = w.now(conn)
    _check_interval(valid_from or now, valid_until)
    if source is not None and _memories.get(conn, who, source) is None:
        raise NotFound(f"no memory {source} for this identity")
    old = _own_current(conn, who, key, now)
    if old is None:
        shared = _versions.account_current(conn, who, key)
        if (
            shared is not None
            and _expiry.is_live(shared, now)
            and (shared.content, shared.valid_until, valid_until) == (content, None, None)
        ):
            return shared
        if ceiling is not None and _versions.count_own(conn, who, now) >= ceiling:
            raise LimitExceeded(
                f"already {ceiling} facts kept (max_facts); correct or forget one "
                f"before adding {key!r}"
            )
    elif (
        old.content == content
        and old.effective_scope.value == scope
        and old.valid_until == valid_until
    ):
        return old
    return _replace(
        conn,
        w,
        old,
        who,
        reader,
        cause=EndCause.READ_FROM_MEMORY
        if source is not None or read_from_memory
        else EndCause.STATED,
        valid_from=valid_from,
        now=now,
        follow=not item_written,
        **_own_version(who, key, content, scope, source, valid_until),
    )


def correct(
    conn: Connection,
    w: Writer,
    who: Identity,
    key: str,
    content: str,
    *,
    valid_from: dt.datetime | None = None,
    valid_until: dt.datetime | None = None,
    reader: str | None = None,
    rights: bool = True,
    source: int | None = None,
    read_from_memory: bool = False,
    expected_id: int | None = None,
) -> Fact:
    """``correct``: replace the true fact under ``key``; without ``rights``, an account fact's
    correction is a proposal. ``read_from_memory`` as for ``record``; ``expected_id``: the
    version the caller means, refused (`NotCurrent`) when another is true under the key."""
    _versions.lock_person(conn, who.account, who.user, reader)
    _versions.lock_key(conn, who, key)
    now = w.now(conn)
    _check_interval(valid_from or now, valid_until)
    read = source is not None or read_from_memory
    cause = EndCause.READ_FROM_MEMORY if read else EndCause.CORRECTED
    own = _own_current(conn, who, key, now)

    def account() -> Fact:
        return _account_fact(conn, w, who, key, "correct", now, propose=not rights)

    old = _expected(expected_id, key, (lambda: own) if own is not None else account)
    if own is None and not rights:
        if old.content == content and old.valid_until == valid_until:
            return old
        scope = Scope.ACCOUNT_PROPOSED.value
        proposal = _own_version(who, key, content, scope, source, valid_until)
        return _replace(
            conn, w, None, who, reader, cause=cause, valid_from=valid_from, now=now, **proposal
        )
    if old.content == content and old.valid_until == valid_until:
        return old
    shared = old.effective_scope is Scope.ACCOUNT
    return _replace(
        conn,
        w,
        old,
        who,
        reader,
        cause=cause,
        valid_from=valid_from,
        now=now,
        account=old.account,
        owner=who.user if shared else old.owner,
        agent=old.agent,
        key=key,
        content=content,
        scope=old.effective_scope.value,
        source_memory_id=source,
        valid_until=valid_until,
        confirmed_by=who.user if shared else None,
        confirmed_at=now if shared else None,
    )


def end(
    conn: Connection,
    w: Writer,
    who: Identity,
    key: str,
    *,
    at: dt.datetime | None = None,
    erase: bool = False,
    reader: str | None = None,
    rights: bool = True,
    cause: EndCause | None = None,
    expected_id: int | None = None,
) -> Fact:
    """``forget``: end the true fact under ``key`` (``erase``: and remove every version's words,
    and the changes to it held for ``who``'s approval); ``expected_id`` as for ``correct``."""
    _versions.lock_person(conn, who.account, who.user, reader)
    _versions.lock_key(conn, who, key)
    clock = w.now(conn)
    own = _versions.own_current(conn, who, key)
    if erase and own is not None and _expiry.is_expired(own, clock):
        if expected_id is not None and expected_id != own.id:
            _expected(expected_id, key, lambda: None)
        # Nothing is true to end, but its words are asked to go: they do, from every version.
        _versions.end_expired(conn, [own], clock)
        _erasure.erase_key(conn, who, own, w.words)
        return _fact(conn, who.account, own.id)
    true = _own_current(conn, who, key, clock)

    def account() -> Fact:
        return _account_fact(conn, w, who, key, "forget", clock, propose=False, rights=rights)

    old = _expected(expected_id, key, (lambda: true) if true is not None else account)
    if at is not None and at < old.valid_from:
        raise InvalidRequest(
            "at",
            f"must not be before the fact became true ({old.valid_from.isoformat()}), "
            f"got {at.isoformat()}",
        )
    now = max(clock, old.recorded_at)
    _versions.end_versions(
        conn,
        _versions.the_version(old.account, old.id),
        cause=EndCause.ERASED if erase else (cause or EndCause.FORGOTTEN),
        now=now,
        invalid_at=at or now,
        writer=(who.account, reader) if reader else None,
    )
    if erase:
        _erasure.erase_key(conn, who, old, w.words)
    else:
        _items.erase_fact(conn, old)  # a store's item whose fact ended is gone, value and all
    return _fact(conn, old.account, old.id)


def _check_interval(start: dt.datetime, until: dt.datetime | None) -> None:
    """A version must be true for a while: ``valid_until`` after ``valid_from`` (by default
    the write's moment)."""
    if until is not None and until <= start:
        raise InvalidRequest(
            "valid_until",
            f"must be after valid_from ({start.isoformat()}), got {until.isoformat()}",
        )


def _expected(expected_id: int | None, key: str, current: Callable[[], Fact | None]) -> Fact:
    """The version ``current()`` finds true under ``key``, which must be ``expected_id`` when
    one is named: `NotCurrent` otherwise (the caller read a version that has ended since),
    naming the true one, or none (where ``current()`` finds nothing, or raises NotFound)."""
    try:
        found = current()
    except NotFound:
        if expected_id is None:
            raise
        found = None
    if found is not None and expected_id in (None, found.id):
        return found
    if expected_id is None:  # nothing true, and no version named: as without one
        raise NotFound(f"no true fact under key {key!r}")
    raise NotCurrent(
        f"fact {expected_id} is not the true version under key {key!r}: "
        + (f"fact {found.id} is" if found is not None else "nothing is true under it now"),
        found.id if found is not None else None,
    )


def _own_current(conn: Connection, who: Identity, key: str, now: dt.datetime) -> Fact | None:
    """The identity's own fact true at ``now`` under ``key``; one that expired by then is ended
    first (as expired), so the key is free."""
    old = _versions.own_current(conn, who, key)
    if old is not None and _expiry.is_expired(old, now):
        _versions.end_expired(conn, [old], now)
        return None
    return old


def _own_version(
    who: Identity,
    key: str,
    content: str,
    scope: str,
    source: int | None,
    valid_until: dt.datetime | None = None,
) -> dict[str, Any]:
    """A new version in ``who``'s own namespace, as ``_replace`` takes it."""
    return {
        "account": who.account,
        "owner": who.user,
        "agent": who.agent,
        "key": key,
        "content": content,
        "scope": scope,
        "source_memory_id": source,
        "valid_until": valid_until,
    }


def _replace(
    conn: Connection,
    w: Writer,
    old: Fact | None,
    who: Identity,
    reader: str | None,
    *,
    cause: EndCause,
    valid_from: dt.datetime | None,
    now: dt.datetime | None = None,
    follow: bool = True,
    **new: Any,
) -> Fact:
    """End ``old`` and make the new version true; the writer's reader is handed it, and a
    store's item that holds the key says its words (``follow``).

    A version recorded for an interval already past (``valid_from`` and ``valid_until`` both
    before now) is history from the start: it is ended as expired at once, and handed to nobody.
    """
    moment = now or w.now(conn)
    new_id = _versions.replace(
        conn,
        old,
        cause=cause,
        now=moment,
        valid_from=valid_from,
        writer=(who.account, reader) if reader else None,
        words=w.words,
        **new,
    )
    fact = _fact(conn, who.account, new_id)
    if follow and fact.effective_scope is not Scope.ACCOUNT:
        _items.follow(conn, fact, moment)
    if _expiry.is_expired(fact, moment):
        _versions.end_expired(conn, [fact], moment)
        return _fact(conn, who.account, new_id)
    if reader is not None:
        _marks.hand_over(conn, who.account, reader, [fact], fact.recorded_at)
    return fact


def _account_fact(
    conn: Connection,
    w: Writer,
    who: Identity,
    key: str,
    verb: str,
    now: dt.datetime,
    *,
    propose: bool,
    rights: bool = True,
) -> Fact:
    """The confirmed account fact under ``key``, when ``who`` may ``verb`` it (or propose)."""
    _versions.lock_key(conn, who, key, shared=True)
    shared = _versions.account_current(conn, who, key)
    if shared is not None and _expiry.is_expired(shared, now):
        _versions.end_expired(conn, [shared], now)
        shared = None
    if shared is None:
        raise NotFound(f"no true fact under key {key!r} to {verb}; use remember to record one")
    if propose:
        return shared
    if not rights:
        raise PermissionDenied(
            f"{key!r} is an account fact: only an administrator may {verb} it, outside this "
            "conversation"
        )
    if who.user is None or not w.is_admin(conn, who.account, who.user):
        raise PermissionDenied(
            f"{key!r} is an account fact: only an administrator may {verb} it; record the "
            "person's own fact under the key instead, or propose a change for review"
        )
    return shared


def _fact(conn: Connection, account: str, fact_id: int) -> Fact:
    fact = _versions.by_id(conn, account, fact_id)
    assert fact is not None
    return fact
