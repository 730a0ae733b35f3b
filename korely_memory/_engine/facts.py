"""Recording, correcting, ending and reading facts: ``MemoryEngine``'s fact methods."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.engine import Connection

from .._store import _marks, _versions, _writes
from .._values import _validation
from .._values._identity import Identity, Scope
from .._values._types import Fact
from .core import EngineCore, Moment


class FactMethods(EngineCore):
    """Recording, correcting, ending and reading facts: ``MemoryEngine``'s fact methods."""

    def remember(
        self,
        who: Identity,
        key: str,
        content: str,
        *,
        scope: Scope | str = Scope.USER,
        valid_from: Moment | None = None,
        valid_until: Moment | None = None,
        source_memory_id: int | None = None,
        max_facts: int | None = None,
        reader: str | None = None,
    ) -> Fact:
        """Record ``content`` under ``key``; a true fact already there is replaced, kept in history.

        Args:
            who: Whose memory: (account, user, agent).
            key: What the fact is about, e.g. ``home-city``; trimmed, lower-cased,
                inner spaces to ``-``.
            content: The fact, 1 to 2000 characters.
            scope: ``Scope.USER``, or ``Scope.ACCOUNT`` to propose a fact that
                reaches the whole account once an administrator confirms it.
            valid_from: When it became true in the world (default: now).
            valid_until: When it stops being true (default: until something
                ends it); a date means through that day (it ends at the next
                midnight UTC). From then on, reads of the present leave it out
                and a reader handed it is told it expired; reads of the past
                and ``history`` keep it. Must be after ``valid_from``.
            source_memory_id: The memory it was read from; forgetting the memory
                ends the fact.
            max_facts: Refuse a new key once ``who`` holds this many facts.
            reader: The writing agent's reader name: it is not told of its own
                change, and the new version counts as handed to it.

        Returns:
            The fact true after the call (the same one when nothing changed).

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
            NotFound: ``source_memory_id`` is not a memory of ``who``.
            LimitExceeded: ``max_facts`` is reached and ``key`` is new.
        """
        who = _validation.identity(who)
        key = _validation.key(key)
        content = _validation.content(content)
        stored_scope = _validation.scope(scope).value
        start = _validation.moment("valid_from", valid_from)
        end = _validation.until("valid_until", valid_until)
        source = _validation.optional_count("source_memory_id", source_memory_id)
        ceiling = _validation.max_facts(max_facts)
        _validation.name("reader", reader, optional=True)

        return self._write(
            lambda conn: _writes.record(
                conn,
                self._writer,
                who,
                key,
                content,
                scope=stored_scope,
                valid_from=start,
                valid_until=end,
                source=source,
                ceiling=ceiling,
                reader=reader,
            )
        )

    def correct(
        self,
        who: Identity,
        key: str,
        content: str,
        *,
        valid_from: Moment | None = None,
        valid_until: Moment | None = None,
        reader: str | None = None,
        admin_rights: bool = True,
        expected_id: int | None = None,
    ) -> Fact:
        """Replace the true fact under ``key`` with ``content``; the old version stays in history.

        An identity's own fact (or proposal) is corrected in place; a confirmed
        account fact only by an administrator of the account.

        Args:
            who: Whose memory: (account, user, agent).
            key: The key of the fact to correct.
            content: The fact as it holds now, 1 to 2000 characters.
            valid_from: When the new content became true in the world (default: now).
            valid_until: When the new content stops being true, as for
                ``remember`` (default: until something ends it).
            reader: The writing agent's reader name: it is not told of its own
                change, and the new version counts as handed to it.
            admin_rights: With False (as the tools call it), an administrator's
                rights do not apply: a correction of a confirmed account fact
                becomes a proposal that replaces it once an administrator
                confirms it, whoever ``who`` is.
            expected_id: The id of the version the caller read and means to correct: when
                another is true under ``key`` by the time the write holds the key (someone
                changed it meanwhile), nothing is written and `NotCurrent` says which is.

        Returns:
            The fact true after the call: the new version, or the proposal.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
            NotFound: No true fact is kept under ``key``.
            NotCurrent: ``expected_id`` is not the true version under ``key``;
                ``current_fact_id`` is the one that is, or None.
            PermissionDenied: It is a confirmed account fact and ``who`` is not
                an administrator of the account.
        """
        who = _validation.identity(who)
        key = _validation.key(key)
        content = _validation.content(content)
        start = _validation.moment("valid_from", valid_from)
        end = _validation.until("valid_until", valid_until)
        _validation.name("reader", reader, optional=True)
        rights = _validation.flag("admin_rights", admin_rights)
        meant = None if expected_id is None else _validation.count("expected_id", expected_id)

        return self._write(
            lambda conn: _writes.correct(
                conn,
                self._writer,
                who,
                key,
                content,
                valid_from=start,
                valid_until=end,
                reader=reader,
                rights=rights,
                expected_id=meant,
            )
        )

    def forget(
        self,
        who: Identity,
        key: str,
        *,
        at: Moment | None = None,
        erase: bool = False,
        reader: str | None = None,
        admin_rights: bool = True,
        expected_id: int | None = None,
    ) -> Fact:
        """End the true fact under ``key``.

        Args:
            who: Whose memory: (account, user, agent).
            key: The key of the fact that no longer holds.
            at: When it stopped being true in the world (default: now); not
                before the fact became true (its ``valid_from``).
            erase: Also remove the words of every version under ``key`` (the
                person asked that it not be kept at all): history shows that
                versions existed, not what they said, and a notice about it says
                ``a fact that was erased``. On SQLite the deleted words leave
                the file too; on PostgreSQL they stay in dead tuples until
                ``scrub``.
            reader: The writing agent's reader name: it is not told of its own
                change.
            admin_rights: With False (as the tools call it), a confirmed account
                fact is never forgotten: only an administrator, through the
                engine, may do that.
            expected_id: The id of the version the caller means to end, as for
                ``correct``: when another is true under ``key``, nothing is ended.

        Returns:
            The version it ended (with no words when erased).

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
            NotFound: No true fact is kept under ``key``.
            NotCurrent: ``expected_id`` is not the true version under ``key``.
            PermissionDenied: It is a confirmed account fact and ``who`` may not end it.
        """
        who = _validation.identity(who)
        key = _validation.key(key)
        end = _validation.moment("at", at)
        erasing = _validation.flag("erase", erase)
        _validation.name("reader", reader, optional=True)
        rights = _validation.flag("admin_rights", admin_rights)
        meant = None if expected_id is None else _validation.count("expected_id", expected_id)

        fact = self._write(
            lambda conn: _writes.end(
                conn,
                self._writer,
                who,
                key,
                at=end,
                erase=erasing,
                reader=reader,
                rights=rights,
                expected_id=meant,
            )
        )
        if erasing:
            self._scrub_words()
        return fact

    def get_facts(
        self,
        who: Identity,
        as_of: Moment | None = None,
        known_as_of: Moment | None = None,
        include_invalidated: bool = False,
        reader: str | None = None,
    ) -> list[Fact]:
        """The facts ``who`` sees, newest first.

        Args:
            who: Whose memory: (account, user, agent).
            as_of: What was true in the world then.
            known_as_of: What the store knew then.
            include_invalidated: Every version in the identity's history, ended
                ones too (versions whose words were removed have none); ``as_of``
                and ``known_as_of`` then play no part.
            reader: Mark the facts returned as handed to this reader, so that it
                is told when they change (a read of what is true now only).

        Returns:
            The facts, most recently recorded first.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
        """
        who = _validation.identity(who)
        at = _validation.moment("as_of", as_of)
        known = _validation.moment("known_as_of", known_as_of)
        _validation.name("reader", reader, optional=True)
        everything = _validation.flag("include_invalidated", include_invalidated)
        marking = reader is not None and at is None and known is None and not everything

        def read(conn: Connection) -> tuple[list[Fact], dict[int, dt.datetime], dt.datetime]:
            now = self._now(conn)
            if everything:
                found = _versions.every_version(conn, who, now=now)
            elif at is None and known is None:
                found = _versions.visible(conn, who, now)
            else:
                found = _versions.as_of(
                    _versions.every_version(conn, who, now=now), at=at, known=known, who=who
                )
            found.sort(key=lambda f: (f.recorded_at, f.id), reverse=True)
            if not marking or reader is None:
                return found, {}, now
            return found, _marks.last_reads(conn, who.account, reader, [f.id for f in found]), now

        found, last, now = self._read(read, snapshot=marking)
        if marking and reader is not None:
            self._write_marks(who, reader, found, last, now)
        return found

    def history(self, who: Identity, key: str) -> list[Fact]:
        """Every version of ``key`` in ``who``'s history, oldest first.

        The history holds the identity's own namespace (its rejected proposals
        included) and the confirmed account facts. Versions whose words were
        removed (forgotten with ``erase=True``, or read from a forgotten memory)
        are listed with no words.

        Args:
            who: Whose memory: (account, user, agent).
            key: The key.

        Returns:
            The versions, oldest recorded first.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
        """
        who = _validation.identity(who)
        key = _validation.key(key)
        return self._read(lambda conn: _versions.every_version(conn, who, key, now=self._now(conn)))
