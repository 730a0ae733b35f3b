"""Seals: what an adapter keeps outside the database (in an agent framework's state, say) and
must take back unchanged. Public for adapters; an application has no use for it.

A seal is an HMAC-SHA256 of a text under the database's own secret: a random key the first
engine to need it records in ``korely_settings``, read by every engine that opens the same
database, in any process. Whoever can write the framework's state but not the database cannot
make a seal that verifies.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import weakref

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ._db._schema import settings
from ._engine import MemoryEngine

__all__ = ["seal", "verifies"]

_SECRET = "seal_secret"
_known: weakref.WeakKeyDictionary[MemoryEngine, bytes] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def seal(engine: MemoryEngine, text: str) -> str:
    """The seal of ``text`` under ``engine``'s database (64 hex digits)."""
    return hmac.new(_secret(engine), text.encode(), hashlib.sha256).hexdigest()


def verifies(engine: MemoryEngine, text: str, sealed: object) -> bool:
    """Whether ``sealed`` is the seal of ``text`` under ``engine``'s database."""
    return isinstance(sealed, str) and hmac.compare_digest(seal(engine, text), sealed)


def _secret(engine: MemoryEngine) -> bytes:
    with _lock:
        found = _known.get(engine)
    if found is None:
        # Read first: a database that has its secret takes no write lock.
        recorded = engine._read(_recorded) or engine._write(_recorded_or_new)
        found = bytes.fromhex(recorded)
        with _lock:
            _known[engine] = found
    return found


def _recorded(conn: Connection) -> str | None:
    found: str | None = conn.execute(
        sa.select(settings.c.value).where(settings.c.name == _SECRET)
    ).scalar_one_or_none()
    return found


def _recorded_or_new(conn: Connection) -> str:
    # A write transaction: SQLite's are serialised, and PostgreSQL's is run again when
    # another engine inserted the secret first.
    recorded = _recorded(conn)
    if recorded is None:
        recorded = secrets.token_hex(32)
        conn.execute(settings.insert().values(name=_SECRET, value=recorded))
    return recorded
