"""The administrator's page's sessions: kept in the server's memory, named by a cookie.

The cookie holds a random session id only, never the token: the token stays in this process,
and every page looks it up in the token file again, so a token revoked (or no longer an
administrator's) ends its sessions at their next request. A session ends on sign-out, an hour
after its last request, or eight hours after sign-in; a restart ends them all.

Each session has its own CSRF token, which every form that changes something carries back.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass, field

__all__ = ["IDLE", "LIFETIME", "Session", "Sessions"]

IDLE = dt.timedelta(hours=1)
"""A session ends this long after its last request."""
LIFETIME = dt.timedelta(hours=8)
"""A session ends this long after its sign-in, however busy."""
MOST = 1000
"""The most sessions kept at once: a sign-in beyond them ends the oldest."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _digest(session_id: str) -> str:
    # Kept by the id's hash: the table of sessions holds nothing a cookie could be made from.
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass
class Session:
    """One administrator's sign-in.

    Attributes:
        token: The bearer token signed in with (checked against the token file on each request).
        csrf: The token each state-changing form of this session carries.
        started: When it was signed in.
        seen: Its latest request.
        notice: A sentence for the next page shown (what the last action did), then cleared.
    """

    token: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    started: dt.datetime = field(default_factory=_now)
    seen: dt.datetime = field(default_factory=_now)
    notice: str | None = None

    def carries(self, csrf: str) -> bool:
        """Whether ``csrf`` is this session's CSRF token (compared in constant time)."""
        return hmac.compare_digest(self.csrf.encode(), csrf.encode())

    def take_notice(self) -> str | None:
        """The notice waiting for the next page, which no later page shows again."""
        notice, self.notice = self.notice, None
        return notice


class Sessions:
    """The sessions of one application, by id; safe to use from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def start(self, token: str) -> tuple[str, Session]:
        """A new session for ``token``: its id (for the cookie) and the session."""
        session_id = secrets.token_urlsafe(32)
        session = Session(token)
        with self._lock:
            self._drop_expired(session.started)
            while len(self._sessions) >= MOST:
                oldest = min(self._sessions, key=lambda k: self._sessions[k].seen)
                del self._sessions[oldest]
            self._sessions[_digest(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session ``session_id`` names (its last request is now), or None."""
        if not session_id:
            return None
        now = _now()
        with self._lock:
            session = self._sessions.get(_digest(session_id))
            if session is None:
                return None
            if self._expired(session, now):
                del self._sessions[_digest(session_id)]
                return None
            session.seen = now
            return session

    def end(self, session_id: str | None) -> None:
        """End the session ``session_id`` names, if it is live."""
        if session_id:
            with self._lock:
                self._sessions.pop(_digest(session_id), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    @staticmethod
    def _expired(session: Session, now: dt.datetime) -> bool:
        return now - session.seen > IDLE or now - session.started > LIFETIME

    def _drop_expired(self, now: dt.datetime) -> None:
        for key in [k for k, s in self._sessions.items() if self._expired(s, now)]:
            del self._sessions[key]
