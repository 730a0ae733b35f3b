"""The notes of conversations: the one module that writes ``korely_notes``.

A read with ``conversation=`` shows only what that conversation has not been
shown (``noted``): the facts of the whole block that no earlier note still in
the prompt shows, a fact shown there in an older version as a change, the
memories not shown, and the changes due. The note is kept with the ids of what
it shows and where each of its lines shows which, so that an adapter can put it
back where it was, byte for byte, and so that erasure finds the words it holds:
a line showing an erased version or a forgotten memory is replaced by
``REDACTED``. A turn read again (the agent wrote) adds a note to the same
message: the notes of one message are put back together, in order.
Notes are the person's data: erased with them, exported, and trimmed 90 days
after the conversation's last note.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db import _database
from .._db._schema import facts, memories, notes
from .._text._render import MAX_CHANGES
from .._values._identity import EndCause, Identity, Scope
from .._values._types import CHANGED, KNOWN, MEMORIES, Change, ContextBlock, Fact, Memory, Note
from . import _versions

REDACTED = "- (erased)"
"""What a line of a note says once the words it showed are erased."""
LIFETIME = dt.timedelta(days=90)
"""A conversation's notes go this long after its last one."""


@dataclass(frozen=True)
class Shown:
    """What the notes still in the prompt showed."""

    facts: frozenset[int]
    memories: frozenset[int]
    changed: frozenset[int]
    keyed: frozenset[int]
    """The versions shown on a fact line, under their key (a change's line names no key)."""


def _slot(fact: Fact) -> tuple[bool, str]:
    return fact.effective_scope is Scope.ACCOUNT, fact.key


def _where(who: Identity, conversation: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        notes.c.account == who.account,
        notes.c.owner_key == _versions.owner_key(who.user),
        notes.c.agent == who.agent,
        notes.c.conversation == conversation,
    )


def read(conn: Connection, who: Identity, conversation: str) -> list[Note]:
    """The conversation's notes, oldest first."""
    return [note for note, _ in _parsed(_rows(conn, who, conversation))]


def _rows(conn: Connection, who: Identity, conversation: str) -> Iterable[Any]:
    return conn.execute(sa.select(notes).where(_where(who, conversation)).order_by(notes.c.seq))


def _parsed(rows: Iterable[Any]) -> Iterator[tuple[Note, dict[str, Any]]]:
    """Each row's note, with the ids its lines show (its ``items``)."""
    for row in rows:
        items = json.loads(row._mapping["items"])
        yield _note(row._mapping, items), items


def _note(m: Any, items: dict[str, Any]) -> Note:
    return Note(
        conversation=m["conversation"],
        agent=m["agent"],
        seq=m["seq"],
        anchor=m["anchor"],
        text=m["text"],
        facts=tuple(items["facts"]),
        memories=tuple(items["memories"]),
        changed=tuple(items["changed"]),
        created_at=m["created_at"],
    )


def shown(
    conn: Connection, who: Identity, conversation: str, present: Collection[int] | None
) -> tuple[list[Note], Shown]:
    """The notes of the conversation still in the prompt (the ``seq`` in ``present``; None: all
    of them), oldest first, and what they showed, in one read."""
    kept: list[Note] = []
    keyed: set[int] = set()
    for note, items in _parsed(_rows(conn, who, conversation)):
        if present is None or note.seq in present:
            kept.append(note)
            keyed |= _keyed(items)
    return kept, Shown(
        facts=frozenset(i for n in kept for i in n.facts),
        memories=frozenset(i for n in kept for i in n.memories),
        changed=frozenset(i for n in kept for i in n.changed),
        keyed=frozenset(keyed),
    )


def _keyed(items: dict[str, Any]) -> set[int]:
    """The versions a note shows on a fact line: a line of one version that is not a change's
    (``- no longer true: OLD`` shows one version too, the one it tells the end of)."""
    changed = set(items["changed"])
    ids = (ids[0] for _, ids in items["lines"] if len(ids) == 1 and ids[0].startswith("f"))
    return {int(i[1:]) for i in ids if int(i[1:]) not in changed}


