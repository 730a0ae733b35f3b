"""The context block and its notices: ``MemoryEngine.get_context``, ``acknowledge``, ``release``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Collection, Sequence

from sqlalchemy.engine import Connection

from .._read import _read_path
from .._store import _marks, _notes
from .._text import _render
from .._values import _validation
from .._values._identity import Identity
from .._values._types import Change, ContextBlock, Fact, Note
from .core import EngineCore, Moment


class ContextMethods(EngineCore):
    """The context block and its notices: ``get_context``, ``acknowledge``, ``release``."""

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
        renew: str | None = None,
        conversation: str | None = None,
        anchor: str | None = None,
        present: Collection[int] | None = None,
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
            changes: Which kinds of change to tell: None (every kind of change to a
                fact about a person; of a fact about no one, an account fact or
                memory with no end user, only ``corrected``, ``forgotten``,
                ``stated`` and ``erased``), ``"all"``, or a list of end causes.
            as_of: The block as it was true in the world then (nothing is marked).
            known_as_of: The block as the store knew it then (nothing is marked).
            hold: With a ``reader``, hold the changes the block shows instead of
                spending them: True (10 minutes), seconds, or a ``timedelta``. No other read of
                this reader shows them meanwhile; ``acknowledge(block.receipt)``
                spends them; once the hold runs out unacknowledged, the next read
                tells them again.
            renew: The receipt of an earlier held block of the same turn, read
                again (the agent wrote meanwhile): the changes it holds are shown
                again, with any new ones, and held under this block's receipt,
                which replaces the earlier one. Needs ``reader`` and ``hold``.
            conversation: The conversation this block is for (a thread id): the
                block is a note holding only what the conversation has not been
                shown (the whole block's facts that no earlier note in the prompt
                shows, a fact shown there in an older version as a change, memories
                not shown, the changes due), and the engine keeps it
                (``block.note``; all of them: ``notes``).
            anchor: With ``conversation``, the message the note is attached to (a
                message id). A turn read again (the agent wrote meanwhile) adds a note
                to the same message: an adapter puts a message's notes back together,
                in order.
            present: With ``conversation``, the ``seq`` of the earlier notes still in
                the prompt (None: all of them). What a note no longer in the prompt
                showed (its message was summarised away) may be shown again: a fact whose
                key no note still in the prompt shows on a fact line comes under its key,
                beside any change told of it.

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
            renew=renew,
        )
        noting = _read_path.NoteRequest.of(request, conversation, anchor, present)
        request = self._owing(request)
        if noting is not None:
            return self._conversation_note(request, noting)
        return self._blocks.serve(request, lambda: self._made(request), self._reading)

    def _owing(self, request: _read_path.ReadRequest) -> _read_path.ReadRequest:
        """``request``, with the versions its reader was handed by reads that gave way: this
        read marks them."""
        if not request.marking:
            return request
        return request.with_owed(self._owed_to(request.who.account, request.reader))

    @functools.cached_property
    def _reading(self) -> _read_path.Reading:
        """What the look-ups of the blocks this process kept run on."""
        return _read_path.Reading(
            read=self._read,
            clock=self._read_clock(),
            ranking=self._ranking,
            count=self._tokens,
            turns=self._turns,
        )

    def _made(self, request: _read_path.ReadRequest) -> _read_path.Made:
        """The block of ``request`` made from the database: gathered, chosen and rendered from
        one snapshot, then (for a reader) marked, and settled as the mark step left it."""
        token = _read_path.hold_token(request)
        drafted = self._drafted(request, token)
        self._keep_vectors()
        if not request.marking:
            return _read_path.Made(drafted.block, drafted.gathered)
        return _read_path.Made(self._marked(request, drafted, token), drafted.gathered)

    def _drafted(self, request: _read_path.ReadRequest, token: str | None) -> _read_path.Drafted:
        """Gather, choose and render: the candidates, the block drafted as if every change it
        shows is told, and the reader's last reads of its facts, all from one snapshot (a read
        of one statement, or two or three with memories, needs no transaction)."""
        several = request.marking or request.of_the_past

        def read(conn: Connection) -> _read_path.Drafted:
            # A read that marks, or of the past, runs several statements: it reads the clock
            # first. The common read is one statement, which reads the server's clock itself.
            now = self._now(conn) if several else self._now_or_server(conn)
            gathered = _read_path.gather(
                conn, request, self._ranking, self._tokens, now, request.owed
            )
            block = _read_path.draft(
                gathered, request, self._ranking, self._tokens, token=token, conn=conn
            )
            if not request.marking:
                return _read_path.Drafted(gathered, block, {}, now)
            assert request.reader is not None
            ids = [f.id for f in block.facts]
            last = _marks.last_reads(conn, request.who.account, request.reader, ids)
            return _read_path.Drafted(gathered, block, last, now)

        return self._read(read, snapshot=several)

    def _marked(
        self, request: _read_path.ReadRequest, drafted: _read_path.Drafted, token: str | None
    ) -> ContextBlock:
        """Mark: write the marks of what the drafted block hands over and claim what it tells
        (in a transaction of its own, which may give way); the block as that left it."""
        gathered, block, now = drafted.gathered, drafted.block, drafted.now
        assert request.reader is not None and now is not None  # a read that marks

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

        claimed = self._write_marks(
            request.who,
            request.reader,
            block.facts,
            drafted.last_reads,
            now,
            tells=block.changed,
            pending=gathered.pending,
            hold=_read_path.new_hold(request, token, now),
            renewing=request.renew,
        )
        return _read_path.settle(block, gathered, claimed, redraw)

    def _conversation_note(
        self, request: _read_path.ReadRequest, noting: _read_path.NoteRequest
    ) -> ContextBlock:
        """``conversation=``: the turn's whole block, made and marked as any read's, then its
        note for the conversation, kept. Never served from, nor kept in, the blocks kept."""
        made = self._made(request)
        return self._noted(request, made.block, noting, made.gathered)

    def notes(self, who: Identity, conversation: str) -> list[Note]:
        """The notes kept for ``conversation`` (``get_context(..., conversation=...)``), oldest
        first: what an adapter puts back in the prompt, each at its message, byte for byte.

        Raises:
            InvalidRequest: A name breaks the name rule.
        """
        who = _validation.identity(who)
        _validation.label("conversation", conversation)
        return self._read(lambda conn: _notes.read(conn, who, conversation))

    def _noted(
        self,
        request: _read_path.ReadRequest,
        whole: ContextBlock,
        noting: _read_path.NoteRequest,
        gathered: _read_path.Gathered,
    ) -> ContextBlock:
        """The note of ``whole`` (the block for this turn) for the conversation, kept."""
        who = request.who
        conversation, anchor, present = noting.conversation, noting.anchor, noting.present

        def work(conn: Connection) -> ContextBlock:
            _notes.lock(conn, who, conversation)
            kept, seen = _notes.shown(conn, who, conversation, present)
            facts, memories, changes, derived = _notes.unshown(
                conn, who.account, whole, seen, derive=request.reader is None
            )

            def render(facts: list[Fact], derived: list[Change]) -> ContextBlock:
                # Facts take the room they need: they are a part of what the whole block showed.
                return _render.render(
                    facts=facts,
                    memories=memories,
                    changes=[*changes, *derived],
                    budget=request.budget,
                    count=self._tokens,
                    changed_more=whole.changed_more,
                    waiting=bool(memories),
                    omitted=0 if kept else whole.omitted,
                    excerpts=gathered.excerpts,
                )

            note = render(facts, derived)
            told = {c.was.id for c in note.changed}
            if any(c.was.id not in told for c in derived):  # no room to tell it: shown as a fact
                listed = {f.id for f in facts}
                facts += [
                    c.now
                    for c in derived
                    if c.was.id not in told and c.now is not None and c.now.id not in listed
                ]
                note = render(facts, [c for c in derived if c.was.id in told])
            kept_note = _notes.keep(conn, who, conversation, anchor, note, self._now(conn))
            volatile = kept_note.text
            text = f"{note.stable}\n\n{volatile}" if volatile else note.stable
            # Without its refit: a note is kept as it is, so it is never fitted to less room (a
            # refit would render it anew, from before any redaction).
            return dataclasses.replace(
                note,
                text=text,
                tokens=self._tokens(text) if text != note.text else note.tokens,
                volatile=volatile,
                receipt=whole.receipt,
                changed_more=whole.changed_more,
                gave_way=whole.gave_way,
                note=kept_note,
                _refit=None,
            )

        return self._write(work)

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
        held = _read_path.parse_receipt(receipt)
        return self._write(lambda conn: _marks.acknowledge(conn, held, self._now(conn)))

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
        held = _read_path.parse_receipt(receipt)
        return self._write(lambda conn: _marks.release(conn, held))
