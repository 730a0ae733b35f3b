"""The decisions of a read: what to choose from, what to render, what to mark and claim.

``MemoryEngine.get_context`` owns the transactions and calls these steps in
order; each step here only decides:

1. ``ReadRequest.of`` (and ``NoteRequest.of`` for a conversation's note): the
   arguments, checked.
2. ``BlockCache.serve``: a block this process kept, while it is still what the
   database holds; otherwise the block is made (the steps below) and kept when
   it may be.
3. ``gather`` (in the read's snapshot, no locks): the candidate facts, the
   memories worth showing, and the reader's pending changes.
4. ``draft``: the facts, changes and memories chosen and rendered, as the
   block would be if every change it shows is told.
5. ``mark_work`` (from marks read in the same snapshot): what the read must
   write; nothing for a steady read.
6. The engine writes that in a short transaction of its own, which may give
   way to a busy lock; ``settle`` then returns the block as it really is:
   without the changes another read took, or without any when it gave way.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
import secrets
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._store import _marks, _memories, _versions, _word_index
from .._text import _cache, _render
from .._text._cache import TextCache
from .._text._tokens import TokenCounter
from .._values import _expiry, _validation
from .._values._errors import InvalidRequest
from .._values._identity import Identity
from .._values._types import Change, ContextBlock, Fact, Memory
from . import _candidates, _changes
from ._ranking import IndexedFacts, Ranking

RECEIPT_SEPARATOR = ":"


@dataclass(frozen=True)
class ReadRequest:
    """A read's arguments, checked."""

    who: Identity
    query: str | None
    reader: str | None
    budget: int
    kinds: frozenset[str] | None
    at: dt.datetime | None
    known: dt.datetime | None
    hold: dt.timedelta | None
    renew: str | None = None
    """The hold token of an earlier block whose changes this read shows again."""
    owed: tuple[Fact, ...] = ()
    """Versions this reader was handed by reads of this process that gave way, still to be
    marked (``with_owed``): a read that owes marks is made afresh, never served from a kept
    block."""

    @classmethod
    def of(
        cls,
        who: object,
        query: object,
        *,
        reader: object,
        token_budget: object,
        changes: object,
        as_of: object,
        known_as_of: object,
        hold: object,
        default_hold: dt.timedelta,
        renew: object = None,
    ) -> ReadRequest:
        """The request, or ``InvalidRequest`` naming the first argument that breaks a rule."""
        request = cls(
            who=_validation.identity(who),
            query=_validation.query(query),
            reader=_validation.name("reader", reader, optional=True),
            budget=_validation.token_budget(token_budget),
            kinds=_validation.changes(changes),
            at=_validation.moment("as_of", as_of),
            known=_validation.moment("known_as_of", known_as_of),
            hold=_validation.hold(hold, default_hold),
            renew=None if renew is None else parse_receipt(renew, field="renew").token,
        )
        if request.renew is not None and (request.hold is None or not request.marking):
            raise InvalidRequest(
                "renew", "needs a reader and hold=: it holds again what an earlier block held"
            )
        return request

    @property
    def of_the_past(self) -> bool:
        """A read of what was true, or known, at another moment: nothing is marked or told."""
        return self.at is not None or self.known is not None

    @property
    def marking(self) -> bool:
        """Whether this read keeps marks and tells changes."""
        return self.reader is not None and not self.of_the_past

    def with_owed(self, owed: Sequence[Fact]) -> ReadRequest:
        """This request, for a reader owed the marks of ``owed``."""
        return dataclasses.replace(self, owed=tuple(owed)) if owed else self


@dataclass(frozen=True)
class NoteRequest:
    """``get_context``'s ``conversation``, ``anchor`` and ``present``, checked: the block is a
    note for the conversation."""

    conversation: str
    anchor: str | None
    present: frozenset[int] | None
    """The ``seq`` of the earlier notes still in the prompt; None: all of them."""

    @classmethod
    def of(
        cls, request: ReadRequest, conversation: object, anchor: object, present: object
    ) -> NoteRequest | None:
        """The note asked for, None when no ``conversation`` is given, or ``InvalidRequest``
        naming the first argument that breaks a rule."""
        named = _validation.label("conversation", conversation, optional=True)
        pinned = _validation.label("anchor", anchor, optional=True)
        seqs = _validation.seqs("present", present)
        if named is None:
            if pinned is not None or seqs is not None:
                raise InvalidRequest("conversation", "is needed with anchor or present")
            return None
        if request.of_the_past:
            raise InvalidRequest("conversation", "cannot be given with as_of or known_as_of")
        return cls(named, pinned, seqs)


