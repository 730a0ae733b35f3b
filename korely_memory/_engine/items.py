"""The items of LangGraph stores: ``engine.items``, the ``Items`` that ``KorelyStore`` calls.

An item's words are a fact's: a put records the fact (a new version when the words
changed) and keeps the item's JSON value beside it, in one transaction; a delete forgets
the fact. Reads return only items whose fact is true.
"""

from __future__ import annotations

import builtins
import datetime as dt
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection, Row

from .._read._ranking import Ranking
from .._store import _items, _versions, _writes
from .._values import _expiry, _validation
from .._values._embedders import Embedder, check_embed
from .._values._errors import InvalidRequest
from .._values._identity import EndCause, Identity
from .._values._types import Fact, StoreItem
from .core import EngineCore, _twin

Ref = tuple[tuple[str, ...], str]
"""An item's namespace and key."""

_SWEEP = 500  # items a sweep ends per transaction
_RANKINGS_KEPT = 8  # embedders of stores' indexes whose vectors a process keeps


class Items:
    """The items of LangGraph stores kept by one engine: ``engine.items``.

    Each item is a JSON value under a namespace and a key, and its words are a fact of the
    user whose memory the namespace is; ``KorelyStore`` maps LangGraph's operations onto
    these methods. Each method has an async twin (``aput``, ``aget``...) that runs it in a
    worker thread.

    Example:
        ```python
        space = ("memories", "giulia")
        engine.items.put(who, space, "trip", {"text": "Goes to Paris"}, text="Goes to Paris")
        (trip,) = engine.items.get(who.account, who.agent, [(space, "trip")])
        ```
    """

    def __init__(self, core: EngineCore) -> None:
        self._core = core
        # The rankings of stores' indexes, by their embedder: this process keeps their vectors.
        self._rankings: dict[int, tuple[Embedder, Ranking]] = {}
        self._rankings_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Items({self._core.url.render_as_string(hide_password=True)!r})"

    def put(
        self,
        who: Identity,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        *,
        text: str,
        text_at: Sequence[str] | None = None,
        place: Sequence[str] | None = None,
        ttl: float | None = None,
        index: list[str] | bool | None = None,
    ) -> Fact:
        """Keep ``value`` as the item ``key`` of ``namespace``, and its words as a fact of ``who``.

        Args:
            who: Whose memory the namespace is.
            namespace: The item's labels: non-empty, without '.', 255 characters in all at most.
            key: The item's key, kept exactly (1 to 255 characters).
            value: A JSON object (100,000 characters at most).
            text: The fact's words (1 to 2000 characters): what a block shows of the item.
            text_at: Where in ``value`` the words are (keys, outermost first), written there
                when a new version of the fact is recorded elsewhere; None: nowhere (such a
                version is then written as a ``content`` field).
            place: What sets the item apart within ``who``'s memory (None: the whole
                namespace). The fact's key is ``key`` itself when ``place`` is empty and
                ``key`` is a key as the engine keeps them; a UUID is ``memory-`` and 12 hex
                digits of a digest; else a slug of ``place`` and ``key``, with a digest.
            ttl: Minutes the item lives after it is last read or written (None: for ever).
            index: What a store embeds of it: None for its default, False, or field paths.

        Returns:
            The fact true after the put (the same one when ``text`` did not change).

        Raises:
            InvalidRequest: An argument breaks a rule (``field`` names it), or another item
                of the namespace already holds the fact this one would.
        """
        who = _validation.identity(who)
        ns = _validation.item_namespace(namespace)
        key = _validation.item_key(key)
        kept = _validation.item_value(value)
        words = _validation.content(text, field="text")
        path = _validation.item_path("text_at", text_at)
        where = ns if place is None else _validation.item_path("place", place, empty=True)
        minutes = _validation.item_ttl(ttl)
        embed = _validation.item_index(index)
        fact_key = _items.fact_key(where or (), key)
        account, agent, owner_key = who.account, who.agent, who.user or ""

        def work(conn: Connection) -> Fact:
            _versions.lock_person(conn, account, who.user)
            _versions.lock_key(conn, who, fact_key)
            existing = _items.row(conn, account, agent, ns, key)
            other = _items.holder(conn, account, agent, owner_key, fact_key)
            if other is not None and (other.namespace, other.key) != (_items.joined(ns), key):
                raise InvalidRequest(
                    "key",
                    f"holds the same fact ({fact_key}) as the item {other.key!r} of "
                    f"{_items.split(other.namespace)}: choose another key",
                )
            if existing is not None and (existing.owner_key, existing.fact_key) != (
                owner_key,
                fact_key,
            ):
                # The namespace maps elsewhere now: the fact it held ends, and its row with it.
                self._end_fact(conn, existing)
                _items.drop(conn, account, agent, ns, key)
                existing = None
            fact = _writes.record(conn, self._core._writer, who, fact_key, words, item_written=True)
            _items.keep(
                conn,
                account=account,
                agent=agent,
                ns=ns,
                key=key,
                owner_key=owner_key,
                fact_key=fact_key,
                fact_id=fact.id,
                value=kept,
                text_at=path,
                index=embed,
                ttl=minutes,
                now=self._core._now(conn),
                existing=existing,
            )
            return fact

        return self._core._write(work)

    def delete(self, account: str, agent: str, namespace: Sequence[str], key: str) -> bool:
        """Delete the item ``key`` of ``namespace`` and forget its fact (history keeps it).

        Returns:
            Whether there was such an item.
        """
        _validation.name("account", account)
        _validation.name("agent", agent)
        ns = _validation.item_namespace(namespace)
        key = _validation.item_key(key)

        def work(conn: Connection) -> bool:
            existing = _items.row(conn, account, agent, ns, key)
            if existing is None:
                return False
            self._end_fact(conn, existing)
            _items.drop(conn, account, agent, ns, key)
            return True

        return self._core._write(work)

    def get(
        self,
        account: str,
        agent: str,
        refs: Sequence[Ref],
        *,
        live: bool = False,
        refresh: bool = False,
    ) -> list[StoreItem | None]:
        """The items of ``refs`` (None where there is none), in their order.

        Args:
            account: The account.
            agent: The agent definition.
            refs: (namespace, key) pairs.
            live: Leave out items past their time to live that no sweep deleted yet.
            refresh: Give each item found that has a time to live its whole time again.
        """
        _validation.name("account", account)
        _validation.name("agent", agent)
        wanted = [(tuple(ns), key) for ns, key in refs]

        def read(conn: Connection) -> dict[Ref, StoreItem]:
            return _items.read(
                conn, account, agent, wanted, self._core._now_or_server(conn), live=live
            )

        found = self._core._read(read)
        if refresh:
            self.refresh(account, agent, [r for r in wanted if _ages(found.get(r))])
        return [found.get(r) for r in wanted]

    # Below this method, ``list`` in the class is the method: annotations say ``builtins.list``.
    def list(
        self,
        account: str,
        agent: str,
        prefix: Sequence[str] = (),
        *,
        live: bool = False,
        limit: int | None = None,
        offset: int = 0,
        equal: Mapping[str, str | int | float] | None = None,
    ) -> list[StoreItem]:
        """The items whose namespace starts with the labels of ``prefix``, the last written first.

        Args:
            live: Leave out items past their time to live that no sweep deleted yet.
            limit: At most this many (None: all).
            offset: Skip this many first.
            equal: Only items whose value's top-level fields hold these strings or numbers
                (a number equals a number of the same value; never a string or a boolean).
        """
        _validation.name("account", account)
        _validation.name("agent", agent)
        labels = tuple(prefix)
        if limit is not None:
            _validation.count("limit", limit)
        _validation.count("offset", offset)
        if equal is not None and not isinstance(equal, Mapping):
            raise InvalidRequest("equal", f"must be a mapping of fields to values, not {equal!r}")
        return self._core._read(
            lambda conn: _items.under(
                conn,
                account,
                agent,
                labels,
                self._core._now_or_server(conn),
                live=live,
                limit=limit,
                offset=offset,
                equal=equal,
            )
        )

    def refresh(self, account: str, agent: str, refs: Sequence[Ref]) -> int:
        """Give the items of ``refs`` that have a time to live, and have not run out of it,
        their whole time again. Returns how many."""
        _validation.name("account", account)
        _validation.name("agent", agent)
        wanted = [(tuple(ns), key) for ns, key in refs]
        if not wanted:
            return 0
        return self._core._write(
            lambda conn: _items.refresh(conn, account, agent, wanted, self._core._now(conn))
        )

    def namespaces(
        self, account: str, agent: str, *, live: bool = False
    ) -> builtins.list[tuple[str, ...]]:
        """Every namespace that holds an item, in order (``live``: counting live items only)."""
        _validation.name("account", account)
        _validation.name("agent", agent)
        return self._core._read(
            lambda conn: _items.namespaces(
                conn, account, agent, self._core._now_or_server(conn), live=live
            )
        )

    def facts_without_item(
        self, who: Identity, *, key: str | None = None, limit: int | None = None
    ) -> builtins.list[Fact]:
        """The facts of ``who``'s own (neither a proposal nor the account's) true now that no
        item holds: written by a tool, a capture or ``engine.remember``, which a store serves
        as items beside its own. The last changed first, in one statement that reads,
        newest first, the facts it returns and the newer ones items hold.

        Args:
            who: Whose facts.
            key: Only the fact under exactly this key (none when an item holds it).
            limit: At most this many (None: all).
        """
        who = _validation.identity(who)
        if key is not None and not isinstance(key, str):
            raise InvalidRequest("key", f"must be a string, not {type(key).__name__}")
        if limit is not None:
            _validation.count("limit", limit)
        if key is not None and not _validation.is_key(key):
            return []  # no fact is kept under it

        def read(conn: Connection) -> builtins.list[Fact]:
            return _items.unheld(
                conn,
                who.account,
                who.agent,
                who.user or "",
                self._core._now(conn),
                key=key,
                limit=limit,
            )

        return self._core._read(read)

    def sweep(self) -> int:
        """Delete every item past its time to live, its fact ended as expired then.

        Returns:
            How many items were deleted.
        """
        done = 0
        while True:

            def work(conn: Connection) -> tuple[int, int]:
                now = self._core._now(conn)
                rows = _items.run_out(conn, now, _SWEEP)
                deleted = 0
                for row in rows:
                    who = Identity(row.account, row.owner_key or None, row.agent)
                    _versions.lock_person(conn, who.account, who.user)
                    _versions.lock_key(conn, who, row.fact_key)
                    if not _items.still_run_out(conn, row, now):
                        continue  # put again, or swept by another, since it was read
                    self._end_fact(conn, row, cause=EndCause.EXPIRED, at=row.expires_at)
                    _items.drop(conn, row.account, row.agent, _items.split(row.namespace), row.key)
                    deleted += 1
                return len(rows), deleted

            seen, deleted = self._core._write(work)
            done += deleted
            if seen < _SWEEP:
                return done

    def relevance(
        self,
        query: str,
        texts: Sequence[str],
        *,
        embed: Embedder | None = None,
        account: str | None = None,
    ) -> builtins.list[float]:
        """How relevant each text is to ``query``: the engine's ranking (BM25 over its words, or
        the cosine of its ``embed=``), or the cosine of ``embed``'s vectors when one is given."""
        if not isinstance(query, str):
            raise InvalidRequest("query", f"must be a string, not {type(query).__name__}")
        check_embed(embed)
        if account is not None:
            _validation.name("account", account)
        ranking = self._core._ranking if embed is None else self._store_ranking(embed)
        scores = self._core._read(lambda conn: ranking.scores(query, list(texts), conn, account))
        if embed is None:
            self._core._keep_vectors()
        return scores

    def _store_ranking(self, embed: Embedder) -> Ranking:
        """A ranking by ``embed``'s vectors, which this process keeps (a store's index)."""
        with self._rankings_lock:
            found = self._rankings.get(id(embed))
            if found is None or found[0] is not embed:
                while len(self._rankings) >= _RANKINGS_KEPT:
                    self._rankings.pop(next(iter(self._rankings)))
                found = self._rankings[id(embed)] = (embed, Ranking(self._core._words, embed))
            return found[1]

    def _end_fact(
        self,
        conn: Connection,
        row: Row[Any],
        *,
        cause: EndCause | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        """Forget the fact that holds an item's words, if it is still true."""
        who = Identity(row.account, row.owner_key or None, row.agent)
        _versions.lock_person(conn, who.account, who.user)
        _versions.lock_key(conn, who, row.fact_key)
        own = _versions.own_current(conn, who, row.fact_key)
        if own is None or not _expiry.is_live(own, self._core._now(conn)):
            return
        _writes.end(
            conn,
            self._core._writer,
            who,
            row.fact_key,
            cause=cause,
            at=None if at is None else max(at, own.valid_from),
        )

    aput = _twin(put)
    adelete = _twin(delete)
    aget = _twin(get)
    alist = _twin(list)
    arefresh = _twin(refresh)
    anamespaces = _twin(namespaces)
    afacts_without_item = _twin(facts_without_item)
    asweep = _twin(sweep)
    arelevance = _twin(relevance)


def _ages(item: StoreItem | None) -> bool:
    return item is not None and item.ttl is not None
