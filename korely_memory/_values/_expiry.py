"""Expiry, a property of the read: a version recorded with ``valid_until`` is true until then.

Nothing runs in the background. A read at a moment at or after a version's
``valid_until`` leaves it out, or sees it ended then (``expired``); a write
under its key, or ``trim``, ends the row itself (``_versions.end_expired``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

from ._identity import EndCause
from ._types import Fact


def holds(fact: Fact, now: dt.datetime) -> bool:
    """Whether ``fact`` is true at ``now``: the store holds it and it has not expired."""
    return fact.is_current and (fact.valid_until is None or fact.valid_until > now)


def expired(fact: Fact, now: dt.datetime) -> bool:
    """Whether ``fact`` is held as true but its ``valid_until`` has come by ``now``."""
    return fact.is_current and fact.valid_until is not None and fact.valid_until <= now


def seen_at(fact: Fact, now: dt.datetime) -> Fact:
    """``fact`` as a read at ``now`` sees it: an expired version, not yet ended by a write,
    reads as ended then (``expired``), as ``end_expired`` will end it."""
    if not expired(fact, now):
        return fact
    assert fact.valid_until is not None
    return dataclasses.replace(
        fact,
        ended_recorded_at=max(fact.valid_until, fact.recorded_at),
        invalid_at=fact.valid_until,
        end_cause=EndCause.EXPIRED,
    )


def all_seen_at(found: Iterable[Fact], now: dt.datetime) -> list[Fact]:
    """Every version of ``found`` as a read at ``now`` sees it."""
    return [seen_at(f, now) for f in found]