@dataclass
class Gathered:
    """What a read took from its snapshot."""

    facts: list[Fact]
    """Candidate facts, newest first."""
    total: int | None
    """How many true facts there are, when ``facts`` is a short list chosen from more."""
    memories: list[Memory]
    """Memories worth showing, most relevant first."""
    pending: _changes.PendingChanges = field(default_factory=_changes.PendingChanges)
    """The reader's pending changes."""
    excerpts: dict[int, str] = field(default_factory=dict)
    """For memories longer than a block could show, by id, the beginning the block renders."""
    chosen: _candidates.Candidates | None = None
    """The facts as read for a block of now, with the versions read with them."""
    ready: Ready | None = None
    """The facts' lines, tokens and words, worked out by an earlier read."""


Ready = tuple[_render.Costed, IndexedFacts | None]


@dataclass
class KeptFacts:
    """Every fact an identity sees, read earlier; once a read with another query takes them,
    their lines, tokens and words too, worked out once for every query after it."""

    chosen: _candidates.Candidates
    ready: Ready | None = None

    def prepared(self, ranking: Ranking, count: TokenCounter) -> Ready:
        if self.ready is None:  # two threads may both work it out: the same, either kept
            facts = self.chosen.facts
            self.ready = (_render.fact_costs(facts, count), ranking.indexed(facts))
        return self.ready


CHARS_PER_TOKEN = 6  # characters read of memories per token of budget: English runs about 4