def unshown(
    conn: Connection, account: str, block: ContextBlock, seen: Shown, *, derive: bool
) -> tuple[list[Fact], list[Memory], list[Change], list[Change]]:
    """What of ``block`` (the whole block for this turn) the conversation has not been shown:
    its facts, its memories, the changes to tell (those a note still in the prompt told are
    there already), and the changes derived from the notes. With ``derive`` (a read without a
    reader, whose changes no mark tells), a fact whose key the conversation was shown in an
    older version is told as a change from that version, as long as changes have room in a
    block (``MAX_CHANGES``); past that it is shown as a fact. A reader's changes are its
    marks': never its own, once for the reader, in whichever conversation reads first.

    A fact is shown again, on a line with its key, when no fact line of the notes still in the
    prompt names its key (the note that did left with its message): the same version, or one a
    change tells now, which a change's line alone would show without its key."""
    told_now = {c.now.id for c in block.changed if c.now is not None}
    changes = [c for c in block.changed if c.was.id not in seen.changed]
    keyed = _keyed_slots(conn, account, seen.keyed)
    new_facts = [
        f
        for f in block.facts
        if _slot(f) not in keyed or (f.id not in seen.facts and f.id not in told_now)
    ]
    listed = {f.id for f in new_facts}
    unkeyed = [
        c.now
        for c in changes
        if c.now is not None and c.now.id not in listed and _slot(c.now) not in keyed
    ]
    new_facts = [*unkeyed, *new_facts]
    derived: list[Change] = []
    if derive and seen.facts and new_facts:
        older: dict[tuple[bool, str], Fact] = {}
        for f in _versions.by_ids(
            conn, account, sorted(seen.facts)
        ):  # in id order: the latest last
            older[_slot(f)] = f
        older = {slot: f for slot, f in older.items() if not f.erased and f.id not in seen.changed}
        kept: list[Fact] = []
        for fact in new_facts:
            was = older.get(_slot(fact))
            if was is None or was.id == fact.id or len(changes) + len(derived) >= MAX_CHANGES:
                kept.append(fact)
                continue
            day = (was.ended_recorded_at or fact.recorded_at).date()
            derived.append(Change(was, fact, day, was.end_cause or EndCause.CORRECTED))
            if _slot(fact) not in keyed:  # told, and shown under its key
                kept.append(fact)
        new_facts = kept
    new_memories = [m for m in block.memories if m.id not in seen.memories]
    return new_facts, new_memories, changes, derived


def _keyed_slots(
    conn: Connection, account: str, keyed: frozenset[int]
) -> frozenset[tuple[bool, str]]:
    """The keys (by scope) that fact lines of the notes still in the prompt show: those of the
    ``keyed`` versions whose words are not erased (their line says ``REDACTED``)."""
    found = _versions.by_ids(conn, account, sorted(keyed)) if keyed else []
    return frozenset(_slot(f) for f in found if not f.erased)


def lines_of(block: ContextBlock) -> list[tuple[int, list[str]]]:
    """The lines of ``block.volatile`` that show something, by their place among its lines,
    with the ids they show (``f<id>`` for versions, ``m<id>`` for memories)."""
    items: dict[str, list[list[str]]] = {
        CHANGED: [
            [f"f{c.was.id}", *([f"f{c.now.id}"] if c.now is not None else [])]
            for c in block.changed
        ],
        KNOWN: [[f"f{f.id}"] for f in block.facts],
        MEMORIES: [[f"m{m.id}"] for m in block.memories],
    }
    found: list[tuple[int, list[str]]] = []
    waiting: list[list[str]] = []
    for index, line in enumerate(block.volatile.split("\n")):
        if line in items:
            waiting = list(items[line])
        elif line and waiting:
            found.append((index, waiting.pop(0)))
    return found


def _redacted(text: str, lines: list[tuple[int, list[str]]], gone: set[str]) -> str:
    """``text`` with each of ``lines`` that shows one of ``gone`` replaced by ``REDACTED``."""
    doomed = {index for index, ids in lines if gone.intersection(ids)}
    if not doomed:
        return text
    return "\n".join(
        REDACTED if index in doomed else line for index, line in enumerate(text.split("\n"))
    )


def lock(conn: Connection, who: Identity, conversation: str) -> None:
    """Taken first by a transaction that writes a note: the person's lock (shared, so their
    erasure waits), then the conversation's, alone: one note of a conversation is decided at a
    time, from the notes before it (two reads at once would each show what the other shows)."""
    _versions.lock_person(conn, who.account, who.user)
    key = ("notes", who.account, _versions.owner_key(who.user), who.agent, conversation)
    _database.lock_all(conn, [key], shared=False)


