"""Erasing a person's words, in one place: the three erasures, each a list of steps over the
tables that the schema says hold words (``_schema.Holds``).

- ``erase`` (``erase_user``): everything about a person, in one transaction that holds their
  lock alone (``lock_person``), so no write about them commits while it runs. Confirmed account
  facts they stated are the account's and stay, their name replaced by a pseudonym; a row in
  ``korely_erasures`` records that an erasure happened, naming them only by it.
- ``erase_key`` (``forget(erase=True)``): the words of every version under a key, and every
  copy of them: the excerpts that hold them, the lines of notes that showed them, the store's
  item, the changes to it held for approval, their vectors.
- ``forget_memory``: a memory, and the words of the personal facts read from it, and every copy
  of those.

Each step names the tables whose words it removes. ``uncovered`` checks, when this module is
imported, that every text column says what it holds and that every table holding words has
exactly one step in each erasure: a column of words added to the schema is never left out of one.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._db._schema import (
    ACCOUNT_SPACE,
    Base,
    Holds,
    account_row,
    admins,
    erasures,
    facts,
    items,
    memories,
    personal_row,
)
from .._text._words import Words, fact_text
from .._values._identity import EndCause, Identity, Scope
from .._values._types import ErasureReport, Fact, Memory, TrimReport
from . import _items, _marks, _memories, _notes, _pending, _versions, _word_index
from ._vectors import forget_vectors

_PERSONAL = sa.text(personal_row("korely_facts"))
_ACCOUNT = sa.text(account_row("korely_facts"))

# -- the declaration --------------------------------------------------------------------------

_WORDS = (Holds.SAID, Holds.LABEL)
_TEXT_TYPES = (sa.Text, sa.JSON, sa.LargeBinary)


def _is_text(column: sa.Column[Any]) -> bool:
    kind = column.type
    if isinstance(kind, sa.TypeDecorator):
        kind = kind.impl_instance
    return isinstance(kind, _TEXT_TYPES)


def holding(table: sa.Table, *kinds: Holds) -> list[sa.Column[Any]]:
    """The columns of ``table`` that hold a person's words (said or labels; ``kinds``: only
    these), in the schema's order."""
    wanted = kinds or _WORDS
    return [c for c in table.columns if c.info.get("holds") in wanted]


def words_columns(metadata: sa.MetaData = Base.metadata) -> dict[str, list[str]]:
    """Every table that holds a person's words, and the columns that do: what an erasure clears,
    and what its proof scans."""
    found = {t.name: [c.name for c in holding(t)] for t in metadata.sorted_tables}
    return {name: columns for name, columns in found.items() if columns}


def _emptied(table: sa.Table) -> dict[str, Any]:
    """The values that remove what ``table``'s rows said and leave the rows (labels stay)."""
    return {c.name: None if c.nullable else "" for c in holding(table, Holds.SAID)}


def _texts_of(versions: Iterable[Fact]) -> list[str]:
    """The texts a version's vectors are kept of: what it is found by, and its words alone (as a
    store's search embeds them)."""
    return [text for f in versions for text in (fact_text(f), f.content)]


# -- the steps ----------------------------------------------------------------------------------

C = TypeVar("C")


@dataclass(frozen=True)
class _Step(Generic[C]):
    """What one erasure does to the words of ``tables``; returns how many rows it removed."""

    tables: tuple[str, ...]
    run: Callable[[C], int]


@dataclass
class _Person:
    """``erase``: a person's data under way to go."""

    conn: Connection
    account: str
    user: str
    versions: list[Fact]  # their own versions and proposals, every one
    personal: sa.Select[tuple[int]]  # their ids
    memories: sa.Select[tuple[int]]  # the ids of their memories


@dataclass
class _Key:
    """``erase_key``: every version under one key, whose words go."""

    conn: Connection
    who: Identity
    fact: Fact
    every: sa.ColumnElement[bool]  # its versions
    versions: list[Fact]
    words: Words
    gone: dict[int, str] = field(default_factory=dict)  # the excerpts deleted: id, words


@dataclass
class _Forgotten:
    """``forget_memory``: a memory, and the personal facts read from it."""

    conn: Connection
    memory: Memory
    now: dt.datetime
    words: Words
    read_from_it: sa.ColumnElement[bool]  # the personal facts read from it
    versions: list[Fact]  # as they were before it was forgotten


def _run(steps: Sequence[_Step[C]], erasing: C) -> dict[str, int]:
    return {step.tables[0]: step.run(erasing) for step in steps}


# -- erase: a person ----------------------------------------------------------------------------


def _person_vectors(p: _Person) -> int:
    said = p.conn.execute(
        sa.select(memories.c.content).where(
            memories.c.account == p.account, memories.c.id.in_(p.memories)
        )
    )
    forget_vectors(p.conn, p.account, [*_texts_of(p.versions), *said.scalars()])
    return 0


