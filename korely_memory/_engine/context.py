"""The context block and its notices: ``MemoryEngine.get_context``, ``acknowledge``, ``release``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy.engine import Connection

from .. import _marks, _read_path, _validation
from .._identity import Identity
from .._types import Change, ContextBlock
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
        token = _read_path.hold_token(request)
        owed = self._owed_to(request.who.account, request.reader) if request.marking else []

        def read(
            conn: Connection,
        ) -> tuple[_read_path.Gathered, ContextBlock, dict[int, dt.datetime], dt.datetime | None]:
            # A read that marks, or of the past, runs several statements: it reads the clock
            # first. The common read is one statement, which reads the server's clock itself.
            marks = request.marking or request.of_the_past
            now = self._now(conn) if marks else self._now_or_server(conn)
            gathered = _read_path.gather(conn, request, self._ranking, self._tokens, now, owed)
            block = _read_path.draft(
                gathered, request, self._ranking, self._tokens, token=token, conn=conn
            )
            if not request.marking or request.reader is None:
                return gathered, block, {}, now
            ids = [f.id for f in block.facts]
            return (
                gathered,
                block,
                _marks.last_reads(conn, request.who.account, request.reader, ids),
                now,
            )

        # A read that marks, or of the past, takes several statements from one snapshot; the
        # common read is one statement (two or three with memories) and needs no transaction.
        gathered, block, last, now = self._read(
            read, snapshot=request.marking or request.of_the_past
        )
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

        assert now is not None  # read for a read that marks
        held = _read_path.new_hold(request, token, now)
        claims = gathered.pending.marks_settled_by(block.changed)
        claimed = self._write_marks(
            request.who, request.reader, block.facts, claims, last, now, held
        )
        return _read_path.settle(block, gathered, claimed, redraw)

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
        return self._write(lambda conn: _marks.acknowledge(conn, token, ids, self._now(conn)))

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
