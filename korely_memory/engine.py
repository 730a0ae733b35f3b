"""MemoryEngine: the one entry object. It owns connections and transactions.

Every write runs in one transaction (``database.run_write``): a caller never
sees half a change, and a failure leaves the database as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import DBAPIError

from . import (
    context,
    database,
    erasure,
    notices,
    ranking,
    reading,
    review,
)
from . import (
    facts as versions,
)
from . import (
    memories as recall,
)
from . import validation as v
from .errors import InvalidRequest, LimitExceeded, NotFound, PermissionDenied
from .identity import Identity, Scope
from .models import Base
from .tokens import TokenCounter
from .types import Change, ContextBlock, ErasureReport, Fact, Memory, TrimReport

P = ParamSpec("P")
R = TypeVar("R")
E = TypeVar("E")

IsAdmin = Callable[[str, str], bool]
MARK_WAIT = 0.2  # seconds a read waits for a lock on its marks before giving way


def _twin(
    method: Callable[Concatenate[E, P], R],
) -> Callable[Concatenate[E, P], Coroutine[Any, Any, R]]:
    """The async twin of a method: the same body, run in a worker thread."""

    @functools.wraps(method)
    async def twin(self: E, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = "a" + method.__name__
    twin.__doc__ = f"Async twin of :meth:`{method.__name__}`, run in a worker thread."
    return cast(Callable[Concatenate[E, P], Coroutine[Any, Any, R]], twin)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class MemoryEngine:
    """Durable, correctable memory for agents.

    ``MemoryEngine()`` opens ``$KORELY_DATABASE_URL``, else the SQLite file
    ``./korely-memory.db``; the schema is created on first use.
    """

    def __init__(
        self,
        url: str | URL | None = None,
        *,
        tokenizer: Callable[[str], int] | None = None,
        embed: Any = None,
        is_admin: IsAdmin | None = None,
        write_wait: float = database.WRITE_WAIT,
    ) -> None:
        self.url = database.resolve_url(url)
        self.db = database.create(self.url, write_wait=write_wait)
        self._is_admin = is_admin
        self._tokens = TokenCounter(tokenizer)
        self.count_tokens: Callable[[str], int] = self._tokens.exact
        """The engine's token count of any text: what ``token_budget`` is counted in."""
        embed_fn = ranking.as_embed(embed)
        self._semantic = ranking.Semantic(embed_fn) if embed_fn else None
        # In-memory SQLite is one connection shared by every thread: take turns on it.
        self._serial: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if database.is_memory_sqlite(self.url) else contextlib.nullcontext()
        )
        # PostgreSQL reads every statement of a block from one snapshot, as SQLite's WAL does.
        self._snapshot = (
            {"isolation_level": "REPEATABLE READ"} if self.db.dialect.name == "postgresql" else {}
        )
        database.create_schema(self.db, Base.metadata)

    def _write(self, work: Callable[[Connection], R]) -> R:
        with self._serial:
            return database.run_write(self.db, work)  # type: ignore[no-any-return]

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        """A read-only transaction: one consistent snapshot, no locks taken."""
        with (
            self._serial,
            self.db.connect().execution_options(**self._snapshot) as conn,
            conn.begin(),
        ):
            yield conn

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
        valid_from: dt.datetime | dt.date | None = None,
        source_memory_id: int | None = None,
        max_facts: int | None = None,
    ) -> Fact:
        """Record ``content`` under ``key``; a true fact already there is replaced and kept in history.

        ``scope=Scope.ACCOUNT`` records a proposal that reaches the whole account
        once an administrator confirms it. ``max_facts`` refuses a new key when
        the identity already holds that many facts (``LimitExceeded``).
        """
        who = v.identity(who)
        key = v.key(key)
        content = v.content(content)
        stored_scope = v.scope(scope).value
        start = v.moment("valid_from", valid_from)
        source = v.optional_count("source_memory_id", source_memory_id)
        ceiling = v.optional_count("max_facts", max_facts)

        def work(conn: Connection) -> Fact:
            versions.lock_key(conn, who, key)
            now = utcnow()
            if source is not None:
                self._memory_of(conn, who, source)
            old = versions.own_current(conn, who, key)
            if old is None:
                shared = versions.account_current(conn, who, key)
                if shared is not None and shared.content == content:
                    return shared
                if ceiling is not None and versions.count_own(conn, who) >= ceiling:
                    raise LimitExceeded(
                        f"already {ceiling} facts kept (max_facts); correct or forget one before adding {key!r}"
                    )
            elif old.content == content and old.effective_scope.value == stored_scope:
                return old
            new_id = versions.replace(
                conn,
                old,
                cause="read_from_memory" if source is not None else "stated",
                now=now,
                valid_from=start or now,
                account=who.account,
                owner=who.user,
                agent=who.agent,
                key=key,
                content=content,
                scope=stored_scope,
                source_memory_id=source,
            )
            return self._fact(conn, new_id)

        return self._write(work)

    def correct(
        self,
        who: Identity,
        key: str,
        content: str,
        *,
        valid_from: dt.datetime | dt.date | None = None,
    ) -> Fact:
        """Replace the true fact under ``key`` with ``content``; ``NotFound`` if there is none.

        An identity's own fact (or proposal) is corrected in place of history; a
        confirmed account fact only by an administrator of the account.
        """
        who = v.identity(who)
        key = v.key(key)
        content = v.content(content)
        start = v.moment("valid_from", valid_from)

        def work(conn: Connection) -> Fact:
            versions.lock_key(conn, who, key)
            old = self._target(conn, who, key, "correct")
            if old.content == content:
                return old
            now = utcnow()
            shared = old.effective_scope is Scope.ACCOUNT
            new_id = versions.replace(
                conn,
                old,
                cause="corrected",
                now=now,
                valid_from=start or now,
                account=old.account,
                owner=who.user if shared else old.owner,
                agent=old.agent,
                key=key,
                content=content,
                scope=old.effective_scope.value,
                confirmed_by=who.user if shared else None,
                confirmed_at=now if shared else None,
            )
            return self._fact(conn, new_id)

        return self._write(work)

    def forget(self, who: Identity, key: str, *, at: dt.datetime | dt.date | None = None) -> Fact:
        """End the true fact under ``key``; returns the fact it ended. ``NotFound`` if there is none."""
        who = v.identity(who)
        key = v.key(key)
        end = v.moment("at", at)

        def work(conn: Connection) -> Fact:
            versions.lock_key(conn, who, key)
            old = self._target(conn, who, key, "forget")
            now = utcnow()
            versions.end_version(conn, old.id, cause="forgotten", now=now, invalid_at=end or now)
            return self._fact(conn, old.id)

        return self._write(work)

    def _target(self, conn: Connection, who: Identity, key: str, verb: str) -> Fact:
        own = versions.own_current(conn, who, key)
        if own is not None:
            return own
        versions.lock_key(conn, who, key, shared=True)
        shared = versions.account_current(conn, who, key)
        if shared is None:
            raise NotFound(f"no true fact under key {key!r} to {verb}; use remember to record one")
        if who.user is None or not self._admin(conn, who.account, who.user):
            raise PermissionDenied(
                f"{key!r} is an account fact: only an administrator may {verb} it; "
                "record the person's own fact under the key instead, or propose a change for review"
            )
        return shared

    # -- review of account facts ------------------------------------------------

    def confirm(self, admin: Identity, fact_id: int) -> Fact:
        """Give a proposed account fact its reach: every user of the account sees it."""
        return self._review(admin, fact_id, confirm=True)

    def reject(self, admin: Identity, fact_id: int) -> Fact:
        """Refuse a proposed account fact: it ends, is shown to nobody, and is kept for review."""
        return self._review(admin, fact_id, confirm=False)

    def _review(self, admin: Identity, fact_id: int, *, confirm: bool) -> Fact:
        admin = v.identity(admin, "admin")
        reviewer = admin.user
        if reviewer is None:
            raise PermissionDenied("a review needs an administrator: admin.user is None")
        fid = v.count("fact_id", fact_id)

        def work(conn: Connection) -> Fact:
            if not self._admin(conn, admin.account, reviewer):
                raise PermissionDenied(
                    f"{reviewer!r} is not an administrator of account {admin.account!r}"
                )
            return review.decide(conn, admin.account, reviewer, fid, confirm=confirm, now=utcnow())

        return self._write(work)

    def proposals(self, account: str, agent: str | None = None) -> list[Fact]:
        """The review queue: account facts waiting for an administrator, oldest first."""
        v.name("account", account)
        v.name("agent", agent, optional=True)
        with self._read() as conn:
            return review.queue(conn, account, agent)

    def grant_admin(self, account: str, user: str) -> None:
        """Make ``user`` an administrator of ``account``."""
        v.name("account", account)
        v.name("user", user)

        self._write(lambda conn: review.grant(conn, account, user))

    def revoke_admin(self, account: str, user: str) -> None:
        """Take administration of ``account`` away from ``user``."""
        v.name("account", account)
        v.name("user", user)
        self._write(lambda conn: review.revoke(conn, account, user))

    def is_admin(self, account: str, user: str) -> bool:
        """Whether ``user`` administers ``account`` (the application's ``is_admin`` when given)."""
        v.name("account", account)
        v.name("user", user)
        with self._read() as conn:
            return self._admin(conn, account, user)

    def _admin(self, conn: Connection, account: str, user: str) -> bool:
        if self._is_admin is not None:
            return bool(self._is_admin(account, user))
        return review.listed(conn, account, user)

    # -- reading facts ------------------------------------------------------------

    def get_facts(
        self,
        who: Identity,
        as_of: dt.datetime | dt.date | None = None,
        known_as_of: dt.datetime | dt.date | None = None,
        include_invalidated: bool = False,
        reader: str | None = None,
    ) -> list[Fact]:
        """The facts ``who`` sees, newest first.

        ``as_of``: what was true in the world then; ``known_as_of``: what the
        store knew then; ``include_invalidated``: every version, ended ones too.
        """
        who = v.identity(who)
        at = v.moment("as_of", as_of)
        known = v.moment("known_as_of", known_as_of)
        v.name("reader", reader, optional=True)
        if not isinstance(include_invalidated, bool):
            raise InvalidRequest("include_invalidated", "must be True or False")
        with self._read() as conn:
            if include_invalidated:
                found = [
                    f
                    for f in versions.every_version(conn, who)
                    if f.owner == who.user or f.effective_scope is Scope.ACCOUNT
                ]
            elif at is None and known is None:
                found = versions.visible(conn, who)
            else:
                found = versions.as_of(
                    versions.every_version(conn, who), at=at, known=known, who=who
                )
        found.sort(key=lambda f: (f.recorded_at, f.id), reverse=True)
        if reader is not None and at is None and known is None and not include_invalidated:
            self._mark_read(who, reader, found)
        return found

    def history(self, who: Identity, key: str) -> list[Fact]:
        """Every version of ``key`` that ``who`` may see, oldest first."""
        who = v.identity(who)
        key = v.key(key)
        with self._read() as conn:
            return [
                f
                for f in versions.every_version(conn, who, key)
                if f.owner == who.user or f.effective_scope is Scope.ACCOUNT
            ]

    def _mark_read(self, who: Identity, reader: str, shown: Sequence[Fact]) -> None:
        """Keep read marks for the facts handed to ``reader``, so it hears when they change."""
        with self._read() as conn:
            held = notices.marks_of(conn, who.account, reader, [f.id for f in shown])
        todo = notices.plan(shown, held, (), utcnow())
        if todo:
            self._settle(who.account, reader, todo, utcnow())

    # -- the context block --------------------------------------------------------

    def get_context(
        self,
        who: Identity,
        query: str | None = None,
        *,
        reader: str | None = None,
        token_budget: int = 800,
        changes: str | Sequence[str] | None = None,
        as_of: dt.datetime | dt.date | None = None,
        known_as_of: dt.datetime | dt.date | None = None,
    ) -> ContextBlock:
        """The block an agent reads at the start of a conversation, fitted to ``token_budget`` tokens.

        With ``reader`` (the reading agent's own name), facts handed over are
        marked, and facts handed before that have changed since are told once.
        """
        who = v.identity(who)
        text = v.query(query)
        v.name("reader", reader, optional=True)
        budget = v.token_budget(token_budget)
        kinds = v.changes(changes)
        at = v.moment("as_of", as_of)
        known = v.moment("known_as_of", known_as_of)
        marking = reader is not None and at is None and known is None
        resolved = notices.Resolved()
        total: int | None = None
        with self._read() as conn:
            if at is None and known is None:
                page = (
                    None if self._semantic is not None else reading.page_size(budget, self._tokens)
                )
                chosen = reading.candidates(conn, who, reading.query_terms(text), page)
                found, total = chosen.facts, chosen.total
                kept = recall.recent(conn, who)
            else:
                found = versions.as_of(
                    versions.every_version(conn, who), at=at, known=known, who=who
                )
                found.sort(
                    key=lambda f: (f.modified_at, f.id), reverse=True
                )  # candidates come sorted
                until = min(t for t in (at, known) if t is not None)
                kept = [m for m in recall.recent(conn, who) if m.created_at <= until]
            if reader is not None and marking:
                resolved = notices.resolve(conn, who, notices.pending(conn, who, reader), kinds)
            relevant = self._relevant(text, kept)

            def draw(changes: Sequence[Change], more: int | None) -> ContextBlock:
                block = context.render(
                    facts=found,
                    memories=relevant,
                    changes=changes,
                    budget=budget,
                    count=self._tokens,
                    changed_more=more,
                    rank=(lambda fs: self._rank(text, fs)) if text else None,
                    waiting=bool(relevant or resolved.tellable),
                )
                if total is not None and total > len(
                    found
                ):  # chosen from a short list of the facts
                    block = dataclasses.replace(block, omitted=total - len(block.facts))
                return block

            block = draw(resolved.tellable, 0)
            if not marking:
                return block
            assert reader is not None
            held = notices.marks_of(conn, who.account, reader, [f.id for f in block.facts])
        claims = [i for c in block.changed for i in resolved.claims[c.was.id]] + resolved.silent
        now = utcnow()
        todo = notices.plan(block.facts, held, claims, now)
        if not todo:
            return block
        claimed = self._settle(who.account, reader, todo, now)
        if claimed is None:
            return draw((), None)
        told = [c for c in block.changed if c.was.id in claimed]
        if len(told) < len(block.changed):
            return draw(told, len(resolved.tellable) - len(block.changed))
        return block

    def _settle(
        self, account: str, reader: str, todo: notices.Plan, now: dt.datetime
    ) -> set[int] | None:
        """Write a read's marks and claims; None when a lock or a failing disk made it give way."""
        try:
            with self._serial, database.marking(self.db, MARK_WAIT) as conn:
                return notices.settle(conn, account, reader, todo, now)
        except DBAPIError as exc:
            if not database.gives_way(exc):
                raise
            return None

    def _scores(self, query: str, docs: Sequence[str]) -> list[float]:
        if self._semantic is not None:
            return self._semantic.scores(query, docs)
        return ranking.bm25(query, docs)

    def _rank(self, query: str, found: Sequence[Fact]) -> list[Fact]:
        """Most relevant first; ties keep the recency order they came in."""
        scores = self._scores(query, [f"{f.key.replace('-', ' ')} {f.content}" for f in found])
        order = sorted(range(len(found)), key=lambda i: -scores[i])
        return [found[i] for i in order]

    def _relevant(self, query: str | None, kept: Sequence[Memory]) -> list[Memory]:
        """Memories worth showing: those that match the query, best first; without one, the newest."""
        if not query or not kept:
            return list(kept)
        scores = self._scores(query, [m.content for m in kept])
        order = sorted((i for i in range(len(kept)) if scores[i] > 0), key=lambda i: -scores[i])
        return [kept[i] for i in order]

    # -- memories -----------------------------------------------------------------

    def add_memory(self, who: Identity, content: str) -> Memory:
        """Keep free text (a conversation excerpt, a note) for recall, up to 16,000 characters."""
        who = v.identity(who)
        body = v.content(content, limit=v.MAX_MEMORY)
        return self._write(lambda conn: recall.add(conn, who, body, utcnow()))

    def forget_memory(self, who: Identity, memory_id: int) -> Memory:
        """Remove a memory's text and end the facts read from it; their words are never told again."""
        who = v.identity(who)
        mid = v.count("memory_id", memory_id)

        def work(conn: Connection) -> Memory:
            memory = self._memory_of(conn, who, mid)
            recall.forget(conn, memory, utcnow())
            return memory

        return self._write(work)

    def search_memories(self, who: Identity, query: str, *, limit: int = 5) -> list[Memory]:
        """The memories most relevant to ``query``, best first."""
        who = v.identity(who)
        text = v.query(query) or ""
        top = v.count("limit", limit)
        with self._read() as conn:
            kept = recall.recent(conn, who)
        return self._relevant(text, kept)[:top]

    def _memory_of(self, conn: Connection, who: Identity, memory_id: int) -> Memory:
        memory = recall.get(conn, who, memory_id)
        if memory is None:
            raise NotFound(f"no memory {memory_id} for this identity")
        return memory

    # -- erasure and upkeep -----------------------------------------------------------

    def erase_user(self, account: str, user: str) -> ErasureReport:
        """Delete, physically and at once, everything about ``user`` in ``account`` (SPEC §8)."""
        v.name("account", account)
        v.name("user", user)
        report = self._write(lambda conn: erasure.erase(conn, account, user, utcnow()))
        # Texts kept in this process for speed may hold the person's words.
        self._tokens.forget()
        if self._semantic is not None:
            self._semantic.forget()
        context.forget_cached_text()
        ranking.forget_cached_text()
        if self.db.dialect.name == "sqlite" and not database.is_memory_sqlite(self.url):
            # The erased pages may still sit in the write-ahead log: fold it in and empty it.
            with self._serial, self.db.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        return report

    def delete_reader(self, account: str, reader: str) -> int:
        """Delete every read mark kept for ``reader`` in ``account``; returns how many."""
        v.name("account", account)
        v.name("reader", reader)
        return self._write(lambda conn: erasure.delete_reader(conn, account, reader))

    def trim(self, now: dt.datetime | dt.date | None = None) -> TrimReport:
        """Remove marks 90 days after their last read, and marks whose change was told. Run it hourly."""
        moment = v.moment("now", now) or utcnow()
        if moment - dt.datetime.min.replace(tzinfo=dt.timezone.utc) < erasure.MARK_LIFETIME:
            raise InvalidRequest(
                "now", f"must be at least {erasure.MARK_LIFETIME.days} days after year 1"
            )
        return self._write(lambda conn: erasure.trim(conn, moment))

    def _fact(self, conn: Connection, fact_id: int) -> Fact:
        fact = versions.by_id(conn, fact_id)
        assert fact is not None
        return fact

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
    aadd_memory = _twin(add_memory)
    aforget_memory = _twin(forget_memory)
    asearch_memories = _twin(search_memories)
    aerase_user = _twin(erase_user)
    adelete_reader = _twin(delete_reader)
    atrim = _twin(trim)