def _person_facts(p: _Person) -> int:
    """Their versions and proposals, and their words in the index; account facts that point into
    them lose the link (those they stated stay, under the pseudonym, in ``erase``)."""
    conn, account = p.conn, p.account
    conn.execute(
        facts.update()
        .where(facts.c.account == account, facts.c.replaced_by_id.in_(p.personal))
        .values(replaced_by_id=None)
    )
    _word_index.erased(conn, account, p.user)
    theirs = sa.and_(facts.c.account == account, facts.c.owner_key == p.user)
    return int(conn.execute(facts.delete().where(theirs, _PERSONAL)).rowcount)


_PERSON: tuple[_Step[_Person], ...] = (
    # First: the words of what is about to go are read to find the vectors.
    _Step(("korely_vectors",), _person_vectors),
    _Step(("korely_notes",), lambda p: _notes.erase(p.conn, p.account, p.user)),
    _Step(("korely_items",), lambda p: _items.erase(p.conn, p.account, p.user)),
    _Step(("korely_pending",), lambda p: _pending.erase(p.conn, p.account, p.user)),
    _Step(("korely_facts", "korely_fact_terms"), _person_facts),
    # With their index; the facts read from them are gone already.
    _Step(
        ("korely_memories", "korely_memory_terms"),
        lambda p: _memories.delete(p.conn, p.account, p.memories),
    ),
)


def erase(conn: Connection, account: str, user: str, now: dt.datetime) -> ErasureReport:
    """Delete everything about ``user`` in ``account``; their confirmed account facts stay."""
    _versions.lock_person(conn, account, user, erasing=True)
    pseudonym = f"erased-{secrets.token_hex(8)}"
    theirs = sa.and_(facts.c.account == account, facts.c.owner_key == user)
    personal = sa.select(facts.c.id).where(theirs, _PERSONAL)
    their_memories = sa.select(memories.c.id).where(
        memories.c.account == account, memories.c.owner_key == user
    )
    versions = _versions.by_ids(conn, account, conn.execute(personal).scalars().all())
    n_marks = _marks.delete_for_person(conn, account, user, personal)
    gone = _run(_PERSON, _Person(conn, account, user, versions, personal, their_memories))
    kept = conn.execute(
        facts.update().where(theirs, _ACCOUNT).values(owner=pseudonym, owner_key=pseudonym)
    ).rowcount
    conn.execute(
        facts.update()
        .where(facts.c.account == account, facts.c.confirmed_by == user)
        .values(confirmed_by=pseudonym)
    )
    n_admin = conn.execute(
        admins.delete().where(admins.c.account == account, admins.c.user == user)
    ).rowcount
    conn.execute(erasures.insert().values(account=account, pseudonym=pseudonym, erased_at=now))
    return ErasureReport(
        pseudonym=pseudonym,
        facts=gone["korely_facts"],
        memories=gone["korely_memories"],
        marks=n_marks,
        admin_grants=n_admin,
        account_facts_kept=kept,
        notes=gone["korely_notes"],
        items=gone["korely_items"],
        pending=gone["korely_pending"],
    )


# -- erase_key: the words of a key --------------------------------------------------------------


def _key_memories(k: _Key) -> int:
    k.gone = _memories.erase_holding(k.conn, k.versions, k.words)
    return len(k.gone)


def _key_facts(k: _Key) -> int:
    """Every version keeps its key and loses its words. They are ended: the index holds no word
    of them (``_word_index.ended``)."""
    cleared = _emptied(facts) | {"words": 0}
    return int(k.conn.execute(facts.update().where(k.every).values(cleared)).rowcount)


def _key_pending(k: _Key) -> int:
    if k.fact.effective_scope is Scope.ACCOUNT:
        return 0  # the account's: nobody holds a change to it for approval
    return _pending.erase_key(k.conn, k.who, k.fact.key)


def _key_vectors(k: _Key) -> int:
    forget_vectors(k.conn, k.fact.account, [*_texts_of(k.versions), *k.gone.values()])
    return 0


_KEY: tuple[_Step[_Key], ...] = (
    # Found by the versions' words, before they go.
    _Step(("korely_memories", "korely_memory_terms"), _key_memories),
    _Step(("korely_facts", "korely_fact_terms"), _key_facts),
    # After the rows are written: a note being kept holds them (FOR SHARE), so this waits for it
    # to commit, and then sees it.
    _Step(
        ("korely_notes",),
        lambda k: _notes.redact(k.conn, k.fact.account, [v.id for v in k.versions], list(k.gone)),
    ),
    _Step(("korely_items",), lambda k: _items.erase_fact(k.conn, k.fact)),
    _Step(("korely_pending",), _key_pending),
    _Step(("korely_vectors",), _key_vectors),
)


def erase_key(conn: Connection, who: Identity, fact: Fact, words: Words) -> None:
    """Remove the words of every version under ``fact``'s key (ended), and every copy of them:
    the memories holding them, the lines of notes showing them, the item they are the words of,
    the changes to it ``who`` holds for approval, their vectors."""
    every = _versions.same_key(fact)
    versions = _versions.versions_where(conn, every)
    _run(_KEY, _Key(conn, who, fact, every, versions, words))


# -- forget_memory: a memory --------------------------------------------------------------------


