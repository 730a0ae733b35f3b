"""Erasure, export and upkeep: ``MemoryEngine``'s methods for a person's data and the store."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Connection

from .._db import _database
from .._db._schema import Base
from .._store import _erasure, _export, _import, _marks
from .._values import _validation
from .._values._errors import InvalidRequest
from .._values._types import ErasureReport, TrimReport
from .core import EngineCore, Moment

_YEAR_1 = dt.datetime.min.replace(tzinfo=dt.timezone.utc)


class UpkeepMethods(EngineCore):
    """Erasure, export and upkeep: ``MemoryEngine``'s methods for a person's data and the store."""

    def erase_user(self, account: str, user: str) -> ErasureReport:
        """Delete everything about ``user`` in ``account``, at once and for every reader.

        Every fact, version, memory and mark about them, every change held for
        their approval, and every mark read under a reader of that name, go in
        one transaction that no write about them can interleave with. Confirmed
        account facts they stated stay, with their name replaced by a pseudonym.

        On SQLite the deleted words leave the file too (``report.scrubbed`` says
        whether the write-ahead log could be emptied: a connection holding an
        older snapshot keeps it; run ``scrub`` once it is gone). On PostgreSQL
        the rows are deleted for every reader at once, but their bytes stay in
        dead tuples, index pages, WAL and backups until ``scrub`` (``VACUUM
        FULL``) rewrites the tables.

        Args:
            account: The account.
            user: The person.

        Returns:
            What was removed, by kind.

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        _validation.name("account", account)
        _validation.name("user", user)
        report = self._write(lambda conn: _erasure.erase(conn, account, user, self._now(conn)))
        self._forget_owed(account, user)
        return dataclasses.replace(report, scrubbed=self._scrub_words())

    def scrub(self) -> bool:
        """Make deleted words physically gone from the memory's own tables.

        SQLite: fold the write-ahead log into the file and empty it (deleted
        pages are already zeroed). PostgreSQL: ``VACUUM FULL`` each of the
        memory's tables, which rewrites it without dead rows and locks it
        meanwhile; WAL segments and backups taken before still hold what they
        held.

        Returns:
            True when nothing deleted is left in the tables' files.
        """
        tables = list(Base.metadata.sorted_tables)
        with self._serial:
            return _database.scrub(self.db, self.url, tables, self._write_wait)

    def export_user(self, account: str, user: str) -> _export.UserExport:
        """Everything the memory holds about ``user`` in ``account``: a person's right of access.

        Read in one snapshot: every version of every fact in their own namespaces
        (under every agent definition), their proposals, the confirmed account
        facts they stated or confirmed, their memories, the read marks about
        them or read under their name, and the changes held for their approval:
        what ``erase_user`` deletes or makes anonymous. ``export.to_dict()`` is the
        same as JSON-ready data.

        Args:
            account: The account.
            user: The person.

        Returns:
            The export (empty tuples when nothing is held about them).

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        _validation.name("account", account)
        _validation.name("user", user)
        return self._read(
            lambda conn: _export.gather(conn, account, user, self._now(conn)), snapshot=True
        )

    def import_user(
        self,
        export: _export.UserExport | Mapping[str, Any],
        *,
        pseudonym: str | None = None,
        administrator: bool = False,
    ) -> _export.UserExport:
        """Restore a person from what ``export_user`` gave: the inverse of an export and erasure.

        Every version of their facts and proposals and every memory is written
        under a new id, with the times it had; replacement chains, source
        memories and read marks follow the new ids. Confirmed account facts
        are the account's and are not written: given the ``pseudonym`` the
        person's erasure reported, those the database still holds under it
        name the person again. A mark is restored when it is about its
        version's subject and the version is restored, or still in the
        database and the mark was read under the person's own name. All of it
        in one transaction: a refusal or a failure leaves the database as it
        was. A file alone names nobody on the account's facts and grants
        nothing: it cannot prove who was erased.

        Args:
            export: A ``UserExport``, or the JSON-ready data ``to_dict()`` gives
                (as read back from the JSON file), headed
                ``"format": "korely-user-export/1"``.
            pseudonym: The pseudonym ``erase_user`` reported for this person
                (``ErasureReport.pseudonym``), to name them again on the
                account facts they stated or confirmed.
            administrator: Restore the administrator grant the export records.

        Returns:
            What the memory now holds about the person, as ``export_user``
            returns it (with the new ids).

        Raises:
            InvalidRequest: ``format`` is another than ``korely-user-export/1``,
                a field is missing or breaks its rule (``field`` names it, such
                as ``facts[2].key``), the memory already holds something of
                the person (``user``): an import never merges into their data,
                or no erasure in the account gave ``pseudonym``.
        """
        data = export.to_dict() if isinstance(export, _export.UserExport) else export
        parsed = _import.parse(data)
        if pseudonym is not None:
            _validation.name("pseudonym", pseudonym)

        def work(conn: Connection) -> _export.UserExport:
            _import.restore(
                conn, parsed, self._words, pseudonym=pseudonym, administrator=administrator
            )
            return _export.gather(conn, parsed.account, parsed.user, self._now(conn))

        return self._write(work)

    def delete_reader(self, account: str, reader: str) -> int:
        """Delete every read mark kept for ``reader`` in ``account``.

        Returns:
            How many marks were deleted.

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        _validation.name("account", account)
        _validation.name("reader", reader)
        return self._write(lambda conn: _marks.delete_reader(conn, account, reader))

    def trim(self, now: Moment | None = None) -> TrimReport:
        """Remove marks 90 days after their last read, and marks whose change was told; end, as
        expired, the facts whose ``valid_until`` came (reads leave them out already: this
        only settles their rows).

        Schedule it: hourly is plenty (a cron job, a systemd timer, or a loop
        in your application).

        Args:
            now: The moment to trim marks as of (default: now). Facts are ended
                only once their ``valid_until`` came by the engine's clock.

        Returns:
            What was removed.

        Raises:
            InvalidRequest: ``now`` is within 90 days of year 1.
        """
        moment = _validation.moment("now", now)
        if moment is not None and moment - _YEAR_1 < _marks.LIFETIME:
            raise InvalidRequest(
                "now", f"must be at least {_marks.LIFETIME.days} days after year 1"
            )

        def work(conn: Connection) -> TrimReport:
            clock = self._now(conn)
            return _erasure.trim(conn, moment or clock, expire_by=min(moment or clock, clock))

        return self._write(work)
