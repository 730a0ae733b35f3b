"""Applying a capture's operations, in the write transaction that keeps its excerpt.

Every operation is written as read from a memory (what it replaces ends with
``read_from_memory``), with the excerpt's memory as its source when the excerpt
is kept, and without an administrator's rights: an account-wide fact,
or a change to one, becomes a proposal. An operation the engine refuses (a bad
key, nothing to replace, the ceiling) is reported and skipped; the others still
apply. With ``hold``, an operation on the person's own fact is not written: it is
held for the person's approval (``_pending``), as what ``approve`` will write.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db._schema import memories
from .._values import _expiry, _validation
from .._values._errors import InvalidRequest, KorelyError, LimitExceeded, NotFound
from .._values._identity import EndCause, Identity, Scope
from .._values._types import CaptureStep, Fact, Operation
from . import _pending, _versions, _writes

_BLANK_LINES = re.compile(r"\n[^\S\n]*\n\s*")


def said(role: str, text: str) -> str:
    """One message as a memory keeps it: ``role: text``, one paragraph (a blank line within the
    text becomes a line break), so the paragraphs of an excerpt are its speakers' and no
    message can add a speaker of its own."""
    return f"{role.strip()}: {_BLANK_LINES.sub(chr(10), text.strip())}"


def excerpt(messages: object) -> str:
    """The excerpt as its memory keeps it: ``role: text`` paragraphs (``said``);
    ``InvalidRequest`` naming ``messages`` unless they are (role, text) pairs of text that fit
    in one memory."""
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise InvalidRequest("messages", "must be a sequence of (role, text) pairs")
    lines = []
    for item in messages:
        if not (
            isinstance(item, tuple) and len(item) == 2 and all(isinstance(x, str) for x in item)
        ):
            raise InvalidRequest(
                "messages", f"must be (role, text) pairs of text, got {item!r:.60}"
            )
        role, text = item
        if text.strip():
            lines.append(said(role, text))
    return _validation.content("\n\n".join(lines), field="messages", limit=_validation.MAX_MEMORY)


def kept_last(conn: Connection, who: Identity, excerpt: str) -> bool:
    """Whether this very excerpt is the newest memory of this identity: a turn captured twice
    (retried, resumed) writes nothing the second time; the same words said again after other
    turns are a new excerpt."""
    newest = conn.execute(
        sa.select(memories.c.content)
        .where(
            memories.c.account == who.account,
            memories.c.agent == who.agent,
            memories.c.owner_key == _versions.owner_key(who.user),
        )
        .order_by(memories.c.id.desc())
        .limit(1)
    ).scalar()
    return newest == excerpt


def apply(
    conn: Connection,
    w: _writes.Writer,
    who: Identity,
    memory_id: int | None,
    operations: list[Operation],
    *,
    ceiling: int | None,
    reader: str | None,
    hold: bool = False,
) -> list[CaptureStep]:
    """Apply each operation in turn (``hold``: those on the person's own facts are held for
    their approval); returns what became of each."""
    steps = []
    for op in operations:
        try:
            steps.append(
                _one(conn, w, who, memory_id, op, ceiling=ceiling, reader=reader, hold=hold)
            )
        except KorelyError as error:
            steps.append(CaptureStep(op, "refused", None, str(error)))
    return steps


def _one(
    conn: Connection,
    w: _writes.Writer,
    who: Identity,
    memory_id: int | None,
    op: Operation,
    *,
    ceiling: int | None,
    reader: str | None,
    hold: bool,
) -> CaptureStep:
    key = _validation.key(op.key)
    now = w.now(conn)
    # What holds under the key now: a fact that expired holds nothing.
    before = next(
        (
            f
            for f in (
                _versions.own_current(conn, who, key),
                _versions.account_current(conn, who, key),
            )
            if f is not None and _expiry.is_live(f, now)
        ),
        None,
    )
    # The person's own: about them, on a key free or holding a user fact of theirs. What is
    # the account's (a fact for everyone, a change to one, a proposal) goes for review instead.
    if hold and op.scope is None and (before is None or before.effective_scope is Scope.USER):
        return _held(conn, who, op, key, before, ceiling=ceiling, reader=reader, now=now)
    if op.action == "end":
        if before is None:
            raise NotFound(f"no true fact under key {key!r} to end")
        if before.effective_scope is Scope.ACCOUNT:
            raise KorelyError(f"{key!r} is an account fact: only an administrator may end it")
        ended = _writes.end(
            conn, w, who, key, reader=reader, rights=False, cause=EndCause.READ_FROM_MEMORY
        )
        return CaptureStep(op, "ended", ended)
    if op.content is None:
        raise KorelyError(f"{op.action} needs content")
    content = _validation.content(op.content)
    # An operation carries no end: the same words keep the one the fact has, new words none.
    until = before.valid_until if before is not None and before.content == content else None
    if op.action == "replace" or (before is not None and op.scope is None):
        after = _writes.correct(
            conn, w, who, key, content, valid_until=until,
            reader=reader, rights=False, source=memory_id, read_from_memory=True,
        )  # fmt: skip
    else:
        scope = Scope.ACCOUNT_PROPOSED if op.scope == "account" else Scope.USER
        after = _writes.record(
            conn, w, who, key, content, valid_until=until,
            scope=scope.value, source=memory_id, ceiling=ceiling, reader=reader,
            read_from_memory=True,
        )  # fmt: skip
    return CaptureStep(op, _outcome(before, after), after)


def _held(
    conn: Connection,
    who: Identity,
    op: Operation,
    key: str,
    before: Fact | None,
    *,
    ceiling: int | None,
    reader: str | None,
    now: dt.datetime,
) -> CaptureStep:
    """Hold ``op`` for the person's approval, as what ``approve`` will write: ``forget``,
    ``correct`` (a key that holds a fact) or ``remember``. What would be refused or change
    nothing if written now is refused or unchanged now, and held not."""
    content = None
    if op.action == "end":
        if before is None:
            raise NotFound(f"no true fact under key {key!r} to end")
        operation = "forget"
    else:
        if op.content is None:
            raise KorelyError(f"{op.action} needs content")
        content = _validation.content(op.content)
        if before is not None and before.content == content:
            return CaptureStep(op, "unchanged", before)
        if op.action == "replace" and before is None:
            raise NotFound(f"no true fact under key {key!r} to correct; use remember to record one")
        operation = "remember" if before is None else "correct"
        if (
            before is None
            and ceiling is not None
            and _versions.count_own(conn, who, now) >= ceiling
        ):
            raise LimitExceeded(
                f"already {ceiling} facts kept (max_facts); correct or forget one "
                f"before adding {key!r}"
            )
    _versions.lock_key(conn, who, key)  # the same change held once, whoever captures it
    against = before.id if before is not None else None
    held = _pending.hold(
        conn, who, operation, key, content, against=against, reader=reader, now=now
    )
    return CaptureStep(op, "held", pending=held)


def _outcome(before: Fact | None, after: Fact) -> str:
    if before is not None and after.id == before.id:
        return "unchanged"
    if after.effective_scope is Scope.ACCOUNT_PROPOSED:
        return "proposed"
    return "recorded" if before is None else "replaced"


def chunks(pairs: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The excerpt in parts the engine keeps as one memory each (at most `MAX_MEMORY` characters
    as `role: text` paragraphs). A message goes whole to the next part when it does not fit in
    this one; one longer than a part is cut at paragraph breaks, else at spaces, never dropped.
    The one rule for splitting a long exchange: `tools.exchange_memories` splits a turn kept
    as memories by it too."""
    parts: list[list[tuple[str, str]]] = [[]]
    size = 0
    for role, text in pairs:
        whole = _validation.MAX_MEMORY - len(role) - 2
        while text:
            gap = 2 if parts[-1] else 0
            room = whole - size - gap
            if len(text) > room and parts[-1] and (len(text) <= whole or room < whole // 4):
                parts.append([])
                size = 0
                continue
            piece, text = _cut(text, room)
            parts[-1].append((role, piece))
            size += gap + len(role) + 2 + len(piece)
    return [part for part in parts if part]


def _cut(text: str, size: int) -> tuple[str, str]:
    """At most `size` characters of `text`, cut where a paragraph or a word ends; and the rest."""
    if len(text) <= size:
        return text, ""
    cut = text.rfind("\n\n", 0, size)
    if cut <= 0:
        cut = text.rfind(" ", 0, size)
    if cut <= 0:
        cut = size
    return text[:cut].strip(), text[cut:].strip()
