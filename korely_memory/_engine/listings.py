"""Who and what the memory holds, for an operator: ``engine.listings``, a ``Listings``.

They read across identities (every person, agent and reader of an account, or of every
account) and return plain values: lists of names, and dicts of names and counts that print
as a table or as JSON as they are. The ``korely`` command's ``people``, ``agents``,
``readers``, ``admins`` and ``stats`` print them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from .._db import _migrations
from .._store import _listings, _versions
from .._values import _validation
from .._values._types import Fact
from .core import EngineCore, _twin


class Listings:
    """Who and what the memory holds, for an operator: ``engine.listings``.

    Each method reads across identities and returns plain values; each has an async twin
    (``apeople``, ``astats``...) that runs it in a worker thread.

    Example:
        ```python
        for person in engine.listings.people("acme"):
            print(person["user"], person["facts"])
        print(engine.listings.stats()["facts"])
        ```
    """

    def __init__(self, core: EngineCore) -> None:
        self._core = core

    def __repr__(self) -> str:
        return f"Listings({self._core.url.render_as_string(hide_password=True)!r})"

    def people(self, account: str | None = None) -> list[dict[str, Any]]:
        """The people the memory holds facts or memories of, by account and name.

        Args:
            account: Only this account (default: every account).

        Returns:
            One dict a person: ``account``, ``user``, ``facts`` (their true facts and
            proposals), ``versions`` (every version of them), ``memories``.

        Raises:
            InvalidRequest: ``account`` breaks the name rule.
        """
        _validation.name("account", account, optional=True)
        return self._core._read(lambda conn: _listings.people(conn, account), snapshot=True)

    def agents(self, account: str | None = None) -> list[dict[str, Any]]:
        """The agent definitions that hold facts or memories, by account and name.

        Args:
            account: Only this account (default: every account).

        Returns:
            One dict an agent: ``account``, ``agent``, ``people`` (those it holds something
            of), ``facts`` (its true facts and proposals, its team memory too),
            ``account_facts`` (its true account facts), ``memories``.

        Raises:
            InvalidRequest: ``account`` breaks the name rule.
        """
        _validation.name("account", account, optional=True)
        return self._core._read(lambda conn: _listings.agents(conn, account), snapshot=True)

    def readers(self, account: str | None = None) -> list[dict[str, Any]]:
        """The readers facts were handed to, by account and name.

        Args:
            account: Only this account (default: every account).

        Returns:
            One dict a reader: ``account``, ``reader``, ``marks`` (its read marks),
            ``people`` (those the marks are about), ``changes_untold`` (changes not yet told
            to it), ``last_read_at`` (its latest read, to the hour, a UTC ``datetime``).

        Raises:
            InvalidRequest: ``account`` breaks the name rule.
        """
        _validation.name("account", account, optional=True)
        return self._core._read(lambda conn: _listings.readers(conn, account))

    def accounts(self) -> list[str]:
        """Every account the memory holds facts, memories, read marks or administrators of.

        Returns:
            Their names, sorted.
        """
        return self._core._read(_listings.accounts)

    def admins(self, account: str) -> list[str]:
        """The administrators of ``account`` on the memory's own list (``grant_admin``), not
        those an ``is_admin`` of the application names.

        Args:
            account: The account.

        Returns:
            Their names, sorted.

        Raises:
            InvalidRequest: ``account`` breaks the name rule.
        """
        _validation.name("account", account)
        return self._core._read(lambda conn: _listings.administrators(conn, account))

    def holds_user(self, account: str, user: str) -> bool:
        """Whether the memory holds anything about ``user`` in ``account``: what ``erase_user``
        would remove or give a pseudonym (facts, proposals, memories, marks about them or read
        under their name, a grant, changes held for their approval, account facts they stated
        or confirmed).

        Args:
            account: The account.
            user: The person.

        Returns:
            True when it holds something.

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        _validation.name("account", account)
        _validation.name("user", user)
        return self._core._read(
            lambda conn: _listings.holds_user(conn, account, user), snapshot=True
        )

    def find_fact(self, fact_id: int) -> Fact | None:
        """The version with this id, whichever account holds it, as stored: for an operator who
        names a fact by its id alone (a proposal to review). No identity's view applies.

        Args:
            fact_id: The version's id.

        Returns:
            The version, or None when there is none.

        Raises:
            InvalidRequest: ``fact_id`` is not an integer from 0 to 2**63 - 1.
        """
        _validation.count("fact_id", fact_id)
        return self._core._read(lambda conn: _versions.in_any_account(conn, fact_id))

    def stats(self) -> dict[str, Any]:
        """How much the memory holds, counted in one snapshot.

        Returns:
            ``accounts``, ``people``, ``facts`` (true ones), ``fact_versions``, ``proposals``,
            ``memories``, ``marks``, ``changes_untold``, ``administrators``, ``erasures``
            (integers); ``size_bytes`` (the SQLite file and its log, or the memory's tables and
            indexes on PostgreSQL; None in memory) and ``schema_revision``.
        """

        def work(conn: Connection) -> dict[str, Any]:
            found: dict[str, Any] = dict(_listings.counts(conn))
            found["size_bytes"] = _listings.size(conn, self._core.url)
            found["schema_revision"] = _migrations.state(conn)
            return found

        return self._core._read(work, snapshot=True)

    apeople = _twin(people)
    aagents = _twin(agents)
    areaders = _twin(readers)
    aaccounts = _twin(accounts)
    aadmins = _twin(admins)
    aholds_user = _twin(holds_user)
    afind_fact = _twin(find_fact)
    astats = _twin(stats)
