"""Memories on a connection: free text kept for recall, scoped like a user fact.

A memory's words are indexed when it is kept (``korely_memory_terms``, with
how often each is said), so a block and a search find the relevant ones and
score them (BM25) from the index, never reading every memory's text. A block
then reads only as much of each memory as its budget could show.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import _database, _notes, _versions
from ._bm25 import bm25_idf, bm25_term
from ._identity import EndCause, Identity
from ._schema import facts, memories, memory_terms, personal_row
from ._types import Fact, Memory
from ._vectors import forget_vectors
from ._words import Words

RECENT = 200  # memories looked at for one block when every one is scored (embeddings)
PER_TERM = 200  # postings read per query word for a block
MAX_TERMS = 1024  # distinct words indexed of one memory


@dataclass(frozen=True)
class Excerpt:
    """A memory, and the beginning of it a block renders when it is longer than a block shows."""

    memory: Memory
    beginning: str | None


def _mine(who: Identity) -> list[sa.ColumnElement[bool]]:
    return [
        memories.c.account == who.account,
        memories.c.agent == who.agent,
        memories.c.owner_key == _versions.owner_key(who.user),
    ]


def add(conn: Connection, who: Identity, content: str, now: dt.datetime, words: Words) -> Memory:
    """Keep ``content`` as a memory of ``who``, its words in the index."""
    said = words(content)
    counts = Counter(said)
    memory_id = conn.execute(
        memories.insert()
        .values(
            account=who.account,
            owner=who.user,
            owner_key=_versions.owner_key(who.user),
            agent=who.agent,
            content=content,
            created_at=now,
            words=len(said),
            chars=len(content),
        )
        .returning(memories.c.id)
    ).scalar_one()
    rows = [
        {
            "account": who.account,
            "agent": who.agent,
            "space": _versions.owner_key(who.user),
            "term": term,
            "memory_id": memory_id,
            "tf": n,
        }
        for term, n in counts.most_common(MAX_TERMS)
    ]
    if rows:
        conn.execute(memory_terms.insert(), rows)
    return Memory(memory_id, who.account, who.user, who.agent, content, now)


def get(
    conn: Connection, who: Identity, memory_id: int, *, exclusive: bool = False
) -> Memory | None:
    """The memory of ``who`` with this id, held until the transaction ends.

    Held shared by a writer that reads a fact from it, alone by ``forget``: a
    fact read from a memory never outlives the memory's forgetting.
    """
    select = sa.select(memories).where(memories.c.id == memory_id, *_mine(who))
    select = _database.lock_rows(select, conn.dialect.name, exclusive=exclusive)
    row = conn.execute(select).first()
    return Memory.from_row(row) if row else None


_MINE_BOUND = (
    memories.c.account == sa.bindparam("account"),
    memories.c.agent == sa.bindparam("agent"),
    memories.c.owner_key == sa.bindparam("owner_key"),
)
_NEWEST = (memories.c.created_at.desc(), memories.c.id.desc())
# Built once: a read pays for running these, not for building them.
_RECENT = sa.select(memories).where(*_MINE_BOUND).order_by(*_NEWEST).limit(sa.bindparam("limit"))
_SIZES = (
    sa.select(memories.c.id, memories.c.chars)
    .where(*_MINE_BOUND)
    .order_by(*_NEWEST)
    .limit(sa.bindparam("limit"))
)
_WHOLE = sa.select(memories).where(memories.c.id.in_(sa.bindparam("ids", expanding=True)))


def _names(who: Identity, **also: object) -> dict[str, object]:
    owner = _versions.owner_key(who.user)
    return {"account": who.account, "agent": who.agent, "owner_key": owner, **also}


def recent(conn: Connection, who: Identity, limit: int = RECENT) -> list[Memory]:
    """The newest memories of ``who``, whole, newest first."""
    return [Memory.from_row(r) for r in conn.execute(_RECENT, _names(who, limit=limit))]


def newest_excerpts(conn: Connection, who: Identity, chars: int, limit: int) -> list[Excerpt]:
    """The newest memories, as many as ``chars`` characters in all can show."""
    rows = conn.execute(_SIZES, _names(who, limit=limit)).all()
    return excerpts(conn, [(i, n) for i, n in rows], chars)


@functools.lru_cache(maxsize=64)
def _lookup(n_terms: int, limited: bool) -> sa.CompoundSelect[Any]:
    """Postings of each of ``n_terms`` words (``t0``...) with their memories' sizes, and a last
    row with how many memories there are and their average length in words: one statement."""
    parts: list[sa.Select[Any]] = []
    for i in range(n_terms):
        lookup = (
            sa.select(memory_terms.c.memory_id, memory_terms.c.tf)
            .where(
                memory_terms.c.account == sa.bindparam("account"),
                memory_terms.c.agent == sa.bindparam("agent"),
                memory_terms.c.space == sa.bindparam("owner_key"),
                memory_terms.c.term == sa.bindparam(f"t{i}"),
            )
            .order_by(memory_terms.c.memory_id.desc())
        )
        if limited:
            lookup = lookup.limit(sa.bindparam("per_term"))
        hits = lookup.subquery()
        parts.append(
            sa.select(
                sa.literal(i).label("term"),
                hits.c.memory_id,
                hits.c.tf,
                memories.c.words,
                memories.c.chars.label("size"),
            ).join_from(hits, memories, memories.c.id == hits.c.memory_id)
        )
    stats = sa.select(
        sa.literal(-1),
        sa.func.count(),
        sa.literal(0),
        sa.func.coalesce(sa.func.avg(memories.c.words), 1.0),
        sa.literal(0),
    ).where(*_MINE_BOUND)
    return sa.union_all(*parts, stats)


def matching(
    conn: Connection, who: Identity, terms: Sequence[str], per_term: int | None
) -> list[tuple[int, float, int]]:
    """Memories that hold words of ``terms``, by BM25 from the index: (id, score, length in
    characters), best first. ``per_term``: postings read per word, newest first (None: all)."""
    if not terms:
        return []
    params = _names(who, per_term=per_term, **{f"t{i}": t for i, t in enumerate(terms)})
    *rows, (_, n, _, avg, _) = conn.execute(_lookup(len(terms), per_term is not None), params).all()
    if not rows:
        return []
    df = Counter(term for term, *_ in rows)
    idf = {term: bm25_idf(n, held) for term, held in df.items()}
    average = float(avg)
    scores: dict[int, float] = {}
    sizes: dict[int, int] = {}
    for term, memory_id, tf, words, size in rows:
        weight = idf[term] * bm25_term(tf, words, average)
        scores[memory_id] = scores.get(memory_id, 0.0) + weight
        sizes[memory_id] = size
    ranked = sorted(scores, key=lambda i: (-scores[i], -i))
    return [(i, scores[i], sizes[i]) for i in ranked]


def excerpts(conn: Connection, chosen: Sequence[tuple[int, int]], chars: int) -> list[Excerpt]:
    """The memories ``chosen`` ((id, length in characters), in the order to show them), as many
    as ``chars`` characters in all could show; of the last, only what fits in them is rendered."""
    taken: list[int] = []
    left = chars
    for memory_id, size in chosen:
        if left <= 0:
            break
        taken.append(memory_id)
        left -= size
    found = whole(conn, taken)
    out = []
    for memory_id in taken:
        memory = found.get(memory_id)
        if memory is not None:
            long = len(memory.content) > chars
            out.append(Excerpt(memory, memory.content[:chars] if long else None))
    return out


def whole(conn: Connection, memory_ids: Sequence[int]) -> dict[int, Memory]:
    """These memories with all their text."""
    if not memory_ids:
        return {}
    rows = conn.execute(_WHOLE, {"ids": sorted(set(memory_ids))})
    return {r.id: Memory.from_row(r) for r in rows}


def erase_holding(conn: Connection, versions: Sequence[Fact], words: Words) -> list[int]:
    """Delete the memories that hold the words of ``versions`` (all of one key, before their
    words are erased): those any of them was read from, and those of the same namespace that
    hold most of a version's words (more than half of its distinct words, and at least two
    when it has two), in each version's namespace. Facts read from a deleted memory keep
    their words and lose the link.
    Returns the ids of the memories deleted."""
    doomed = {v.source_memory_id for v in versions if v.source_memory_id is not None}
    for version in versions:
        terms = words.distinct(version.content)
        if not terms:
            continue
        need = max(len(terms) // 2 + 1, min(2, len(terms)))
        held = conn.execute(
            sa.select(memory_terms.c.memory_id)
            .where(
                memory_terms.c.account == version.account,
                memory_terms.c.agent == version.agent,
                memory_terms.c.space == _versions.owner_key(version.owner),
                memory_terms.c.term.in_(terms),
            )
            .group_by(memory_terms.c.memory_id)
            .having(sa.func.count() >= need)
        )
        doomed.update(held.scalars())
    if not doomed:
        return []
    ids = sorted(doomed)
    texts = conn.execute(sa.select(memories.c.content).where(memories.c.id.in_(ids))).scalars()
    forget_vectors(conn, list(texts))
    conn.execute(memory_terms.delete().where(memory_terms.c.memory_id.in_(ids)))
    conn.execute(memories.delete().where(memories.c.id.in_(ids)))
    return ids


def forget(conn: Connection, memory: Memory, now: dt.datetime) -> int:
    """Delete the memory, end the personal facts read from it and remove their words.

    Confirmed account facts read from it stay: they are the account's, and only
    an administrator may end one. They lose their link to the memory. Returns
    how many facts ended.
    """
    read_from_it = facts.c.source_memory_id == memory.id
    personal = sa.and_(read_from_it, sa.text(personal_row("korely_facts")))
    # Read before the memory goes: its deletion clears the links (ON DELETE SET NULL).
    read_ids = conn.execute(sa.select(facts.c.id).where(personal)).scalars().all()
    # One that expired meanwhile ended then, as expired: forgetting the memory does not move it.
    _versions.end_expired(conn, _versions.versions_where(conn, personal), now)
    ended = _versions.end_versions(conn, personal, cause=EndCause.FORGOTTEN, now=now)
    _versions.erase_words(conn, personal)
    forget_vectors(conn, [memory.content])
    conn.execute(memory_terms.delete().where(memory_terms.c.memory_id == memory.id))
    conn.execute(memories.delete().where(memories.c.id == memory.id))  # links go with it
    _notes.redact(conn, memory.account, read_ids, [memory.id])
    return len(ended)
