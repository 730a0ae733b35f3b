"""Memories on a connection: free text kept for recall, scoped like a user fact.

A memory's words are indexed when it is kept (``korely_memory_terms``, with
how often each is said), so a block and a search find the relevant ones and
score them (BM25) from the index, never reading every memory's text. A block
then reads only as much of each memory as its budget could show.

A conversation kept turn by turn says little in each turn: "I signed up
yesterday" answers "What did you sign up for?". So a memory kept within
``REPLY_WINDOW`` of the previous one of its namespace answers it
(``replies_to``): its index also holds the last ``CONTEXT_WORDS`` words of
that one, and the days it is about (``_days``); and a memory scores a share
(``ANSWERED``) of the scores of the next two memories of the conversation (the
one answering it, and the one answering that). A memory's own words come
first in its index; the others fill what room is left. When a memory goes,
the index of the one answering it is rebuilt from its own words, so that no
copy of the words that went is left; so is the index of a memory spared by an
erasure that found it by the words of the memory it answers.
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

from .._db import _database
from .._db._schema import ACCOUNT_SPACE, as_utc, facts, memories, memory_terms
from .._text import _days
from .._text._bm25 import bm25_idf, bm25_term
from .._text._words import Words
from .._values._identity import Identity
from .._values._types import Fact, Memory
from . import _versions, _word_index

RECENT = 200  # memories looked at for one block when every one is scored (embeddings)
PER_TERM = 200  # postings read per query word for a block
MAX_TERMS = 1024  # distinct words indexed of one memory
REPLY_WINDOW = dt.timedelta(minutes=10)  # a memory kept this soon after another answers it
CONTEXT_WORDS = 64  # words of the memory answered, from its end, in the index of the answer
CONTEXT_CHARS = 1_000  # characters read from the end of the memory answered
ANSWERED = 0.3  # the share of the answer's score a memory it answers gains


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
    """Keep ``content`` as a memory of ``who``, its words in the index, answering the memory
    kept just before it when that was within ``REPLY_WINDOW``.

    The memory answered is held (PostgreSQL: ``FOR KEY SHARE``) until this one
    commits: a writer deleting it waits, and then finds this one to rebuild.
    """
    now = as_utc(now)
    last = _LAST_KEPT_HELD if conn.dialect.name == "postgresql" else _LAST_KEPT
    before = conn.execute(last, _names(who)).first()
    if before is not None and dt.timedelta(0) <= now - before.created_at <= REPLY_WINDOW:
        replies_to, context = before.id, words(before.tail)[-CONTEXT_WORDS:]
    else:
        replies_to, context = None, []
    counts, length = _terms(words(content), context, now, content, words)
    memory_id = conn.execute(
        memories.insert()
        .values(
            account=who.account,
            owner=who.user,
            owner_key=_versions.owner_key(who.user),
            agent=who.agent,
            content=content,
            created_at=now,
            words=length,
            chars=len(content),
            replies_to=replies_to,
        )
        .returning(memories.c.id)
    ).scalar_one()
    _index(conn, who, memory_id, counts)
    return Memory(memory_id, who.account, who.user, who.agent, content, now)


def _terms(
    said: list[str], context: list[str], kept_at: dt.datetime, content: str, words: Words
) -> tuple[Counter[str], int]:
    """What a memory is found by, and its length in words: its own words, those of the memory
    it answers, and the days it is about."""
    days = words(_days.days_words(kept_at, content)) if words.language in _days.ENGLISH else []
    counts = Counter(dict(Counter(said).most_common(MAX_TERMS)))  # its own words first
    for term, n in Counter([*context, *days]).items():
        if term in counts or len(counts) < MAX_TERMS:
            counts[term] += n
    return counts, len(said) + len(context) + len(days)


def _index(conn: Connection, who: Identity, memory_id: int, counts: Counter[str]) -> None:
    rows = [
        {
            "account": who.account,
            "agent": who.agent,
            "space": _versions.owner_key(who.user),
            "term": term,
            "memory_id": memory_id,
            "tf": n,
        }
        for term, n in counts.items()
    ]
    if rows:
        conn.execute(memory_terms.insert(), rows)
    _word_index.touch(conn, [(who.account, who.agent, _versions.owner_key(who.user))])


def unanswer(conn: Connection, account: str, going: Sequence[int], words: Words) -> None:
    """Before memories go: those that answer one of them, and stay, answer nothing any more,
    their index rebuilt from their own words.

    The memories going are held first (PostgreSQL: ``FOR UPDATE``), which waits for a
    writer keeping an answer to one of them: that answer is then found and rebuilt.
    """
    of_account = memories.c.account == account
    held = sa.select(memories.c.id).where(of_account, memories.c.id.in_(going))
    held = _database.lock_rows(held.order_by(memories.c.id), conn.dialect.name, exclusive=True)
    conn.execute(held).all()
    answers = conn.execute(
        sa.select(memories).where(
            of_account, memories.c.replies_to.in_(going), memories.c.id.not_in(going)
        )
    ).all()
    _reindex(conn, answers, words)


def delete(conn: Connection, account: str, ids: Sequence[int] | sa.Select[Any]) -> int:
    """Delete these memories of ``account`` with their word index; the facts read from them lose
    the link. Returns how many went.

    The engine clears the links itself: a database that distributes by account refuses a
    foreign key that sets a column of its key NULL (``_schema.referring``).
    """
    of_account = facts.c.account == account
    conn.execute(
        facts.update()
        .where(of_account, facts.c.source_memory_id.in_(ids))
        .values(source_memory_id=None)
    )
    conn.execute(
        memory_terms.delete().where(
            memory_terms.c.account == account, memory_terms.c.memory_id.in_(ids)
        )
    )
    gone = conn.execute(
        memories.delete().where(memories.c.account == account, memories.c.id.in_(ids))
    )
    return int(gone.rowcount)


def _reindex(conn: Connection, rows: Sequence[Any], words: Words) -> None:
    """Rebuild these memories' index from their own words: they answer nothing any more."""
    for row in rows:
        counts, length = _terms(words(row.content), [], row.created_at, row.content, words)
        conn.execute(
            memory_terms.delete().where(
                memory_terms.c.account == row.account, memory_terms.c.memory_id == row.id
            )
        )
        conn.execute(
            memories.update()
            .where(memories.c.account == row.account, memories.c.id == row.id)
            .values(replies_to=None, words=length)
        )
        _index(conn, Identity(row.account, row.owner, row.agent), row.id, counts)


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
_WHOLE = sa.select(memories).where(
    memories.c.account == sa.bindparam("account"),
    memories.c.id.in_(sa.bindparam("ids", expanding=True)),
)
_TAIL = sa.func.substr(
    memories.c.content,
    sa.case((memories.c.chars > CONTEXT_CHARS, memories.c.chars - CONTEXT_CHARS + 1), else_=1),
)
_LAST_KEPT = (
    sa.select(memories.c.id, memories.c.created_at, _TAIL.label("tail"))
    .where(*_MINE_BOUND)
    .order_by(*_NEWEST)
    .limit(1)
)
_LAST_KEPT_HELD = _LAST_KEPT.with_for_update(read=True, key_share=True)


