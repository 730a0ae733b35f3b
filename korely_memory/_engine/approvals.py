"""Captured facts held for the person's approval: ``MemoryEngine``'s approval methods."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from .._store import _pending, _versions, _writes
from .._values import _expiry, _validation
from .._values._errors import NotCurrent, NotFound
from .._values._identity import Identity
from .._values._types import Fact, PendingFact
from .core import EngineCore


class ApprovalMethods(EngineCore):
    """Captured facts held for the person's approval: ``MemoryEngine``'s approval methods."""

    def pending(self, who: Identity) -> list[PendingFact]:
        """The changes ``capture(..., hold_for_owner=True)`` holds for ``who``'s approval.

        Args:
            who: Whose: (account, user, agent); another identity's are never listed.

        Returns:
            The held changes, oldest first.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
        """
        who = _validation.identity(who)
        return self._read(lambda conn: _pending.waiting(conn, who))

    def approve(self, who: Identity, pending_id: int, *, reader: str | None = None) -> Fact | None:
        """Write a held change as the person's own statement, and stop holding it.

        In one transaction: the change is taken off the list and written as
        ``remember``, ``correct`` or ``forget`` write it (a replaced version is
        kept in history, ended as ``stated``, ``corrected`` or ``forgotten``, and
        the readers handed it are told once). It is written only while the key
        holds the version it was drawn against (``drawn_against``; none, for a
        ``remember``): once someone wrote the key since, or the fact ended,
        approving it raises ``NotCurrent`` and changes nothing (decline it). Of two
        approvals of the same change at once, one writes it and the other raises
        ``NotFound``.

        Args:
            who: Whose: (account, user, agent), the identity it was captured for.
            pending_id: The held change's id (``pending`` lists them).
            reader: The approving client's reader name: it is not told of this
                change, and the new version counts as handed to it.

        Returns:
            The fact true after it, or the version a ``forget`` ended; None when a
            ``forget`` found nothing to end.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
            NotFound: ``who`` holds no change with this id.
            NotCurrent: The key no longer holds the version the change was drawn
                against; ``current_fact_id`` names the one that holds, if any.
        """
        who = _validation.identity(who)
        pid = _validation.count("pending_id", pending_id)
        _validation.name("reader", reader, optional=True)

        def work(conn: Connection) -> Fact | None:
            _versions.lock_person(conn, who.account, who.user, reader)
            held = _pending.take(conn, who, pid)
            if held is None:
                raise NotFound(f"no pending fact {pid} for this identity")
            return self._approved(conn, who, held, reader)

        return self._write(work)

    def decline(self, who: Identity, pending_id: int) -> PendingFact:
        """Drop a held change: nothing of it is written.

        Args:
            who: Whose: (account, user, agent), the identity it was captured for.
            pending_id: The held change's id (``pending`` lists them).

        Returns:
            The change dropped.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
            NotFound: ``who`` holds no change with this id.
        """
        who = _validation.identity(who)
        pid = _validation.count("pending_id", pending_id)

        def work(conn: Connection) -> PendingFact:
            _versions.lock_person(conn, who.account, who.user)
            held = _pending.take(conn, who, pid)
            if held is None:
                raise NotFound(f"no pending fact {pid} for this identity")
            return held

        return self._write(work)

    def _approved(
        self, conn: Connection, who: Identity, held: PendingFact, reader: str | None
    ) -> Fact | None:
        """Write ``held`` through the path of its operation, as the person's own statement, if
        the key still holds the version it was drawn against."""
        w = self._writer
        _versions.lock_key(conn, who, held.key)
        own = _versions.own_current(conn, who, held.key)
        holds = own if own is not None and _expiry.is_live(own, w.now(conn)) else None
        if (holds.id if holds is not None else None) != held.drawn_against:
            now = f"version {holds.id} holds now" if holds is not None else "none holds now"
            raise NotCurrent(
                f"pending fact {held.id} was drawn against "
                + (f"version {held.drawn_against}" if held.drawn_against else "no fact")
                + f" of {held.key!r}, and {now}: approving it would overwrite what was "
                "written since; decline it",
                holds.id if holds is not None else None,
            )
        if held.operation == "forget":
            if holds is None:
                return None
            return _writes.end(conn, w, who, held.key, reader=reader, rights=False)
        assert held.content is not None
        if holds is not None:
            return _writes.correct(
                conn, w, who, held.key, held.content, reader=reader, rights=False
            )
        return _writes.record(conn, w, who, held.key, held.content, reader=reader)
