"""The review of account facts and the administrators: ``MemoryEngine``'s review methods."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from .._store import _review
from .._values import _validation
from .._values._errors import PermissionDenied
from .._values._identity import Identity
from .._values._types import Fact
from .core import EngineCore


class ReviewMethods(EngineCore):
    """The review of account facts and the administrators: ``MemoryEngine``'s review methods."""

    def confirm(self, admin: Identity, fact_id: int) -> Fact:
        """Give a proposed account fact its reach: every user of the account sees it.

        Args:
            admin: An administrator of the account (their agent does not matter).
            fact_id: The proposal's id (``proposals`` lists them).

        Returns:
            The confirmed fact; a confirmed one is returned as it is.

        Raises:
            PermissionDenied: ``admin`` is not an administrator of the account.
            NotFound: No fact with this id in the account.
            NotCurrent: The proposal has ended; ``current_fact_id`` names what replaced it.
            InvalidRequest: The fact is not a proposal.
        """
        return self._review(admin, fact_id, confirm=True)

    def reject(self, admin: Identity, fact_id: int) -> Fact:
        """Refuse a proposed account fact: it ends, is shown to nobody, and is kept for review.

        Args:
            admin: An administrator of the account.
            fact_id: The proposal's id.

        Returns:
            The rejected fact.

        Raises:
            PermissionDenied: ``admin`` is not an administrator of the account.
            NotFound: No fact with this id in the account.
            NotCurrent: The proposal has ended.
            InvalidRequest: The fact is not a proposal.
        """
        return self._review(admin, fact_id, confirm=False)

    def _review(self, admin: Identity, fact_id: int, *, confirm: bool) -> Fact:
        admin = _validation.identity(admin, "admin")
        reviewer = admin.user
        if reviewer is None:
            raise PermissionDenied("a review needs an administrator: admin.user is None")
        fid = _validation.count("fact_id", fact_id)

        def work(conn: Connection) -> Fact:
            if not self._admin(conn, admin.account, reviewer):
                raise PermissionDenied(
                    f"{reviewer!r} is not an administrator of account {admin.account!r}"
                )
            return _review.decide(
                conn, admin.account, reviewer, fid, confirm=confirm, now=self._now(conn)
            )

        return self._write(work)

    def proposals(self, account: str, agent: str | None = None) -> list[Fact]:
        """The review queue: account facts waiting for an administrator, oldest first.

        Args:
            account: The account.
            agent: Only the proposals made through this agent definition.

        Returns:
            The proposals.

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        _validation.name("account", account)
        _validation.name("agent", agent, optional=True)
        return self._read(lambda conn: _review.queue(conn, account, agent, self._now(conn)))

    def grant_admin(self, account: str, user: str) -> None:
        """Make ``user`` an administrator of ``account``.

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        _validation.name("account", account)
        _validation.name("user", user)
        self._write(lambda conn: _review.grant(conn, account, user))

    def revoke_admin(self, account: str, user: str) -> None:
        """Take administration of ``account`` away from ``user``.

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        _validation.name("account", account)
        _validation.name("user", user)
        self._write(lambda conn: _review.revoke(conn, account, user))

    def is_admin(self, account: str, user: str) -> bool:
        """Whether ``user`` administers ``account`` (the application's ``is_admin`` when given).

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        _validation.name("account", account)
        _validation.name("user", user)
        return self._read(lambda conn: self._admin(conn, account, user))