def _names(who: Identity, **also: object) -> dict[str, object]:
    owner = _versions.owner_key(who.user)
    return {"account": who.account, "agent": who.agent, "owner_key": owner, **also}


def recent(conn: Connection, who: Identity, limit: int = RECENT) -> list[Memory]:
    """The newest memories of ``who``, whole, newest first."""
    return [Memory.from_row(r) for r in conn.execute(_RECENT, _names(who, limit=limit))]


def newest_excerpts(conn: Connection, who: Identity, chars: int, limit: int) -> list[Excerpt]:
    """The newest memories, as many as ``chars`` characters in all can show."""
    rows = conn.execute(_SIZES, _names(who, limit=limit)).all()
    return excerpts(conn, who.account, [(i, n) for i, n in rows], chars)


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
                memories.c.replies_to,
            ).join_from(
                hits,
                memories,
                sa.and_(
                    memories.c.account == sa.bindparam("account"),
                    memories.c.id == hits.c.memory_id,
                ),
            )
        )
    stats = sa.select(
        sa.literal(-1),
        sa.func.count(),
        sa.literal(0),
        sa.func.coalesce(sa.func.avg(memories.c.words), 1.0),
        sa.literal(0),
        sa.null(),
    ).where(*_MINE_BOUND)
    return sa.union_all(*parts, stats)