def _memories_to_show(
    conn: Connection, request: ReadRequest, terms: Sequence[str]
) -> tuple[list[Memory], dict[int, str]]:
    """The memories a block may show, most relevant (or, with no query, newest) first, read
    only as far as its budget could show them."""
    chars = request.budget * CHARS_PER_TOKEN
    limit = min(request.budget // 8 + 1, _memories.RECENT)
    if request.query:
        matched = _memories.matching(conn, request.who, terms, _memories.PER_TERM)[:limit]
        chosen = [(i, size) for i, _, size in matched]
        found = _memories.excerpts(conn, request.who.account, chosen, chars)
    else:
        found = _memories.newest_excerpts(conn, request.who, chars, limit)
    beginnings = {e.memory.id: e.beginning for e in found if e.beginning is not None}
    return [e.memory for e in found], beginnings


def gather(
    conn: Connection,
    request: ReadRequest,
    ranking: Ranking,
    count: TokenCounter,
    now: dt.datetime | None,
    owed: Sequence[Fact] = (),
    read_before: KeptFacts | None = None,
) -> Gathered:
    """Read the candidates of a block from one snapshot (``read_before``: the facts, read
    earlier and still what the identity sees).

    ``owed``: versions an earlier read of this reader handed over but could not
    mark; those about this block's user that have ended since are told as if
    they had been marked. ``now``: the read's moment; None (on PostgreSQL, for a read
    that neither marks nor reads the past) lets the statement read the server's clock.
    """
    who = request.who
    excerpts: dict[int, str] = {}
    ready: Ready | None = None
    if request.of_the_past:
        assert now is not None
        found = _versions.as_of(
            _versions.every_version(conn, who, now=now),
            at=request.at,
            known=request.known,
            who=who,
        )
        chosen = None
        found = [f for f in found if not f.erased]
        found.sort(key=lambda f: (f.modified_at, f.id), reverse=True)
        until = min(t for t in (request.at, request.known) if t is not None)
        kept = [m for m in _memories.recent(conn, who) if m.created_at <= until]
        shown = ranking.memories(request.query, kept, conn)
        total = None
    else:
        terms = _candidates.query_terms(request.query, ranking.words)
        page = None if ranking.reads_every_fact else _candidates.page_size(request.budget, count)
        if read_before is not None:
            chosen = read_before.chosen
            ready = read_before.prepared(ranking, count)
        else:
            chosen = _candidates.candidates(conn, who, terms, page, now)
        found, total = chosen.facts, chosen.total
        if not chosen.has_memories:
            shown = []
        elif ranking.reads_every_fact:
            shown = ranking.memories(request.query, _memories.recent(conn, who), conn)
        else:
            shown, excerpts = _memories_to_show(conn, request, terms)
    gathered = Gathered(found, total, shown, excerpts=excerpts, chosen=chosen, ready=ready)
    if request.marking:
        assert request.reader is not None and now is not None
        ended = _marks.pending(conn, who, request.reader, now, renewing=request.renew)
        subjects = {who.user or "", ""}
        unmarked = [f.id for f in owed if _marks.subject_of(f) in subjects]
        known = {f.id for f in ended}
        ended += [
            f
            for f in _expiry.all_seen_at(_versions.by_ids(conn, who.account, unmarked), now)
            if not f.is_current and f.id not in known
        ]
        # Latest ended first, as the marks come: of two versions told as one change, the one
        # read last is the change's ``was``.
        ended.sort(key=lambda f: (f.ended_recorded_at, f.id), reverse=True)
        gathered.pending = _changes.resolve(conn, who, ended, request.kinds, now)
    return gathered


@dataclass(frozen=True)
class Made:
    """A block made from the database, with what its read gathered (which says whether it may
    be kept)."""

    block: ContextBlock
    gathered: Gathered


@dataclass(frozen=True)
class Drafted:
    """What a read took from its snapshot: the candidates, the block drafted from them, the
    reader's last reads of its facts, and the read's moment."""

    gathered: Gathered
    block: ContextBlock
    last_reads: dict[int, dt.datetime]
    now: dt.datetime | None


def draft(
    gathered: Gathered,
    request: ReadRequest,
    ranking: Ranking,
    count: TokenCounter,
    *,
    changes: Sequence[Change] | None = None,
    changed_more: int | None = 0,
    token: str | None = None,
    conn: Connection | None = None,
) -> ContextBlock:
    """Render the block; ``changes`` (default: every pending one) are those it may tell.

    ``conn``: the read's snapshot, where relevance may find vectors kept earlier.
    """
    query = request.query
    told = gathered.pending.changes if changes is None else changes
    shown_from = gathered.total if gathered.total is not None else len(gathered.facts)

    def receipt_for(shown: Sequence[Change]) -> str | None:
        if token is None:
            return None
        return receipt(token, gathered.pending.marks_settled_by(shown), request.who.account)

    costed, indexed = gathered.ready or (None, None)

    def rank(facts: Sequence[Fact]) -> Sequence[Fact]:
        assert query is not None
        if indexed is not None and facts is indexed.found:
            return indexed.facts(query)
        return ranking.facts(query, facts, conn)

    return _render.render(
        facts=gathered.facts,
        memories=gathered.memories,
        changes=told,
        budget=request.budget,
        count=count,
        changed_more=changed_more,
        costed=costed,
        rank=rank if query else None,
        waiting=bool(gathered.memories or gathered.pending.changes),
        omitted=shown_from - len(gathered.facts),
        receipt_for=receipt_for,
        excerpts=gathered.excerpts,
    )


@dataclass
class MarkWork:
    """What one read must write; empty for a steady read."""

    hand_over: list[Fact] = field(default_factory=list)
    """Versions handed to the reader that have no mark yet (or may not have one)."""
    refresh: list[int] = field(default_factory=list)
    """Marks last read before this hour."""
    tells: list[Change] = field(default_factory=list)
    """The changes the block tells, as its snapshot drew them."""
    drawn: dict[int, list[int]] = field(default_factory=dict)
    """For each of ``tells`` (by ``was.id``), the marks the snapshot found it settles."""
    silent: list[int] = field(default_factory=list)
    """Marks the block settles without a word: their versions are true again."""
    seen: set[int] = field(default_factory=set)
    """The marks the snapshot found pending."""
    hold: _marks.Hold | None = None
    """Hold the claimed marks instead of spending them."""

    def __bool__(self) -> bool:
        return bool(self.hand_over or self.refresh or self.tells or self.silent)

    @property
    def subjects(self) -> set[str]:
        """Whom the marks it writes and claims are about."""
        return {_marks.subject_of(f) for f in [*self.hand_over, *(c.was for c in self.tells)]}


def mark_work(
    shown: Sequence[Fact],
    last_reads: dict[int, dt.datetime],
    owed: Iterable[Fact],
    now: dt.datetime,
    *,
    tells: Sequence[Change] = (),
    pending: _changes.PendingChanges | None = None,
    hold: _marks.Hold | None = None,
) -> MarkWork:
    """Decide, from the marks the snapshot holds, what a read that handed over ``shown`` and
    tells ``tells`` (changes of ``pending``) must write.

    ``owed``: versions an earlier read of this reader handed over but could not
    mark (it gave way); they are marked now, as they are now. What a change tells
    holds now counts as handed over too.
    """
    this_hour = _marks.hour(now)
    work = MarkWork(tells=list(tells), hold=hold)
    if pending is not None:
        work.drawn = {c.was.id: pending.marks[c.was.id] for c in tells}
        work.silent = list(pending.no_change)
        work.seen = set(pending.versions)
    for fact in shown:
        last = last_reads.get(fact.id)
        if last is None:
            work.hand_over.append(fact)
        elif last < this_hour:
            work.refresh.append(fact.id)
    ids = {f.id for f in shown}
    for fact in [*owed, *(c.now for c in tells if c.now is not None)]:
        if fact.id not in ids:
            ids.add(fact.id)
            work.hand_over.append(fact)
    return work


@dataclass
class Claimed:
    """What a read's mark step got of what its block tells."""

    marks: dict[int, list[int]] = field(default_factory=dict)
    """For each change the block tells (by the ``was.id`` its snapshot drew), the marks
    claimed for it: none when other reads told all of it first."""
    silent: list[int] = field(default_factory=list)
    """The marks settled without a word."""
    versions: dict[int, Fact] = field(default_factory=dict)
    """The versions of the marks claimed that the snapshot did not find, by id."""


def write_marks(
    conn: Connection,
    who: Identity,
    reader: str,
    work: MarkWork,
    now: dt.datetime,
    *,
    renewing: str | None = None,
    clock: Callable[[Connection], dt.datetime] | None = None,
) -> Claimed:
    """A read's mark step, in a transaction of its own: mark what it handed over, and claim
    what its block tells.

    Other reads of the same reader may have written their marks since this read's snapshot,
    from snapshots older or newer than it. One transaction at a time writes a reader's marks
    about one subject, so each decides from what every earlier one left:

    * a version handed over that had ended already, and of which the reader holds a later
      version, is spent without a word (a newer read moved the reader past it);
    * a change the block tells claims the marks its snapshot found, and the marks written
      since that lead to what it says holds now; it is left out when it got none (other reads
      told what it tells, or more).

    So no version is told twice as what holds now, however the reads of one reader interleave.
    """
    account = who.account
    _versions.lock_person(conn, account, who.user, reader)
    _marks.hand_over(conn, account, reader, work.hand_over, now)
    ended, overtaken = _marks.ended_among(conn, account, reader, work.hand_over, now)
    if ended or work.tells:
        # What the reader was handed or told by other reads decides what this one spends:
        # decided under the lock, from what every earlier holder of it committed. A read that
        # only handed over versions still true needs none (what it wrote decides nothing).
        _marks.lock_subjects(conn, account, reader, work.subjects)
        if ended:
            ended, overtaken = _marks.ended_among(conn, account, reader, work.hand_over, now)
    _marks.refresh(conn, account, reader, work.refresh, now)
    _marks.claim(conn, account, reader, overtaken, now)
    drawn = {i for group in work.drawn.values() for i in group}
    got = _marks.claim(conn, account, reader, sorted(drawn | set(work.silent)), now, work.hold)
    claimed = Claimed(
        marks={was: [i for i in group if i in got] for was, group in work.drawn.items()},
        silent=[i for i in work.silent if i in got],
    )
    if not work.tells:
        return claimed
    # Marks written since the snapshot (by reads from older snapshots), or ended after the
    # read's moment (taken just before its snapshot began), that lead to what a change tells
    # holds now are told with it: nothing else would tell them but as the same. ``clock``: the
    # moment of this transaction, after every write its snapshot sees.
    moment = clock(conn) if clock is not None else now
    keys = [c.now.key for c in work.tells if c.now is not None]
    if not keys:
        return claimed
    at = max(now, moment)
    arrived = [
        f
        for f in _marks.pending(conn, who, reader, at, renewing=renewing, keys=keys)
        if f.id not in work.seen
    ]
    for change in work.tells:
        if change.now is None or not arrived:
            continue
        led = _changes.leading_to(conn, account, arrived, change.now, now)
        taken = _marks.claim(conn, account, reader, [f.id for f in led], now, work.hold)
        claimed.marks[change.was.id] += sorted(taken)
        claimed.versions.update((f.id, f) for f in led if f.id in taken)
    return claimed


def settle(
    block: ContextBlock,
    gathered: Gathered,
    claimed: Claimed | None,
    redraw: Callable[[Sequence[Change], int | None], ContextBlock],
) -> ContextBlock:
    """The block as the mark step left it.

    ``claimed`` is None when the step gave way: the block tells nothing, and
    says so. Otherwise a change of which the step claimed nothing (other reads
    told it) is left out, and one whose own ``was`` another read took is told
    from the latest version the step got.
    """
    if claimed is None:
        return dataclasses.replace(redraw((), None), gave_way=True)
    pending = gathered.pending
    told: list[Change] = []
    same = sorted(claimed.silent) == sorted(pending.no_change)
    pending.no_change = list(claimed.silent)
    for change in block.changed:
        got = claimed.marks.get(change.was.id, [])
        same = same and sorted(got) == sorted(pending.marks[change.was.id])
        if not got:
            continue
        if change.was.id not in got:
            versions = {**pending.versions, **claimed.versions}
            latest = max((versions[i] for i in got), key=_last_ended)
            change = dataclasses.replace(change, was=latest)
        pending.marks[change.was.id] = got
        told.append(change)
    if same:
        return block
    return redraw(told, len(pending.changes) - len(block.changed))


def _last_ended(fact: Fact) -> tuple[dt.datetime, int]:
    return (fact.ended_recorded_at or fact.recorded_at, fact.id)


@dataclass(frozen=True)
class Reading:
    """What the look-ups of kept blocks run on: the engine's read transaction, the clock a read
    of one statement takes its moment from (None: the server's, read by the statement), its
    ranking and token counter, and the turns its threads take at a look-up."""

    read: Callable[[Callable[[Connection], Any]], Any]
    clock: Callable[[], dt.datetime] | None
    ranking: Ranking
    count: TokenCounter
    turns: AbstractContextManager[Any]


class BlockCache:
    """Blocks this process made, kept and reused while nothing they depend on has changed: the
    versions of the identity's namespace and account (``_word_index.versions``, drawn anew by
    every write to what a block shows, in the write's own transaction) are those read with
    them, and no fact of theirs expires.

    Two things are kept: the block of a request (identity, query, budget), handed back whole
    when the same request comes again (to a reader too, while it has nothing to tell it and
    nothing to write); and, for an identity whose newest page holds every fact it sees, those
    facts, so that a read without a reader with another query reads only its memories. Bounded
    in bytes; emptied, with the other caches of stored text, when a person is erased.
    """

    def __init__(self, max_bytes: int = 8 * 2**20) -> None:
        self._blocks: TextCache[_BlockKey, tuple[_word_index.Versions, ContextBlock]] = TextCache(
            max_bytes, _block_size
        )
        self._facts: TextCache[_FactsKey, KeptFacts] = TextCache(max_bytes, _facts_size)

    def serve(
        self, request: ReadRequest, make: Callable[[], Made], reading: Reading
    ) -> ContextBlock:
        """The block of ``request``: one kept, while it is still what the database holds (one
        look-up, in turns), else the one ``make`` makes from the database, kept when it may be.

        A read of the past, a read that ranks by embeddings (it reads every fact) and a read
        that owes marks are always made. A block is kept when it tells nothing and nothing waits
        to be told: the block a read without a reader would make (with ``hold``, a block that
        tells nothing holds nothing and carries no receipt). An erasure while ``make`` ran keeps
        nothing of what it read.
        """
        if request.of_the_past or request.owed or reading.ranking.reads_every_fact:
            return make().block
        with reading.turns:  # a read served from what this process kept runs whole, in turns
            kept = self._kept(request, reading)
        if kept is not None:
            return kept
        since = _cache.generation()
        made = make()
        block, pending = made.block, made.gathered.pending
        if not (block.changed or block.gave_way or block.receipt or pending.changes):
            page = _candidates.page_size(request.budget, reading.count)
            self.keep(request, page, made.gathered, block, since)
        return block

    def _kept(self, request: ReadRequest, reading: Reading) -> ContextBlock | None:
        """The block of ``request`` from what is kept, while it is still what the database
        holds: the block kept for the same request (for a reader, while its read would be
        steady); for a read without a reader, else one made from the identity's facts read
        earlier (only its memories are read, on the look-up's connection), and kept."""
        if request.reader is not None:
            if not self.holds(request):
                return None
            clock = reading.clock
            found: ContextBlock | None = reading.read(
                lambda conn: self.reuse_for_reader(conn, request, clock)
            )
            return found
        page = _candidates.page_size(request.budget, reading.count)
        if not self.holds(request, page):
            return None

        def read(conn: Connection) -> ContextBlock | Made | None:
            kept = self.reuse(conn, request, page)
            if not isinstance(kept, KeptFacts):
                return kept
            now = reading.clock() if reading.clock is not None else None
            gathered = gather(conn, request, reading.ranking, reading.count, now, read_before=kept)
            return Made(draft(gathered, request, reading.ranking, reading.count), gathered)

        since = _cache.generation()
        got: ContextBlock | Made | None = reading.read(read)
        if not isinstance(got, Made):
            return got
        self.keep(request, page, got.gathered, got.block, since)
        return got.block

    def holds(self, request: ReadRequest, page: int | None = None) -> bool:
        """Whether something is kept for ``request``: its block, or (with ``page``) the facts
        of its identity."""
        if _key_of(request) in self._blocks:
            return True
        return page is not None and _facts_key(request, page) in self._facts

    def reuse(
        self, conn: Connection, request: ReadRequest, page: int
    ) -> ContextBlock | KeptFacts | None:
        """The block made earlier for the same request, else the identity's facts read earlier,
        when the versions are those read with them (one look-up; none when nothing is kept)."""
        block = self._blocks.get(_key_of(request))
        facts = self._facts.get(_facts_key(request, page))
        if block is None and facts is None:
            return None
        who = request.who
        seen = _word_index.versions(conn, who.account, who.agent, _versions.owner_key(who.user))
        if seen is None:
            return None
        if block is not None and block[0] == seen:
            return block[1]
        return facts if facts is not None and facts.chosen.versions == seen else None

    def reuse_for_reader(
        self, conn: Connection, request: ReadRequest, clock: Callable[[], dt.datetime] | None
    ) -> ContextBlock | None:
        """The block kept for the same request when, for its reader, the read would be steady:
        the versions are those read with it, the reader has no change waiting to be told about
        this user or the account, and has a mark of every fact the block shows, read this hour.
        The read then has nothing to tell and nothing to write: its block is the kept one. One
        statement; ``clock``: the read's clock (None: the server's, read by the statement)."""
        kept = self._blocks.get(_key_of(request))
        if kept is None:
            return None
        versions, block = kept
        who = request.who
        assert request.reader is not None
        row: Sequence[Any] = conn.execute(
            _steady_statement(conn.dialect.name, clock is None),
            {
                **_word_index.version_params(who.account, who.agent, _versions.owner_key(who.user)),
                "reader": request.reader,
                "subjects": sorted({who.user or "", ""}),
                "ids": _marks.ids_param(conn.dialect.name, [f.id for f in block.facts]),
            },
        ).one()
        if _word_index.versions_of_columns(row[:4]) != versions or row[4]:
            return None
        marked, oldest = row[5], row[6]
        now = clock() if clock is not None else row[7].astimezone(dt.timezone.utc)
        if marked != len(block.facts) or (oldest is not None and oldest < _marks.hour(now)):
            return None
        return block

    def keep(
        self, request: ReadRequest, page: int, gathered: Gathered, block: ContextBlock, since: int
    ) -> None:
        """Keep ``block``, made from ``gathered``, and the facts it was chosen from when they are
        all the identity sees. Its versions were read with its facts, before its memories: a
        write after them changes them, so the next read makes it again. ``since``: the caches'
        ``_cache.generation()`` taken before the read; an erasure since then keeps nothing of it."""
        chosen = gathered.chosen
        if chosen is None or chosen.versions is None:
            return
        self._blocks.put(_key_of(request), (chosen.versions, block), since)
        key = _facts_key(request, page)
        kept = self._facts.get(key)
        if chosen.complete and (kept is None or kept.chosen is not chosen):
            self._facts.put(key, KeptFacts(chosen), since)


@functools.cache
def _steady_statement(dialect: str, server_clock: bool) -> sa.Select[Any]:
    """``reuse_for_reader``'s statement: the versions, whether a change waits, the marks of
    the block's facts, and the server's clock where it is the read's."""
    columns: list[Any] = [
        *_word_index.version_columns(),
        _marks.unsettled(),
        *_marks.marked_columns(dialect),
    ]
    if server_clock:
        columns.append(sa.func.clock_timestamp())
    return sa.select(*columns)


_BlockKey = tuple[str, str | None, str, str | None, int]
_FactsKey = tuple[str, str | None, str, int]


def _key_of(request: ReadRequest) -> _BlockKey:
    who = request.who
    return (who.account, who.user, who.agent, request.query, request.budget)


def _facts_key(request: ReadRequest, page: int) -> _FactsKey:
    who = request.who
    return (who.account, who.user, who.agent, page)


def _block_size(key: _BlockKey, kept: tuple[object, ContextBlock]) -> int:
    block = kept[1]
    said = sum(len(f.content) + len(f.key) for f in block.facts)
    said += sum(len(m.content) for m in block.memories)
    return 2 * (len(block.text) + len(key[3] or "") + said) + 160 * len(block.facts) + 600


def _facts_size(key: _FactsKey, kept: KeptFacts) -> int:
    # With room for their lines, tokens and words, worked out later.
    return sum(5 * (len(f.content) + len(f.key)) + 900 for f in kept.chosen.facts) + 300


def hold_token(request: ReadRequest) -> str | None:
    """The token of a read that asked for a hold: that of the block it renews, if any, whose
    changes it may then take again, else a fresh one."""
    if request.hold is None or not request.marking:
        return None
    return request.renew or secrets.token_hex(16)


def new_hold(request: ReadRequest, token: str | None, now: dt.datetime) -> _marks.Hold | None:
    """The hold of a read with ``token``, from ``now`` (the read's moment)."""
    if token is None or request.hold is None:
        return None
    return _marks.Hold(token, now + request.hold)


def receipt(token: str, mark_ids: Iterable[int], account: str) -> str:
    """What ``acknowledge`` takes: the hold's token, the marks it spends, and their account (so
    that a database distributed by account finds them on one node)."""
    ids = ",".join(str(i) for i in sorted(set(mark_ids)))
    return RECEIPT_SEPARATOR.join((token, ids, urllib.parse.quote(account, safe="")))


def parse_receipt(value: object, field: str = "receipt") -> _marks.Receipt:
    """A receipt's token, mark ids and account, or ``InvalidRequest`` naming ``field``."""
    if isinstance(value, str):
        token, separator, rest = value.partition(RECEIPT_SEPARATOR)
        ids, named, account = rest.partition(RECEIPT_SEPARATOR)
        numbers = [int(i) for i in ids.split(",") if i.isdigit() and len(i) < 19]
        if separator and _TOKEN.fullmatch(token) and numbers and len(numbers) == ids.count(",") + 1:
            return _marks.Receipt(token, numbers, urllib.parse.unquote(account) if named else None)
    raise InvalidRequest(field, "must be the receipt a block carried (block.receipt)")


_TOKEN = re.compile(r"[0-9a-f]{32}")
