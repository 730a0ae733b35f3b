"""MemoryEngine: the one entry object. It owns connections and transactions.

Every write runs in one transaction (``_database.run_write``): a caller never
sees half a change, and a failure leaves the database as it was. A read runs
in one snapshot; a read with a reader then writes its marks in a short
transaction of its own that gives way rather than fail the read.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import DBAPIError

from . import (
    _cache,
    _capture,
    _database,
    _erasure,
    _export,
    _marks,
    _memories,
    _migrations,
    _read_path,
    _review,
    _validation,
    _versions,
    _word_index,
    _writes,
)
from ._errors import InvalidRequest, NotFound, PermissionDenied
from ._identity import Identity, Scope
from ._ranking import Embedder, Ranking
from ._schema import Base
from ._tokens import TokenCounter
from ._types import (
    CaptureReport,
    Change,
    ContextBlock,
    ErasureReport,
    Fact,
    Memory,
    SearchResult,
    TrimReport,
)
from ._word_index import AS_RECORDED, _AsRecorded
from ._words import Words
from .capture import Extractor, operations_from

P = ParamSpec("P")
R = TypeVar("R")
E = TypeVar("E")

IsAdmin = Callable[[str, str], bool]
Clock = Callable[[], dt.datetime]
Moment = dt.datetime | dt.date
MARK_WAIT = 0.2  # seconds a read waits for a lock on its marks before giving way
OWED_READERS = 1024  # readers whose unmarked reads this process remembers


def _twin(
    method: Callable[Concatenate[E, P], R],
) -> Callable[Concatenate[E, P], Coroutine[Any, Any, R]]:
    """The async twin of a method: the same body, run in a worker thread."""

    @functools.wraps(method)
    async def twin(self: E, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = "a" + method.__name__
    twin.__doc__ = (
        f"Async twin of :meth:`{method.__name__}`: the same call, run in a worker thread.\n\n"
        "Cancelling the awaiting task does not stop the call: the thread runs on, and a write\n"
        "commits (or not) as if nothing had happened. A caller that retries after a timeout\n"
        "should read before writing again, or rely on the writes being idempotent: recording\n"
        "the same content under a key twice changes nothing."
    )
    return cast(Callable[Concatenate[E, P], Coroutine[Any, Any, R]], twin)


class _Rehearsed(Exception):
    """Rolls a dry run's transaction back, carrying what it would have done."""

    def __init__(self, report: CaptureReport) -> None:
        super().__init__("dry run")
        self.report = report


def utcnow() -> dt.datetime:
    """The system clock, in UTC."""
    return dt.datetime.now(dt.timezone.utc)