def _memory_facts(f: _Forgotten) -> int:
    """The personal facts read from it end, and lose their words. Confirmed account facts read
    from it stay: they are the account's, and only an administrator may end one."""
    # One that expired meanwhile ended then, as expired: forgetting the memory does not move it.
    _versions.end_expired(f.conn, f.versions, f.now)
    ended = _versions.end_versions(f.conn, f.read_from_it, cause=EndCause.FORGOTTEN, now=f.now)
    f.conn.execute(facts.update().where(f.read_from_it).values(_emptied(facts) | {"words": 0}))
    return len(ended)


def _memory_items(f: _Forgotten) -> int:
    """An item whose words were read from it goes with them: one that holds a version read from
    it, and one whose key such a version held until now (written again by a capture). An item
    whose key a later version, not read from it, holds stays."""
    held = [version.id for version in f.versions]
    f.conn.execute(
        items.delete().where(items.c.account == f.memory.account, items.c.fact_id.in_(held))
    )
    for version in f.versions:
        if version.is_current:
            _items.erase_fact(f.conn, version)
    return 0


def _memory_memories(f: _Forgotten) -> int:
    memory = f.memory
    _memories.unanswer(f.conn, memory.account, [memory.id], f.words)
    gone = _memories.delete(f.conn, memory.account, [memory.id])
    # Account facts read from it lose their link: every block of the account shows them.
    _word_index.touch(
        f.conn,
        [
            (memory.account, memory.agent, _versions.owner_key(memory.owner)),
            (memory.account, memory.agent, ACCOUNT_SPACE),
        ],
    )
    return gone


def _memory_vectors(f: _Forgotten) -> int:
    forget_vectors(f.conn, f.memory.account, [*_texts_of(f.versions), f.memory.content])
    return 0


_MEMORY: tuple[_Step[_Forgotten], ...] = (
    _Step(("korely_facts", "korely_fact_terms"), _memory_facts),
    _Step(("korely_items",), _memory_items),
    # A capture that holds changes for approval keeps no excerpt: none is drawn from a memory.
    _Step(("korely_pending",), lambda f: 0),
    _Step(("korely_memories", "korely_memory_terms"), _memory_memories),
    _Step(
        ("korely_notes",),
        lambda f: _notes.redact(
            f.conn, f.memory.account, [v.id for v in f.versions], [f.memory.id]
        ),
    ),
    _Step(("korely_vectors",), _memory_vectors),
)


def forget_memory(conn: Connection, memory: Memory, now: dt.datetime, words: Words) -> int:
    """Delete the memory, end the personal facts read from it and remove their words, and every
    copy of both. Confirmed account facts read from it lose their link to it. Returns how many
    facts ended."""
    read_from_it = sa.and_(
        facts.c.account == memory.account, facts.c.source_memory_id == memory.id, _PERSONAL
    )
    # Read before the memory goes, which clears the links.
    versions = _versions.versions_where(conn, read_from_it)
    ids = sa.and_(facts.c.account == memory.account, facts.c.id.in_([v.id for v in versions]))
    done = _run(_MEMORY, _Forgotten(conn, memory, now, words, ids, versions))
    return done["korely_facts"]


# -- what keeps them whole ----------------------------------------------------------------------

_ERASURES: dict[str, Sequence[_Step[Any]]] = {
    "erase": _PERSON,
    "erase_key": _KEY,
    "forget_memory": _MEMORY,
}


def uncovered(
    metadata: sa.MetaData = Base.metadata,
    erasures: dict[str, Sequence[_Step[Any]]] = _ERASURES,
) -> list[str]:
    """What breaks the declaration: a text column that does not say what it holds of a person,
    a table holding words that an erasure has no step for, or two steps for; empty when every
    erasure reaches every word."""
    problems = [
        f"{t.name}.{c.name}: a column of text says not what it holds of a person "
        "(info=SAID, LABEL or NO_WORDS)"
        for t in metadata.sorted_tables
        for c in t.columns
        if _is_text(c) and not isinstance(c.info.get("holds"), Holds)
    ]
    declared = set(words_columns(metadata))
    for name, steps in erasures.items():
        named = [table for step in steps for table in step.tables]
        problems += [
            f"{name}: no step erases {t}, which holds words"
            for t in sorted(declared)
            if t not in named
        ]
        problems += [
            f"{name}: two steps erase {t}" for t in sorted(set(named)) if named.count(t) > 1
        ]
        problems += [
            f"{name}: a step erases {t}, which holds no words"
            for t in sorted(set(named))
            if t not in declared
        ]
    return problems


_BROKEN = uncovered()
if _BROKEN:
    raise RuntimeError("erasure does not reach every word: " + "; ".join(_BROKEN))


def trim(conn: Connection, now: dt.datetime, *, expire_by: dt.datetime) -> TrimReport:
    """Facts whose ``valid_until`` came by ``expire_by`` are ended as expired; marks go 90 days
    after their last read (as of ``now``), and once the change they waited for was told."""
    ended = _versions.end_all_expired(conn, expire_by)
    expired, told = _marks.trim(conn, now)
    return TrimReport(
        marks_expired=expired, marks_told=told, facts_expired=ended, notes=_notes.trim(conn, now)
    )