def keep(
    conn: Connection,
    who: Identity,
    conversation: str,
    anchor: str | None,
    block: ContextBlock,
    now: dt.datetime,
) -> Note:
    """Keep ``block`` (a note) as the conversation's next note, attached to ``anchor``. Under
    ``lock``.

    Taken with the versions and memories it shows held (``FOR SHARE`` on PostgreSQL), so an
    erasure of one of them waits for this note and then redacts it; one erased since the
    block was read is redacted here."""
    dialect = conn.dialect.name
    fact_ids = sorted({f.id for f in block.facts} | _change_ids(block.changed))
    memory_ids = sorted(m.id for m in block.memories)
    gone: set[str] = set()
    if fact_ids:
        shown = sa.select(facts.c.id, facts.c.content).where(
            facts.c.account == who.account, facts.c.id.in_(fact_ids)
        )
        held = conn.execute(_database.lock_rows(shown, dialect)).all()
        alive = {i for i, content in held if content}
        gone |= {f"f{i}" for i in fact_ids if i not in alive}
    if memory_ids:
        quoted = sa.select(memories.c.id).where(
            memories.c.account == who.account, memories.c.id.in_(memory_ids)
        )
        held_memories = conn.execute(_database.lock_rows(quoted, dialect)).scalars()
        alive = set(held_memories)
        gone |= {f"m{i}" for i in memory_ids if i not in alive}
    lines = lines_of(block)
    text = _redacted(block.volatile, lines, gone)
    shown_ids = sorted({f.id for f in block.facts} | {c.now.id for c in block.changed if c.now})
    changed_ids = sorted(c.was.id for c in block.changed)
    items = {
        "facts": shown_ids,
        "memories": memory_ids,
        "changed": changed_ids,
        "lines": [[index, ids] for index, ids in lines],
    }
    where = _where(who, conversation)
    last = conn.execute(sa.select(sa.func.max(notes.c.seq)).where(where)).scalar()
    seq = (last or 0) + 1
    conn.execute(
        notes.insert().values(
            account=who.account,
            owner_key=_versions.owner_key(who.user),
            agent=who.agent,
            conversation=conversation,
            seq=seq,
            anchor=anchor,
            created_at=now,
            items=json.dumps(items),
            text=text,
        )
    )
    return Note(
        conversation=conversation,
        agent=who.agent,
        seq=seq,
        anchor=anchor,
        text=text,
        facts=tuple(shown_ids),
        memories=tuple(memory_ids),
        changed=tuple(changed_ids),
        created_at=now,
    )


def _change_ids(changes: Iterable[Change]) -> set[int]:
    return {i for c in changes for i in (c.was.id, c.now.id if c.now else None) if i is not None}


_CHUNK = 100
"""Ids looked for per statement (each is a ``LIKE``: SQLite limits an expression's depth)."""


def redact(
    conn: Connection,
    account: str,
    fact_ids: Collection[int] = (),
    memory_ids: Collection[int] = (),
) -> int:
    """Replace every line of the account's notes that shows one of these versions or memories
    by ``REDACTED`` (their words are being erased). Returns how many notes changed."""
    names = [f"f{i}" for i in sorted(set(fact_ids))] + [f"m{i}" for i in sorted(set(memory_ids))]
    found: dict[tuple[str, str, str, int], Any] = {}
    for start in range(0, len(names), _CHUNK):
        chunk = names[start : start + _CHUNK]
        holding = sa.or_(*(notes.c["items"].contains(json.dumps(n)) for n in chunk))
        for row in conn.execute(sa.select(notes).where(notes.c.account == account, holding)):
            m = row._mapping
            found[(m["owner_key"], m["agent"], m["conversation"], m["seq"])] = m
    doomed = set(names)
    changed = 0
    for (owner_key, agent, conversation, seq), m in found.items():
        lines = [(index, ids) for index, ids in json.loads(m["items"])["lines"]]
        text = _redacted(m["text"], lines, doomed)
        if text == m["text"]:
            continue
        changed += 1
        conn.execute(
            notes.update()
            .where(
                notes.c.account == account,
                notes.c.owner_key == owner_key,
                notes.c.agent == agent,
                notes.c.conversation == conversation,
                notes.c.seq == seq,
            )
            .values(text=text)
        )
    return changed


def erase(conn: Connection, account: str, user: str) -> int:
    """Delete every note of ``user``'s conversations in ``account``. Returns how many."""
    return conn.execute(
        notes.delete().where(notes.c.account == account, notes.c.owner_key == user)
    ).rowcount


def of_person(conn: Connection, account: str, user: str) -> list[Note]:
    """Every note of ``user``'s conversations in ``account``, by agent, conversation, order."""
    rows = conn.execute(
        sa.select(notes)
        .where(notes.c.account == account, notes.c.owner_key == user)
        .order_by(notes.c.agent, notes.c.conversation, notes.c.seq)
    )
    return [note for note, _ in _parsed(rows)]


def trim(conn: Connection, now: dt.datetime) -> int:
    """Delete the notes of conversations whose last note is older than ``LIFETIME``."""
    key = (notes.c.account, notes.c.owner_key, notes.c.agent, notes.c.conversation)
    live = sa.select(*key).group_by(*key).having(sa.func.max(notes.c.created_at) >= now - LIFETIME)
    old = sa.select(*key).where(notes.c.created_at < now - LIFETIME).distinct()
    stale = [tuple(r) for r in conn.execute(old.except_(live))]
    gone = 0
    for account, owner_key, agent, conversation in stale:
        gone += conn.execute(
            notes.delete().where(
                notes.c.account == account,
                notes.c.owner_key == owner_key,
                notes.c.agent == agent,
                notes.c.conversation == conversation,
            )
        ).rowcount
    return gone
