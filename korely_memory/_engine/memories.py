"""Memories, search and capture: ``MemoryEngine``'s recall methods."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sqlalchemy.engine import Connection

from .._read import _candidates
from .._store import _capture_writes, _erasure, _memories, _versions
from .._text._extraction import Extractor, operations_from
from .._values import _validation
from .._values._identity import Identity
from .._values._types import CaptureReport, Fact, Memory, SearchResult
from .core import EngineCore


class _Rehearsed(Exception):
    """Rolls a dry run's transaction back, carrying what it would have done."""

    def __init__(self, report: CaptureReport) -> None:
        super().__init__("dry run")
        self.report = report


class MemoryMethods(EngineCore):
    """Memories, search and capture: ``MemoryEngine``'s recall methods."""

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
            return _memories.add(conn, who, body, self._now(conn), self._words)

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
            _erasure.forget_memory(conn, memory, self._now(conn), self._words)
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
            if self._ranking.reads_every_fact:
                true_now = _versions.visible(conn, who, self._now(conn))
                facts_found = self._ranking.matching_facts(text, true_now, conn)
                return facts_found, self._ranking.memories(text, _memories.recent(conn, who), conn)
            terms = self._words.distinct(text)
            best = _candidates.best_matching(conn, who, terms, self._now_or_server(conn), top)
            facts_found = [fact for fact, _ in best.facts]
            if best.has_memories is False:
                return facts_found, []
            ids = [i for i, _, _ in _memories.matching(conn, who, terms, None)[:top]]
            found = _memories.whole(conn, who.account, ids)
            return facts_found, [found[i] for i in ids if i in found]

        # Words only: one statement for the facts (and, for a person who keeps memories, those
        # of the memories), each of what is committed when it runs, as a block's; with
        # embeddings, every fact and memory from one snapshot.
        facts_found, kept = self._read(read, snapshot=self._ranking.reads_every_fact)
        self._keep_vectors()
        return SearchResult(tuple(facts_found[:top]), tuple(kept[:top]))

    def capture(
        self,
        who: Identity,
        messages: Sequence[tuple[str, str]],
        *,
        extractor: Extractor,
        dry_run: bool = False,
        max_facts: int | None = None,
        reader: str | None = None,
        keep_excerpt: bool = True,
        hold_for_owner: bool = False,
    ) -> CaptureReport:
        """Keep the facts an extractor draws from a conversation excerpt, and the excerpt.

        The extractor is called with the excerpt and ``who``'s true facts (so that
        it reuses their keys) and answers with ``Operation``s, written in one
        transaction: a fact they replace ends with ``read_from_memory``. They never
        touch another identity and never use an administrator's rights: an
        account-wide fact, or a change to a confirmed one, becomes a proposal for
        review. An operation that would write what its key already says changes
        nothing; one the engine refuses is reported and skipped.

        With ``keep_excerpt``, the excerpt is kept as a memory, the source of the
        facts written: forgetting the memory ends what was read from it, and
        erasing a fact (``forget(erase=True)``) erases the excerpts that hold its
        words. Capturing the excerpt the identity kept last again (a turn
        captured twice) writes nothing and does not call the extractor; the same
        words said again later are captured again. Without it, nothing of the
        excerpt is kept but the facts.

        With ``hold_for_owner``, an operation on the person's own facts (a fact
        about them, on a key that is free or holds a user fact of theirs) is
        not written but held for their approval, as the ``remember``,
        ``correct`` or ``forget`` it would be (step ``held``; ``pending``,
        ``approve`` and ``decline`` take it from there). Nothing held is shown
        anywhere until approved. The same change already held for the identity
        is not held twice. What is the account's is proposed for review as
        without it. No excerpt is kept (``keep_excerpt`` plays no part): its
        words would be shown before the person approved anything, and a fact
        approved is their own statement, with no source memory.

        Args:
            who: Whose memory: (account, user, agent).
            messages: The excerpt, as ``(role, text)`` pairs.
            extractor: ``(messages, facts) -> Sequence[Operation]``.
            dry_run: Report what would be done, and write nothing.
            max_facts: Refuse a new key once ``who`` holds this many facts.
            reader: The writing agent's reader name: it is not told of its own changes.
            keep_excerpt: Keep the excerpt as a memory, shown in blocks as quoted speech
                and found by ``search``.
            hold_for_owner: Hold the changes to the person's own facts for their
                approval instead of writing them.

        Returns:
            The memory kept (None without ``keep_excerpt`` or with ``hold_for_owner``)
            and what became of each operation.

        Raises:
            InvalidRequest: An argument breaks a rule, or the extractor's answer is
                not a list of operations (nothing is written).
        """
        who = _validation.identity(who)
        said = _capture_writes.excerpt(messages)
        ceiling = _validation.max_facts(max_facts)
        _validation.name("reader", reader, optional=True)
        rehearsal = _validation.flag("dry_run", dry_run)
        keeping = _validation.flag("keep_excerpt", keep_excerpt)
        holding = _validation.flag("hold_for_owner", hold_for_owner)
        keeping = keeping and not holding
        turns = [(role, text) for role, text in messages]
        if keeping and self._read(lambda conn: _capture_writes.kept_last(conn, who, said)):
            return CaptureReport(None, dry_run=rehearsal, already_captured=True)
        known = self._read(lambda conn: _versions.visible(conn, who, self._now(conn)))
        operations = operations_from(extractor(turns, known))

        def work(conn: Connection) -> CaptureReport:
            _versions.lock_person(conn, who.account, who.user, reader)
            memory = None
            if keeping:
                if _capture_writes.kept_last(conn, who, said):  # captured meanwhile
                    return CaptureReport(None, dry_run=rehearsal, already_captured=True)
                memory = _memories.add(conn, who, said, self._now(conn), self._words)
            source = memory.id if memory is not None else None
            steps = _capture_writes.apply(
                conn,
                self._writer,
                who,
                source,
                operations,
                ceiling=ceiling,
                reader=reader,
                hold=holding,
            )
            report = CaptureReport(memory, tuple(steps), dry_run=rehearsal)
            if rehearsal:
                raise _Rehearsed(dataclasses.replace(report, memory=None))
            return report

        try:
            return self._write(work)
        except _Rehearsed as rehearsed:
            return rehearsed.report