def matching(
    conn: Connection, who: Identity, terms: Sequence[str], per_term: int | None
) -> list[tuple[int, float, int]]:
    """Memories that hold words of ``terms``, by BM25 from the index, each with a share of the
    score of the memory that answers it: (id, score, length in characters), best first.
    ``per_term``: postings read per word, newest first (None: all)."""
    if not terms:
        return []
    params = _names(who, per_term=per_term, **{f"t{i}": t for i, t in enumerate(terms)})
    *rows, stats = conn.execute(_lookup(len(terms), per_term is not None), params).all()
    if not rows:
        return []
    n, average = stats[1], float(stats[3])
    df = Counter(term for term, *_ in rows)
    idf = {term: bm25_idf(n, held) for term, held in df.items()}
    found: dict[int, float] = {}
    sizes: dict[int, int] = {}
    answering: dict[int, int] = {}  # the memory answered: the one answering it
    for term, memory_id, tf, words, size, replies_to in rows:
        weight = idf[term] * bm25_term(tf, words, average)
        found[memory_id] = found.get(memory_id, 0.0) + weight
        sizes[memory_id] = size
        if replies_to is not None:
            answering[replies_to] = memory_id
    scores = {}
    for i, score in found.items():
        answer = answering.get(i, -1)
        scores[i] = score + ANSWERED * (
            found.get(answer, 0.0) + found.get(answering.get(answer, -1), 0.0)
        )
    ranked = sorted(scores, key=lambda i: (-scores[i], -i))
    return [(i, scores[i], sizes[i]) for i in ranked]


def excerpts(
    conn: Connection, account: str, chosen: Sequence[tuple[int, int]], chars: int
) -> list[Excerpt]:
    """The memories of ``account`` ``chosen`` ((id, length in characters), in the order to show
    them), as many as ``chars`` characters in all could show; of the last, only what fits in them
    is rendered."""
    taken: list[int] = []
    left = chars
    for memory_id, size in chosen:
        if left <= 0:
            break
        taken.append(memory_id)
        left -= size
    found = whole(conn, account, taken)
    out = []
    for memory_id in taken:
        memory = found.get(memory_id)
        if memory is not None:
            long = len(memory.content) > chars
            out.append(Excerpt(memory, memory.content[:chars] if long else None))
    return out


def whole(conn: Connection, account: str, memory_ids: Sequence[int]) -> dict[int, Memory]:
    """These memories of ``account`` with all their text."""
    if not memory_ids:
        return {}
    rows = conn.execute(_WHOLE, {"account": account, "ids": sorted(set(memory_ids))})
    return {r.id: Memory.from_row(r) for r in rows}


def erase_holding(conn: Connection, versions: Sequence[Fact], words: Words) -> dict[int, str]:
    """Delete the memories that hold the words of ``versions`` (all of one key, before their
    words are erased): those any of them was read from, and those of the same namespace that
    hold most of a version's words (more than half of its distinct words, and at least two
    when it has two), in each version's namespace. Facts read from a deleted memory keep
    their words and lose the link.
    Returns the memories deleted, by id: their words, whose vectors go too (``_erasure``)."""
    doomed = {v.source_memory_id for v in versions if v.source_memory_id is not None}
    held: dict[int, list[tuple[set[str], int]]] = {}  # memory: (words, how many) per version
    for version in versions:
        terms = words.distinct(version.content)
        if not terms:
            continue
        need = max(len(terms) // 2 + 1, min(2, len(terms)))
        found = conn.execute(
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
        for memory_id in found.scalars():
            held.setdefault(memory_id, []).append((set(terms), need))
    if not held and not doomed:
        return {}
    # The index also holds the words of the memory each answers, and its days: a memory goes
    # for its own words.
    account = versions[0].account
    rows = conn.execute(
        sa.select(memories).where(
            memories.c.account == account, memories.c.id.in_(sorted({*held, *doomed}))
        )
    ).all()
    spared = []
    for row in rows:
        own = set(words(row.content)) if row.id in held else set()
        if row.id in doomed or any(len(own & t) >= need for t, need in held.get(row.id, [])):
            doomed.add(row.id)
        else:
            spared.append(row)
    # Found by the words of the memory it answers, which stays: its copy of them goes.
    _reindex(conn, spared, words)
    if not doomed:
        return {}
    ids = sorted(doomed)
    unanswer(conn, account, ids, words)
    delete(conn, account, ids)
    gone = [r for r in rows if r.id in doomed]
    # Account facts read from them lose their link: every block of the account shows them.
    _word_index.touch(
        conn,
        {(r.account, r.agent, r.owner_key) for r in gone}
        | {(r.account, r.agent, ACCOUNT_SPACE) for r in gone},
    )
    return {r.id: r.content for r in gone}