class MemoryEngine:
    """Durable, correctable memory for agents.

    Args:
        url: A SQLAlchemy URL. ``None`` opens ``$KORELY_DATABASE_URL``, else
            the SQLite file ``./korely-memory.db``. A ``postgresql://`` URL
            needs the ``postgres`` extra (psycopg 3). The schema is created on
            first use; see ``auto_upgrade`` for one made by an earlier version.
        tokenizer: Counts the tokens of a text (``token_budget`` is in these);
            by default tiktoken's ``cl100k_base``, shipped offline.
        embed: Ranks facts and memories by meaning instead of words: a
            LangChain ``Embeddings``, a LlamaIndex embedding, or a function
            from a list of texts to a list of vectors.
        is_admin: ``is_admin(account, user) -> bool``, the application's own
            rule for who administers an account, instead of ``grant_admin``.
        write_wait: Seconds a writer waits for another writer's lock.
        clock: Where the engine takes the time of what it records, in UTC;
            by default the system clock. A version never ends before it was
            recorded, whatever the clock says.
        language: The language words are stemmed in, for the word indexes and
            relevance (a Snowball stemmer name such as ``"english"``,
            ``"italian"``, ``"german"``), or None to only fold case and accents.
            A database records the language it was created with; by default
            the engine uses it (English for a new database), and a different
            one is refused, so that index and queries always agree.
        embed_model: A name for the embedding model of ``embed``: with one,
            vectors are kept in the database under that name, so a new process
            does not embed every stored text again. Change it when the model
            changes.
        auto_upgrade: Upgrade a database whose schema an earlier version made,
            at start, under a lock; False refuses it with a ``SchemaVersionError``
            naming ``korely db upgrade``. By default True for SQLite and False for
            PostgreSQL, where upgrading is a deployment step: processes of the
            earlier version may still be running. A schema newer than this
            version knows is always refused.

    Raises:
        SchemaVersionError: The database's schema is not one this version works
            with (see ``auto_upgrade``).

    Example:
        ```python
        engine = MemoryEngine("sqlite:///memory.db")
        who = Identity(account="acme", user="giulia", agent="support-copilot")
        engine.remember(who, "home-city", "Giulia lives in Rome")
        print(engine.get_context(who, "Where does Giulia live?").text)
        ```
    """

    def __init__(
        self,
        url: str | URL | None = None,
        *,
        tokenizer: Callable[[str], int] | None = None,
        embed: Embedder | None = None,
        is_admin: IsAdmin | None = None,
        write_wait: float = _database.WRITE_WAIT,
        clock: Clock | None = None,
        language: str | _AsRecorded | None = AS_RECORDED,
        embed_model: str | None = None,
        auto_upgrade: bool | None = None,
    ) -> None:
        self.url = _database.resolve_url(url)
        self.db = _database.create(self.url, write_wait=write_wait)
        self._write_wait = write_wait
        self._is_admin = is_admin
        self._now = clock or utcnow
        self._tokens = TokenCounter(tokenizer)
        # Versions handed over by reads whose marks gave way, marked by the reader's next read.
        self._owed: OrderedDict[tuple[str, str], dict[int, Fact]] = OrderedDict()
        self._owed_lock = threading.Lock()
        # In-memory SQLite is one connection shared by every thread: take turns on it.
        self._serial: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if _database.is_memory_sqlite(self.url) else contextlib.nullcontext()
        )
        try:
            upgrading = (
                _migrations.auto_upgrade_default(self.url)
                if auto_upgrade is None
                else _validation.flag("auto_upgrade", auto_upgrade)
            )
            _migrations.prepare(self.db, auto_upgrade=upgrading)
        except BaseException:
            self.db.dispose()  # no connection outlives an engine that could not start
            raise
        agreed = self._write(lambda conn: _word_index.agreed_language(conn, language))
        self._words = Words(agreed)
        self._ranking = Ranking(self._words, embed, embed_model)
        self._writer = _writes.Writer(self._words, self._now, self._admin)

    @property
    def language(self) -> str | None:
        """The language words are stemmed in (as the database records it), or None."""
        return self._words.language

    def count_tokens(self, text: str) -> int:
        """The engine's token count of any text: what ``token_budget`` is counted in.

        Args:
            text: Any text; it is counted, not kept.

        Returns:
            The number of tokens.
        """
        return self._tokens.exact(text)

    def _write(self, work: Callable[[Connection], R]) -> R:
        with self._serial:
            return _database.run_write(self.db, work)

    def _read(self, work: Callable[[Connection], R], *, snapshot: bool = False) -> R:
        """Run ``work`` on a read-only connection; ``snapshot``: all its statements from one."""
        with self._serial:
            return _database.run_read(self.db, work, snapshot=snapshot)

    def close(self) -> None:
        """Close every pooled connection."""
        self.db.dispose()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryEngine({self.url.render_as_string(hide_password=True)!r})"

    # -- writing facts -------------------------------------------------------------

    def remember(
        self,
        who: Identity,
        key: str,
        content: str,
        *,
        scope: Scope | str = Scope.USER,
        valid_from: Moment | None = None,
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
        source = _validation.optional_count("source_memory_id", source_memory_id)
        ceiling = _validation.optional_count("max_facts", max_facts)
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
        reader: str | None = None,
        admin_rights: bool = True,
    ) -> Fact:
        """Replace the true fact under ``key`` with ``content``; the old version stays in history.

        An identity's own fact (or proposal) is corrected in place; a confirmed
        account fact only by an administrator of the account.

        Args:
            who: Whose memory: (account, user, agent).
            key: The key of the fact to correct.
            content: The fact as it holds now, 1 to 2000 characters.
            valid_from: When the new content became true in the world (default: now).
            reader: The writing agent's reader name: it is not told of its own
                change, and the new version counts as handed to it.
            admin_rights: With False (as the tools call it), an administrator's
                rights do not apply: a correction of a confirmed account fact
                becomes a proposal that replaces it once an administrator
                confirms it, whoever ``who`` is.

        Returns:
            The fact true after the call: the new version, or the proposal.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
            NotFound: No true fact is kept under ``key``.
            PermissionDenied: It is a confirmed account fact and ``who`` is not
                an administrator of the account.
        """
        who = _validation.identity(who)
        key = _validation.key(key)
        content = _validation.content(content)
        start = _validation.moment("valid_from", valid_from)
        _validation.name("reader", reader, optional=True)
        rights = _validation.flag("admin_rights", admin_rights)

        return self._write(
            lambda conn: _writes.correct(
                conn,
                self._writer,
                who,
                key,
                content,
                valid_from=start,
                reader=reader,
                rights=rights,
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
    ) -> Fact:
        """End the true fact under ``key``.

        Args:
            who: Whose memory: (account, user, agent).
            key: The key of the fact that no longer holds.
            at: When it stopped being true in the world (default: now).
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

        Returns:
            The version it ended (with no words when erased).

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
            NotFound: No true fact is kept under ``key``.
            PermissionDenied: It is a confirmed account fact and ``who`` may not end it.
        """
        who = _validation.identity(who)
        key = _validation.key(key)
        end = _validation.moment("at", at)
        erasing = _validation.flag("erase", erase)
        _validation.name("reader", reader, optional=True)
        rights = _validation.flag("admin_rights", admin_rights)

        fact = self._write(
            lambda conn: _writes.end(
                conn, self._writer, who, key, at=end, erase=erasing, reader=reader, rights=rights
            )
        )
        if erasing:
            self._scrub_words()
        return fact

    # -- review of account facts ------------------------------------------------

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
                conn, admin.account, reviewer, fid, confirm=confirm, now=self._now()
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
        return self._read(lambda conn: _review.queue(conn, account, agent))

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

    def _admin(self, conn: Connection, account: str, user: str) -> bool:
        if self._is_admin is not None:
            return bool(self._is_admin(account, user))
        return _review.listed(conn, account, user)

    # -- reading facts ------------------------------------------------------------

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
            include_invalidated: Every version, ended ones too (versions whose
                words were removed have none).
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

        def read(conn: Connection) -> tuple[list[Fact], dict[int, dt.datetime]]:
            if everything:
                found = _versions.every_version(conn, who)
            elif at is None and known is None:
                found = _versions.visible(conn, who)
            else:
                found = _versions.as_of(
                    _versions.every_version(conn, who), at=at, known=known, who=who
                )
            found.sort(key=lambda f: (f.recorded_at, f.id), reverse=True)
            if not marking or reader is None:
                return found, {}
            return found, _marks.last_reads(conn, who.account, reader, [f.id for f in found])

        found, last = self._read(read, snapshot=marking)
        if marking and reader is not None:
            self._write_marks(who, reader, found, [], last, self._now(), None)
        return found

    def history(self, who: Identity, key: str) -> list[Fact]:
        """Every version of ``key`` that ``who`` may see, oldest first.

        Versions whose words were removed (forgotten with ``erase=True``, or read
        from a forgotten memory) are listed with no words.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
        """
        who = _validation.identity(who)
        key = _validation.key(key)
        return self._read(lambda conn: _versions.every_version(conn, who, key))

    # -- the context block --------------------------------------------------------

    def get_context(
        self,
        who: Identity,
        query: str | None = None,
        *,
        reader: str | None = None,
        token_budget: int = _validation.DEFAULT_BUDGET,
        changes: str | Sequence[str] | None = None,
        as_of: Moment | None = None,
        known_as_of: Moment | None = None,
        hold: bool | float | dt.timedelta | None = None,
    ) -> ContextBlock:
        """The block an agent reads at the start of a conversation, fitted to ``token_budget``.

        Args:
            who: Whose memory: (account, user, agent).
            query: What the conversation is about (the latest user message):
                facts and memories are chosen by relevance to it.
            reader: The reading agent's own name. The facts handed over are
                marked, and a block tells, once, the facts this reader was
                handed that have changed since.
            token_budget: The most tokens the block may take (50 to 8000).
            changes: Which kinds of change to tell: None (every kind for a
                person's memory; for memory with no end user, only ``corrected``,
                ``forgotten``, ``stated`` and ``erased``), ``"all"``, or a list of
                end causes.
            as_of: The block as it was true in the world then (nothing is marked).
            known_as_of: The block as the store knew it then (nothing is marked).
            hold: Hold the changes the block shows instead of spending them:
                True (10 minutes), seconds, or a ``timedelta``. No other read of
                this reader shows them meanwhile; ``acknowledge(block.receipt)``
                spends them; once the hold runs out unacknowledged, the next read
                tells them again.

        Returns:
            The block. ``block.text`` goes into the prompt.

        Raises:
            InvalidRequest: An argument breaks a rule (a budget the stable note
                does not fit in, with a tokenizer of yours, among them).
        """
        request = _read_path.ReadRequest.of(
            who,
            query,
            reader=reader,
            token_budget=token_budget,
            changes=changes,
            as_of=as_of,
            known_as_of=known_as_of,
            hold=hold,
            default_hold=_validation.DEFAULT_HOLD,
        )
        now = self._now()
        held = _read_path.new_hold(request, now)
        token = held.token if held else None
        owed = self._owed_to(request.who.account, request.reader) if request.marking else []

        def read(
            conn: Connection,
        ) -> tuple[_read_path.Gathered, ContextBlock, dict[int, dt.datetime]]:
            gathered = _read_path.gather(conn, request, self._ranking, self._tokens, now, owed)
            block = _read_path.draft(
                gathered, request, self._ranking, self._tokens, token=token, conn=conn
            )
            if not request.marking or request.reader is None:
                return gathered, block, {}
            ids = [f.id for f in block.facts]
            return (
                gathered,
                block,
                _marks.last_reads(conn, request.who.account, request.reader, ids),
            )

        # A read that marks, or of the past, takes several statements from one snapshot; the
        # common read is one statement (two or three with memories) and needs no transaction.
        gathered, block, last = self._read(read, snapshot=request.marking or request.of_the_past)
        self._keep_vectors()
        if not request.marking:
            return block
        assert request.reader is not None

        def redraw(told: Sequence[Change], more: int | None) -> ContextBlock:
            return _read_path.draft(
                gathered,
                request,
                self._ranking,
                self._tokens,
                changes=told,
                changed_more=more,
                token=token,
            )

        claims = gathered.pending.marks_settled_by(block.changed)
        claimed = self._write_marks(
            request.who, request.reader, block.facts, claims, last, now, held
        )
        return _read_path.settle(block, gathered, claimed, redraw)

    def release(self, receipt: str) -> int:
        """Let go of the changes a held block showed, without spending them: the model never got
        them (the call failed, the run was interrupted), so the next read tells them again at once
        instead of when the hold runs out.

        A receipt already acknowledged, released, or whose hold ran out and whose changes another
        read took, releases nothing and is no error.

        Args:
            receipt: ``block.receipt`` of a block read with ``hold=``.

        Returns:
            How many marks it let go of.

        Raises:
            InvalidRequest: ``receipt`` is not a receipt a block carried.
        """
        token, ids = _read_path.parse_receipt(receipt)
        return self._write(lambda conn: _marks.release(conn, token, ids))

    def _keep_vectors(self) -> None:
        """Keep the vectors a read computed, so no process embeds the same text again."""
        if self._ranking.has_unsaved_vectors:
            self._write(self._ranking.save_vectors)

    def search(self, who: Identity, query: str, *, limit: int = 10) -> SearchResult:
        """The facts and memories ``who`` may see that are about ``query``, most relevant first.

        Unlike a block, which shows what fits its budget, a search looks at every
        true fact of the identity (and every memory whose words match), so the
        agent finds a fact the block left out, and the key to correct it under.

        Args:
            who: Whose memory: (account, user, agent).
            query: What to look for, in the person's words.
            limit: The most facts, and the most memories, returned.

        Returns:
            The facts and the memories found, each most relevant first.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
        """
        who = _validation.identity(who)
        text = _validation.query(query) or ""
        top = _validation.count("limit", limit)

        def read(conn: Connection) -> tuple[list[Fact], list[Memory]]:
            facts_found = self._ranking.matching_facts(text, _versions.visible(conn, who), conn)
            if self._ranking.reads_every_fact:
                return facts_found, self._ranking.memories(text, _memories.recent(conn, who), conn)
            terms = self._words.distinct(text)
            ids = [i for i, _, _ in _memories.matching(conn, who, terms, None)[:top]]
            found = _memories.whole(conn, ids)
            return facts_found, [found[i] for i in ids if i in found]

        facts_found, kept = self._read(read)
        self._keep_vectors()
        return SearchResult(tuple(facts_found[:top]), tuple(kept[:top]))

    def acknowledge(self, receipt: str) -> int:
        """Spend the changes a held block showed: the model has them.

        A receipt acknowledged twice, or after its hold ran out and another read
        took the changes, spends nothing and is no error.

        Args:
            receipt: ``block.receipt`` of a block read with ``hold=``.

        Returns:
            How many marks it spent (0 when there was nothing left to spend).

        Raises:
            InvalidRequest: ``receipt`` is not a receipt a block carried.
        """
        token, ids = _read_path.parse_receipt(receipt)
        return self._write(lambda conn: _marks.acknowledge(conn, token, ids, self._now()))

    def _write_marks(
        self,
        who: Identity,
        reader: str,
        shown: Sequence[Fact],
        claims: Sequence[int],
        last_reads: dict[int, dt.datetime],
        now: dt.datetime,
        hold: _marks.Hold | None,
    ) -> set[int] | None:
        """Write a read's marks and claims; returns the marks claimed, None when it gave way.

        It waits at most ``MARK_WAIT`` for a lock another transaction holds, and
        gives way to that and to a lost connection, never failing the read.
        Versions a read that gave way handed over are owed marks, written by
        the reader's next read in this process.
        """
        slot = (who.account, reader)
        owed = self._owed_to(who.account, reader)
        work = _read_path.mark_work(shown, claims, last_reads, owed, now, hold)
        if not work:
            return set()
        try:
            with self._serial, _database.writing_within(self.db, MARK_WAIT) as conn:
                _versions.lock_person(conn, who.account, who.user, reader)
                _marks.hand_over(conn, who.account, reader, work.hand_over, now)
                _marks.refresh(conn, who.account, reader, work.refresh, now)
                claimed = _marks.claim(conn, who.account, reader, work.claim, now, work.hold)
        except DBAPIError as exc:
            if not _database.gives_way(exc):
                raise
            self._owe(slot, [*owed, *shown])
            return None
        if owed:
            with self._owed_lock:
                self._owed.pop(slot, None)
        return claimed

    def _owed_to(self, account: str, reader: str | None) -> list[Fact]:
        """Versions this reader was handed by reads that gave way, still to be marked."""
        with self._owed_lock:
            return list(self._owed.get((account, reader or ""), {}).values())

    def _owe(self, slot: tuple[str, str], handed: Sequence[Fact]) -> None:
        with self._owed_lock:
            kept = self._owed.setdefault(slot, {})
            kept.update((f.id, f) for f in handed)
            self._owed.move_to_end(slot)
            while len(self._owed) > OWED_READERS:
                self._owed.popitem(last=False)

    # -- memories -----------------------------------------------------------------

    def capture(
        self,
        who: Identity,
        messages: Sequence[tuple[str, str]],
        *,
        extractor: Extractor,
        dry_run: bool = False,
        max_facts: int | None = None,
        reader: str | None = None,
    ) -> CaptureReport:
        """Keep a conversation excerpt and the facts an extractor draws from it.

        The extractor is called with the excerpt and ``who``'s true facts (so that
        it reuses their keys) and answers with ``Operation``s. The excerpt is kept
        as a memory, and the operations are written with it as their source, in
        one transaction: a fact they replace ends with ``read_from_memory``, and
        forgetting the memory ends what was read from it. They never touch
        another identity and never use an administrator's rights: an account-wide
        fact, or a change to a confirmed one, becomes a proposal for review. An
        operation that would write what its key already says changes nothing;
        one the engine refuses is reported and skipped. Capturing the same
        excerpt again writes nothing and does not call the extractor.

        Args:
            who: Whose memory: (account, user, agent).
            messages: The excerpt, as ``(role, text)`` pairs.
            extractor: ``(messages, facts) -> Sequence[Operation]``.
            dry_run: Report what would be done, and write nothing.
            max_facts: Refuse a new key once ``who`` holds this many facts.
            reader: The writing agent's reader name: it is not told of its own changes.

        Returns:
            The memory kept and what became of each operation.

        Raises:
            InvalidRequest: An argument breaks a rule, or the extractor's answer is
                not a list of operations (nothing is written).
        """
        who = _validation.identity(who)
        said = _capture.excerpt(messages)
        ceiling = _validation.optional_count("max_facts", max_facts)
        _validation.name("reader", reader, optional=True)
        rehearsal = _validation.flag("dry_run", dry_run)
        turns = [(role, text) for role, text in messages]
        if self._read(lambda conn: _capture.already_kept(conn, who, said)):
            return CaptureReport(None, dry_run=rehearsal, already_captured=True)
        known = self._read(lambda conn: _versions.visible(conn, who))
        operations = operations_from(extractor(turns, known))

        def work(conn: Connection) -> CaptureReport:
            _versions.lock_person(conn, who.account, who.user, reader)
            if _capture.already_kept(conn, who, said):  # captured meanwhile
                return CaptureReport(None, dry_run=rehearsal, already_captured=True)
            memory = _memories.add(conn, who, said, self._now(), self._words)
            steps = _capture.apply(
                conn, self._writer, who, memory.id, operations, ceiling=ceiling, reader=reader
            )
            report = CaptureReport(memory, tuple(steps), dry_run=rehearsal)
            if rehearsal:
                raise _Rehearsed(dataclasses.replace(report, memory=None))
            return report

        try:
            return self._write(work)
        except _Rehearsed as rehearsed:
            return rehearsed.report

    def add_memory(self, who: Identity, content: str) -> Memory:
        """Keep free text (a conversation excerpt, a note) for recall.

        Args:
            who: Whose memory: (account, user, agent).
            content: Up to 16,000 characters.

        Returns:
            The memory kept.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
        """
        who = _validation.identity(who)
        body = _validation.content(content, limit=_validation.MAX_MEMORY)

        def work(conn: Connection) -> Memory:
            _versions.lock_person(conn, who.account, who.user)
            return _memories.add(conn, who, body, self._now(), self._words)

        return self._write(work)

    def forget_memory(self, who: Identity, memory_id: int) -> Memory:
        """Delete a memory; end the personal facts read from it and remove their words.

        Confirmed account facts read from it stay (they are the account's); they
        only lose their link to it.

        Args:
            who: Whose memory: (account, user, agent).
            memory_id: The memory's id.

        Returns:
            The memory deleted.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
            NotFound: ``who`` has no memory with this id.
        """
        who = _validation.identity(who)
        mid = _validation.count("memory_id", memory_id)

        def work(conn: Connection) -> Memory:
            _versions.lock_person(conn, who.account, who.user)
            memory = self._memory_of(conn, who, mid, exclusive=True)
            _memories.forget(conn, memory, self._now())
            return memory

        memory = self._write(work)
        self._scrub_words()
        return memory

    def search_memories(self, who: Identity, query: str, *, limit: int = 5) -> list[Memory]:
        """The memories most relevant to ``query``, best first (with no words to look for, the
        newest).

        Args:
            who: Whose memory: (account, user, agent).
            query: What to look for.
            limit: The most memories returned.

        Returns:
            The memories.

        Raises:
            InvalidRequest: An argument breaks a rule; ``field`` names it.
        """
        who = _validation.identity(who)
        text = _validation.query(query) or ""
        top = _validation.count("limit", limit)
        if not self._words(text):  # nothing to look for: the newest
            return self._read(lambda conn: _memories.recent(conn, who, min(top, _memories.RECENT)))
        return list(self.search(who, text, limit=top).memories)

    def _memory_of(
        self, conn: Connection, who: Identity, memory_id: int, *, exclusive: bool = False
    ) -> Memory:
        memory = _memories.get(conn, who, memory_id, exclusive=exclusive)
        if memory is None:
            raise NotFound(f"no memory {memory_id} for this identity")
        return memory

    # -- erasure and upkeep -----------------------------------------------------------

    def erase_user(self, account: str, user: str) -> ErasureReport:
        """Delete everything about ``user`` in ``account``, at once and for every reader.

        Every fact, version, memory and mark about them, and every mark read
        under a reader of that name, go in one transaction that no write about
        them can interleave with. Confirmed account facts they stated stay, with
        their name replaced by a pseudonym.

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
        report = self._write(lambda conn: _erasure.erase(conn, account, user, self._now()))
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
        if self.db.dialect.name == "postgresql":
            _database.rewrite_tables(self.db, list(Base.metadata.sorted_tables))
            return True
        with self._serial:
            return _database.checkpoint(self.db, self.url, self._write_wait)

    def _scrub_words(self) -> bool:
        """After words were deleted: drop them from this process's caches, and from SQLite's log."""
        _cache.forget_all()
        with self._serial:
            return _database.checkpoint(self.db, self.url, self._write_wait)

    def export_user(self, account: str, user: str) -> _export.UserExport:
        """Everything the memory holds about ``user`` in ``account``: a person's right of access.

        Read in one snapshot: every version of every fact in their own namespaces
        (under every agent definition), their proposals, the confirmed account
        facts they stated or confirmed, their memories, and the read marks about
        them or read under their name: what ``erase_user`` deletes or makes
        anonymous. ``export.to_dict()`` is the same as JSON-ready data.

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
        now = self._now()
        return self._read(lambda conn: _export.gather(conn, account, user, now), snapshot=True)

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
        """Remove marks 90 days after their last read, and marks whose change was told.

        Schedule it: hourly is plenty (a cron job, a systemd timer, or a loop
        in your application).

        Args:
            now: The moment to trim as of (default: now).

        Returns:
            What was removed.

        Raises:
            InvalidRequest: ``now`` is within 90 days of year 1.
        """
        moment = _validation.moment("now", now) or self._now()
        if moment - dt.datetime.min.replace(tzinfo=dt.timezone.utc) < _marks.LIFETIME:
            raise InvalidRequest(
                "now", f"must be at least {_marks.LIFETIME.days} days after year 1"
            )
        return self._write(lambda conn: _erasure.trim(conn, moment))

    aremember = _twin(remember)
    acorrect = _twin(correct)
    aforget = _twin(forget)
    aconfirm = _twin(confirm)
    areject = _twin(reject)
    aproposals = _twin(proposals)
    agrant_admin = _twin(grant_admin)
    arevoke_admin = _twin(revoke_admin)
    ais_admin = _twin(is_admin)
    aget_facts = _twin(get_facts)
    ahistory = _twin(history)
    aget_context = _twin(get_context)
    aacknowledge = _twin(acknowledge)
    arelease = _twin(release)
    aadd_memory = _twin(add_memory)
    aforget_memory = _twin(forget_memory)
    asearch_memories = _twin(search_memories)
    asearch = _twin(search)
    acapture = _twin(capture)
    aerase_user = _twin(erase_user)
    aexport_user = _twin(export_user)
    ascrub = _twin(scrub)
    adelete_reader = _twin(delete_reader)
    atrim = _twin(trim)
