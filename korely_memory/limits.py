"""The limits the engine holds every argument to, and the checks an adapter runs before a call.

An adapter that takes a reader name or a budget when it is built checks it
then, with the same rule and the same error the engine would raise later::

    from korely_memory import limits

    limits.check_reader("support-bot")
    limits.check_token_budget(800)

Every check raises ``InvalidRequest`` naming the field, and returns the value
as the engine will use it. A face that takes a moment or a database URL as text
reads it with ``check_moment`` and ``check_url``, so that every face takes the
same forms and refuses the others in the same words.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import URL

from ._db import _database
from ._values import _validation
from ._values._identity import Identity
from ._values._validation import (
    DEFAULT_BUDGET,
    DEFAULT_HOLD,
    MAX_BUDGET,
    MAX_CONTENT,
    MAX_HOLD,
    MAX_ITEM_KEY,
    MAX_KEY,
    MAX_MEMORY,
    MAX_NAME,
    MAX_NAMESPACE,
    MAX_TTL,
    MAX_VALUE,
    MIN_BUDGET,
    MOMENT_FORMS,
)

DEFAULT_URL = _database.DEFAULT_URL
"""The database when no URL is named and ``$KORELY_DATABASE_URL`` is not set."""

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_HOLD",
    "DEFAULT_URL",
    "MAX_BUDGET",
    "MAX_CONTENT",
    "MAX_HOLD",
    "MAX_ITEM_KEY",
    "MAX_KEY",
    "MAX_MEMORY",
    "MAX_NAME",
    "MAX_NAMESPACE",
    "MAX_TTL",
    "MAX_VALUE",
    "MIN_BUDGET",
    "MOMENT_FORMS",
    "check_changes",
    "check_hold",
    "check_identity",
    "check_item",
    "check_max_facts",
    "check_moment",
    "check_reader",
    "check_token_budget",
    "check_url",
]


def check_identity(who: Any) -> Identity:
    """Check an identity's names; returns it as an ``Identity``.

    Args:
        who: An ``Identity``, or any object with ``account``, ``user`` and ``agent``.

    Returns:
        The identity.

    Raises:
        InvalidRequest: A name breaks the name rule; ``field`` says which.
    """
    return _validation.identity(who)


def check_item(
    namespace: Any,
    key: Any,
    value: Any | None = None,
    *,
    index: Any = None,
    ttl: Any = None,
) -> None:
    """Check a store item (``engine.items.put``, ``KorelyStore``) before it is written.

    Args:
        namespace: Non-empty labels without '.', ``MAX_NAMESPACE`` characters in all at most.
        key: A non-empty string of ``MAX_ITEM_KEY`` characters at most.
        value: A JSON object of ``MAX_VALUE`` characters at most, or None (a delete).
        index: None, False, or a list of field paths.
        ttl: None, or minutes: more than 0 and at most ``MAX_TTL``.

    Raises:
        InvalidRequest: One of them breaks its rule; ``field`` says which.
    """
    _validation.item_namespace(namespace)
    _validation.item_key(key)
    if value is not None:
        _validation.item_value(value)
        _validation.item_index(index)
        _validation.item_ttl(ttl)


def check_reader(reader: str | None) -> str | None:
    """Check a reader name (None is allowed: a read without notices).

    Args:
        reader: The reading agent's own name.

    Returns:
        The name.

    Raises:
        InvalidRequest: The name is empty, ``.`` or ``..``, holds ``/`` or a control
            character, or is longer than ``MAX_NAME``.
    """
    return _validation.name("reader", reader, optional=True)


def check_token_budget(token_budget: int) -> int:
    """Check a block's budget: an integer from ``MIN_BUDGET`` to ``MAX_BUDGET``.

    Args:
        token_budget: The most tokens a block may take.

    Returns:
        The budget.

    Raises:
        InvalidRequest: It is not such an integer.
    """
    return _validation.token_budget(token_budget)


def check_changes(changes: str | Sequence[str] | None) -> frozenset[str] | None:
    """Check which kinds of change a block tells.

    Args:
        changes: None (the engine's default), ``"all"``, or end causes such as
            ``["corrected", "forgotten"]``.

    Returns:
        The causes told, or None for the default rule.

    Raises:
        InvalidRequest: A cause is not one the engine knows.
    """
    return _validation.changes(changes)


def check_max_facts(max_facts: int | None) -> int | None:
    """Check a ceiling on the facts one identity keeps (None: no ceiling).

    Args:
        max_facts: The most facts a new key may bring the identity to.

    Returns:
        The ceiling.

    Raises:
        InvalidRequest: It is not None or a non-negative integer.
    """
    return _validation.max_facts(max_facts)


def check_hold(hold: bool | float | dt.timedelta | None) -> dt.timedelta | None:
    """Check a hold period; True means ``DEFAULT_HOLD``.

    Args:
        hold: None or False (no hold), True, seconds, or a ``timedelta`` up to ``MAX_HOLD``.

    Returns:
        The period, or None for no hold.

    Raises:
        InvalidRequest: It is none of those.
    """
    return _validation.hold(hold, DEFAULT_HOLD)


def check_moment(field: str, value: Any) -> dt.date | dt.datetime:
    """Read a moment written as text: a date (``2026-03-01``) or an ISO 8601 time, ``Z`` or no
    offset for UTC. A ``date`` or ``datetime`` is returned as it is.

    Args:
        field: The name the caller knows the moment by (``as_of``, ``until``): the error's field.
        value: The text.

    Returns:
        A ``date`` or a ``datetime``, as the engine's moments take them (a date is midnight UTC,
        or through that day for ``valid_until``; a naive time is UTC).

    Raises:
        InvalidRequest: It is none of those; the message names ``field`` and the forms
            (``MOMENT_FORMS``).
    """
    return _validation.moment_text(field, value)


def check_url(url: str | URL | None) -> URL:
    """Read a database URL as ``MemoryEngine(url)`` reads it, opening nothing.

    Args:
        url: A SQLAlchemy URL; None is ``$KORELY_DATABASE_URL``, else the SQLite file
            ``./korely-memory.db``. ``postgresql://`` is read as psycopg 3's, and a leading
            ``~`` in a SQLite path is the home folder.

    Returns:
        The URL the engine would open.

    Raises:
        InvalidRequest: It is not a database URL, or not one of a database and driver the
            engine runs on; field ``url`` (the message does not repeat a URL that may hold a
            password).
    """
    return _database.resolve_url(url)
