"""The facts a block chooses from, read in one statement whatever the number of facts a person has.

A block shows what fits its budget, so it never needs every fact. One
statement returns: the newest true facts (by index, a page larger than the most
that could fit), the facts that match the query best (from the word index:
every posting of a rare word, held by at most ``RARE`` facts, and the newest
``PER_TERM`` of a common one; each word weighs the less the more facts hold
it, so a name outweighs "city"), and how many true
facts there are in all (a kept count, not a count of rows). When the page holds
every fact, the block is chosen from all of them exactly as before; otherwise
from that short list, re-ranked by relevance in Python. The words are looked
up only in that second case.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Dialect

from .._db import _database
from .._db._schema import (
    ACCOUNT_SPACE,
    UTCDateTime,
    account_row,
    fact_counts,
    fact_terms,
    facts,
    memories,
    moment_reader,
    moment_writer,
    personal_row,
)
from .._store import _versions, _word_index
from .._text._cache import TextCache
from .._text._render import shortest_fact_line
from .._text._tokens import TokenCounter
from .._text._words import Words
from .._values._expiry import expired, live
from .._values._identity import Identity
from .._values._types import Fact

MAX_QUERY_TERMS = 12  # words of a query looked up in the index
PER_TERM = 100  # postings read per common word and space, newest first
RARE = 300  # a word held by at most this many facts (of a space) is read whole: it tells the most
MATCHES = 80  # facts taken from them: those matching the most words
NO_LIMIT = 2**31 - 1

_FIELDS = _versions.FIELDS
# Literals, as in the partial indexes' predicates, so SQLite can use them; with ``live``, the
# terms of the indexes of the true facts of each namespace.
_PERSONAL = sa.text(personal_row("korely_facts"))
_ACCOUNT = sa.text(account_row("korely_facts"))


@dataclass
class Candidates:
    """The facts to choose from, newest first, how many true facts there are in all, and whether
    the identity keeps any memory."""

    facts: list[Fact]
    total: int
    has_memories: bool = True
    versions: _word_index.Versions | None = None
    """The versions of what the identity's blocks show, read by the same statement (None:
    a block of it may change with the clock alone)."""
    complete: bool = False
    """``facts`` are every true fact the identity sees (whatever the query)."""


def page_size(budget: int, count: TokenCounter) -> int:
    """More facts than could ever fit in ``budget``: no fact line is shorter than the shortest."""
    shortest = max(1, count(shortest_fact_line() + "\n") - 2)
    return budget // shortest + 1


def query_terms(query: str | None, words: Words) -> list[str]:
    """The query's distinct words, longest (most telling) first."""
    if not query:
        return []
    return sorted(words.distinct(query), key=lambda w: (-len(w), w))[:MAX_QUERY_TERMS]


def candidates(
    conn: Connection, who: Identity, terms: list[str], page: int | None, now: dt.datetime | None
) -> Candidates:
    """The newest ``page`` facts true at ``now`` that ``who`` sees, and those matching ``terms``
    (None: all). ``now`` None, on PostgreSQL only: the server's clock, read by the statement
    itself (no round trip of its own)."""
    if _database.binds_arrays(conn.dialect):  # one array of words: a plan whatever their number
        prepared = _prepared(conn.dialect, 1 if terms else 0)
    else:
        prepared = _prepared(conn.dialect, len(terms))
    params: dict[str, Any] = {
        "account": who.account,
        "agent": who.agent,
        "owner": _versions.owner_key(who.user),
        "page": NO_LIMIT if page is None else page + 1,
        "per_term": PER_TERM,
        "rare": RARE,
        "matches": MATCHES,
        "account_space": ACCOUNT_SPACE,
        "now": None if now is None else prepared.write_moment(now),
    }
    if _database.binds_arrays(conn.dialect):
        params["terms"] = terms
    else:
        params.update({f"t{i}": t for i, t in enumerate(terms)})
    result = conn.exec_driver_sql(prepared.sql, prepared.arguments(params))
    read, rows = _reader(tuple(result.keys())), result.all()
    kind, fact_values = read.kind, read.fact
    paged = [0] * len(_Part)
    seen: dict[int, Fact] = {}
    versions: dict[str, tuple[int, int]] = {}
    counts = _Counts(own=0, shared=0, has_memories=0)
    moment = prepared.moment
    for row in rows:
        part = kind(row)
        if part == _VERSIONS_ROW:
            kept = _Versions._make(read.versions(row))
            versions[kept.owner_key] = (kept.version, kept.expiring)
        elif part == _COUNTS_ROW:
            counts = _Counts._make(read.counts(row))
        else:
            paged[part] += 1
            values = fact_values(row)
            if values[_ID] not in seen:
                seen[values[_ID]] = _fact(values, moment)
    # The statement hides account facts a user's own fact shadows; the index allows one per key.
    found = list(seen.values())
    complete = page is None or (paged[_Part.OWN] <= page and paged[_Part.ACCOUNT] <= page)
    # A kept count that disagrees with the rows (rows written around the engine) yields to them.
    total = len(found) if complete else max(len(found), (counts.own or 0) + counts.shared)
    found.sort(key=lambda f: (f.modified_at, f.id), reverse=True)
    return Candidates(
        found,
        total,
        bool(counts.has_memories),
        _word_index.versions_from(versions, params["owner"]),
        complete and len(found) == total,
    )


# -- the statement's rows, read by the names of their columns -------------------------------
#
# Every row has the columns ``kind`` (a `_Part`) and those of facts. A row of facts fills them
# with a fact; the rows of counts and versions put each of their values in a column of facts of
# the same type, named below, both where the statement is built and where its rows are read.


class _Part(enum.IntEnum):
    """What a row of the statement holds (its ``kind``)."""

    OWN = 0  # one of the newest true facts of the identity's own
    ACCOUNT = 1  # one of the newest account facts it sees
    MATCHING = 2  # one of the facts that match the query best
    COUNTS = 3  # how many facts there are: one row
    VERSIONS = 4  # the versions of what a namespace's blocks show: a row per namespace


class _Counts(NamedTuple):
    """The row of counts: the identity's own true facts (its kept count), the account facts it
    sees, and whether it keeps any memory (0 or 1)."""

    own: Any
    shared: Any
    has_memories: Any


_COUNTS_IN = _Counts(own="id", shared="replaced_by_id", has_memories="source_memory_id")
"""The column of facts each count is in."""


class _Versions(NamedTuple):
    """A row of versions: the namespace (its owner key), the version of what its blocks show,
    and how many of its true facts expire."""

    owner_key: Any
    version: Any
    expiring: Any


_VERSIONS_IN = _Versions(owner_key="owner", version="id", expiring="replaced_by_id")
"""The column of facts each part of a row of versions is in."""


@dataclass(frozen=True)
class _Reader:
    """The parts of the statement's rows, each got by the names of its columns (found once per
    set of columns: a block reads hundreds of rows)."""

    kind: Callable[[Any], int]
    fact: Callable[[Any], tuple[Any, ...]]
    """The fact's values, in the order of the fields of `Fact`."""
    counts: Callable[[Any], tuple[Any, ...]]
    versions: Callable[[Any], tuple[Any, ...]]


@functools.lru_cache(maxsize=8)
def _values_by_name(columns: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A row's fact's values, in the order of the fields of `Fact`, by its columns' names."""
    return operator.itemgetter(*(columns.index(name) for name in _FIELDS))


@functools.lru_cache(maxsize=8)
def _reader(columns: tuple[str, ...]) -> _Reader:
    at = {name: i for i, name in enumerate(columns)}

    def by_name(*names: str) -> Any:
        return operator.itemgetter(*(at[name] for name in names))

    return _Reader(
        kind=by_name("kind"),
        fact=by_name(*_FIELDS),
        counts=by_name(*_COUNTS_IN),
        versions=by_name(*_VERSIONS_IN),
    )


_MOMENTS = [f for f in _FIELDS if isinstance(facts.c[f].type, UTCDateTime)]
_ID = _FIELDS.index("id")  # in a fact's values
_VERSIONS_ROW, _COUNTS_ROW = int(_Part.VERSIONS), int(_Part.COUNTS)


_FACTS: TextCache[tuple[Any, ...], Fact] = TextCache(4 * 2**20)
"""The facts rows hold, by the row's values: a row's values decide its fact whole and a `Fact` is
immutable, so a person's facts, read on every turn, are built once (their moments parsed once).
Emptied with the other caches of stored text when a person is erased."""


def _fact(values: tuple[Any, ...], moment: Callable[[Any], dt.datetime]) -> Fact:
    """The fact a row holds (``values``: its fields' values, in their order)."""
    found = _FACTS.get(values)
    if found is not None:
        return found
    fields = dict(zip(_FIELDS, values, strict=True))
    for name in _MOMENTS:
        if fields[name] is not None:
            fields[name] = moment(fields[name])
    return _FACTS.put(values, Fact.from_fields(fields))


@dataclass(frozen=True)
class _Prepared:
    """The statement compiled once for a dialect, run as driver SQL: a block pays for the rows, not
    building, caching and typing a large statement on every read."""

    sql: str
    defaults: dict[str, Any]
    order: tuple[str, ...] | None  # positional drivers (SQLite): the parameters' order
    moment: Callable[[Any], dt.datetime]
    write_moment: Callable[[dt.datetime], Any]

    def arguments(self, params: dict[str, Any]) -> Any:
        merged = {**self.defaults, **params}
        return tuple(merged[k] for k in self.order) if self.order is not None else merged


def _prepared(dialect: Dialect, n_terms: int) -> _Prepared:
    """The statement for ``n_terms`` words, compiled once per kind of dialect (its class, parameter
    style and server version) rather than once per engine: a process that opens an engine per
    request or per test compiles it once."""
    return _compiled(_DialectKind(dialect), n_terms)


class _DialectKind:
    """A dialect, equal to every other of the same class, parameter style and server version: what
    the compiled statement depends on."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.key = (type(dialect), dialect.paramstyle, dialect.server_version_info)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DialectKind) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@functools.lru_cache(maxsize=4 * (MAX_QUERY_TERMS + 1))
def _compiled(kind: _DialectKind, n_terms: int) -> _Prepared:
    dialect = kind.dialect
    compiled = _statement(n_terms, _database.binds_arrays(dialect)).compile(dialect=dialect)
    placeholders: dict[str, Any] = {
        "account": "",
        "agent": "",
        "owner": "",
        "page": 0,
        "per_term": 0,
        "rare": 0,
        "matches": 0,
        "account_space": "",
        "terms": [],
        "now": None,
    }
    placeholders.update({f"t{i}": "" for i in range(n_terms)})
    defaults = {
        k: v for k, v in compiled.construct_params(placeholders).items() if k not in placeholders
    }
    order = tuple(compiled.positiontup) if compiled.positional and compiled.positiontup else None
    return _Prepared(
        compiled.string, defaults, order, moment_reader(dialect), moment_writer(dialect)
    )


def _best(hits: Any) -> Any:
    """The facts that match the query best, newest first among equals.

    Each word counts for more the fewer facts hold it (``df``, counted up to
    ``RARE + 1``), so that a rare word (a name, an order number) outweighs
    common ones, as in BM25.
    """
    weighted = sa.select(hits.c.fact_id, (sa.literal(1.0) / hits.c.df).label("weight")).subquery()
    return (
        sa.select(weighted.c.fact_id)
        .group_by(weighted.c.fact_id)
        .order_by(sa.func.sum(weighted.c.weight).desc(), weighted.c.fact_id.desc())
        .limit(sa.bindparam("matches"))
        .subquery()
    )


def _postings(where: list[Any], correlated: tuple[Any, ...] = ()) -> Any:
    """A word's postings, newest first, each with ``df``: how many facts hold the word, counted
    up to ``rare + 1``. All of a rare word's postings, the newest ``per_term`` of a common one's;
    read in one pass.

    ``correlated``: the enclosing query's FROM items that ``where`` refers to.
    """
    newest = (
        sa.select(fact_terms.c.fact_id)
        .where(*where)
        .order_by(fact_terms.c.fact_id.desc())
        .limit(sa.bindparam("rare") + 1)
    )
    if correlated:
        newest = newest.correlate(*correlated)
    window = newest.subquery("newest")
    ranked = sa.select(
        window.c.fact_id,
        sa.func.count().over().label("df"),
        sa.func.row_number().over(order_by=window.c.fact_id.desc()).label("rank"),
    ).subquery("ranked")
    return sa.select(ranked.c.fact_id, ranked.c.df).where(
        sa.or_(ranked.c.df <= sa.bindparam("rare"), ranked.c.rank <= sa.bindparam("per_term"))
    )


def _now(server_clock: bool) -> Any:
    """The read's moment: ``now`` as bound, else (None, on PostgreSQL) the server's clock."""
    now = sa.bindparam("now", type_=facts.c.valid_until.type)
    # One moment for the whole statement (clock_timestamp would move while it runs).
    return sa.func.coalesce(now, sa.func.statement_timestamp()) if server_clock else now


def _live(table: Any, server_clock: bool) -> Any:
    """The version of ``table``'s row is live at the read's moment (``_expiry.live``)."""
    return live(table, _now(server_clock))


def _shadowed(table: Any, server_clock: bool) -> Any:
    """The identity's own live fact under the same key hides the account's (``shadowed``)."""
    # The account as bound, not as the outer row's: each table of the statement names it.
    account: sa.BindParameter[str] = sa.bindparam("account")
    owner: sa.BindParameter[str] = sa.bindparam("owner")
    return _versions.shadowed(table, account=account, owner=owner, now=_now(server_clock))


def _expired_own(gone: Any, server_clock: bool) -> list[Any]:
    """``gone`` is one of the identity's true facts (or proposals) that expired and that no
    write has ended yet: found by the partial index of the true facts that expire, without
    reading the others."""
    return [
        gone.c.account == sa.bindparam("account"),
        gone.c.agent == sa.bindparam("agent"),
        gone.c.owner_key == sa.bindparam("owner"),
        expired(gone, _now(server_clock)),
        sa.text(personal_row(gone.name)),
    ]


def _seen_account_fact(shared: Any, server_clock: bool) -> list[Any]:
    """``shared`` is a true account fact the identity sees: live, and not shadowed by its own."""
    return [
        shared.c.account == sa.bindparam("account"),
        shared.c.agent == sa.bindparam("agent"),
        sa.text(account_row(shared.name)),
        _live(shared, server_clock),
        ~_shadowed(shared, server_clock),
    ]


def _kept(column: Any) -> Any:
    """A column of the identity's kept counts (0 without a row)."""
    found = sa.select(column).where(
        fact_counts.c.account == sa.bindparam("account"),
        fact_counts.c.agent == sa.bindparam("agent"),
        fact_counts.c.owner_key == sa.bindparam("owner"),
    )
    return sa.func.coalesce(found.scalar_subquery(), 0)


@functools.lru_cache(maxsize=MAX_QUERY_TERMS + 1)
def _statement(n_terms: int, lateral: bool = False) -> sa.CompoundSelect[Any]:
    """The block's one statement; ``lateral``: PostgreSQL's (arrays, lateral lookups, and the
    server's clock when no moment is bound)."""
    account: sa.BindParameter[str] = sa.bindparam("account")
    agent: sa.BindParameter[str] = sa.bindparam("agent")
    owner: sa.BindParameter[str] = sa.bindparam("owner")
    mine = (facts.c.account == account, facts.c.agent == agent)
    shared = facts.alias("shared")
    gone = facts.alias("gone")
    expired_n = (
        sa.select(sa.func.count())
        .select_from(gone)
        .where(*_expired_own(gone, lateral))
        .scalar_subquery()
    )
    own_n = _kept(fact_counts.c.n) - expired_n
    shared_n = (
        sa.select(sa.func.count())
        .select_from(shared)
        .where(*_seen_account_fact(shared, lateral))
        .scalar_subquery()
    )
    columns = [facts.c[f] for f in _FIELDS]
    newest = (facts.c.modified_at.desc(), facts.c.id.desc())
    # Words are looked up only when the newest page cannot hold every fact: else it has them all.
    gate = (
        sa.select(sa.literal(1).label("go"))
        .where(sa.or_(own_n >= sa.bindparam("page"), shared_n >= sa.bindparam("page")))
        .cte("gate")
        .prefix_with("MATERIALIZED")
    )

    def part(kind: _Part, *where: Any, limit: Any = None, source: Any = facts) -> sa.Select[Any]:
        select = sa.select(_kind(kind), *columns).select_from(source).where(*where)
        if limit is None:
            return select
        inner = select.order_by(*newest).limit(limit).subquery()
        return sa.select(*inner.c)

    parts = [
        part(
            _Part.OWN,
            *mine,
            facts.c.owner_key == owner,
            _PERSONAL,
            _live(facts, lateral),
            limit=sa.bindparam("page"),
        ),
        part(
            _Part.ACCOUNT,
            *mine,
            _ACCOUNT,
            _live(facts, lateral),
            ~_shadowed(facts, lateral),
            limit=sa.bindparam("page"),
        ),
    ]
    if n_terms and lateral:
        # PostgreSQL: the newest few facts per word and space, in one lateral lookup over arrays.
        said = (
            sa.func.unnest(sa.bindparam("terms", type_=postgresql.ARRAY(sa.String)))
            .table_valued("term")
            .render_derived(name="said")
        )
        spaces = (
            sa.func.unnest(postgresql.array([owner, sa.bindparam("account_space")]))
            .table_valued("space")
            .render_derived(name="spaces")
        )
        where = [
            fact_terms.c.account == account,
            fact_terms.c.agent == agent,
            fact_terms.c.space == spaces.c.space,
            fact_terms.c.term == said.c.term,
        ]
        found = _postings(where, correlated=(said, spaces)).lateral("found")
        hits = (
            sa.select(found.c.fact_id, said.c.term, found.c.df)
            .select_from(said)
            .join(spaces, sa.true())
            .join(found, sa.true())
            .where(sa.or_(own_n >= sa.bindparam("page"), shared_n >= sa.bindparam("page")))
            .subquery()
        )
        matching = _best(hits)
    elif n_terms:
        lookups = []
        for i in range(n_terms):
            for space in ("owner", "account_space"):
                where = [
                    sa.exists(sa.select(gate.c.go)),
                    fact_terms.c.account == account,
                    fact_terms.c.agent == agent,
                    fact_terms.c.space == sa.bindparam(space),
                    fact_terms.c.term == sa.bindparam(f"t{i}"),
                ]
                postings = _postings(where).subquery()
                lookups.append(
                    sa.select(postings.c.fact_id, sa.literal(i).label("term"), postings.c.df)
                )
        matching = _best(sa.union_all(*lookups).subquery())
    if n_terms:
        parts.append(
            part(
                _Part.MATCHING,
                *mine,
                sa.or_(
                    sa.and_(facts.c.owner_key == owner, _PERSONAL),
                    sa.and_(_ACCOUNT, ~_shadowed(facts, lateral)),
                ),
                _live(facts, lateral),
                # Driven by the few matching ids, never by a scan of the account's facts.
                source=matching.join(
                    facts, sa.and_(facts.c.account == account, facts.c.id == matching.c.fact_id)
                ),
            )
        )
    # The versions of what its blocks show (its namespace's and its account's), read with them.
    kept = _Versions(fact_counts.c.owner_key, fact_counts.c.version, fact_counts.c.expiring)
    in_place = dict(zip(_VERSIONS_IN, kept, strict=True))
    parts.append(
        sa.select(_kind(_Part.VERSIONS), *(in_place.get(f, sa.null()) for f in _FIELDS)).where(
            fact_counts.c.account == account,
            fact_counts.c.agent == agent,
            fact_counts.c.owner_key.in_([owner, sa.bindparam("account_space")]),
        )
    )
    # The counts, as a row of their own, in integer columns (``_COUNTS_IN``).
    has_memories = sa.exists().where(
        memories.c.account == account, memories.c.agent == agent, memories.c.owner_key == owner
    )
    has = sa.case((has_memories, 1), else_=0)
    in_column = dict(zip(_COUNTS_IN, _Counts(own_n, shared_n, has), strict=True))
    counts = [in_column.get(f, sa.null()) for f in _FIELDS]
    parts.append(sa.select(_kind(_Part.COUNTS), *counts))
    return sa.union_all(*parts)


def _kind(part: _Part) -> Any:
    """The column that says what a row holds."""
    return sa.literal(int(part)).label("kind")


# -- search: BM25 over every true fact, computed by the database ------------------------------

K1, B = 1.2, 0.75  # _bm25.bm25_term's


@dataclass
class Matching:
    """The facts that match best, with their scores, and whether the identity keeps any memory
    (None when no fact matched: not asked)."""

    facts: list[tuple[Fact, float]]
    has_memories: bool | None


def best_matching(
    conn: Connection, who: Identity, terms: list[str], now: dt.datetime | None, limit: int
) -> Matching:
    """The ``limit`` true facts at ``now`` that ``who`` sees with the best BM25 score for
    ``terms``, with their scores, best first, newest first among equals (``now`` None, on
    PostgreSQL only: the server's clock, read by the statement).

    The scores are those of BM25 over every such fact (``_bm25.Lexical``: idf and average
    length over all of them), summed by the database over the word index: it reads the postings
    of ``terms`` and the kept counts, never every fact.
    """
    if not terms or limit <= 0:
        return Matching([], None)
    statement = _search_statement(conn.dialect.name)
    params = {
        "account": who.account,
        "agent": who.agent,
        "owner": _versions.owner_key(who.user),
        "account_space": ACCOUNT_SPACE,
        "terms": terms,
        "now": now,
        "limit": limit,
    }
    rows = conn.execute(statement, params).all()
    values = _values_by_name(tuple(rows[0]._fields)) if rows else None
    found = [(_versions.from_values(values(row)), row.score) for row in rows if values]
    return Matching(found, bool(rows[0].has_memories) if rows else None)


@functools.lru_cache(maxsize=2)
def _search_statement(dialect: str) -> sa.Select[Any]:
    account: sa.BindParameter[str] = sa.bindparam("account")
    agent: sa.BindParameter[str] = sa.bindparam("agent")
    owner: sa.BindParameter[str] = sa.bindparam("owner")
    # One IN list per number of words: faster on PostgreSQL than one array (= ANY), whose plan
    # cannot count the words.
    said = fact_terms.c.term.in_(sa.bindparam("terms", expanding=True))
    # ``now`` None on PostgreSQL: the statement reads the server's clock (no round trip).
    server = dialect == "postgresql"

    def number(value: float) -> Any:
        return sa.literal(value, sa.Float)

    def hits_in(space: Any, *where: Any) -> sa.Select[Any]:
        return (
            sa.select(
                fact_terms.c.term,
                fact_terms.c.fact_id,
                fact_terms.c.tf,
                facts.c.words,
                facts.c.modified_at,
            )
            .select_from(
                fact_terms.join(
                    facts,
                    sa.and_(facts.c.account == account, facts.c.id == fact_terms.c.fact_id),
                )
            )
            .where(
                fact_terms.c.account == account,
                fact_terms.c.agent == agent,
                fact_terms.c.space == space,
                said,
                _live(facts, server),
                *where,
            )
        )

    # The postings of the query's words among the facts the identity sees (only true facts have
    # postings): its own, and the account's that no own fact shadows.
    hits = sa.union_all(
        hits_in(owner), hits_in(sa.bindparam("account_space"), ~_shadowed(facts, server))
    ).cte("hits")
    # How many facts it sees, and their words: the kept counts, less its facts that expired
    # and no write ended yet, plus the account's it sees.
    gone, shared = facts.alias("gone"), facts.alias("shared")

    def counted(table: Any) -> list[Any]:
        """How many facts, and their words."""
        words = sa.func.coalesce(sa.func.sum(table.c.words), 0)
        return [sa.func.count().label("n"), words.label("w")]

    expired = sa.select(*counted(gone)).where(*_expired_own(gone, server)).cte("expired")
    account_facts = (
        sa.select(*counted(shared)).where(*_seen_account_fact(shared, server)).cte("account_facts")
    )
    n = _kept(fact_counts.c.n) - expired.c.n + account_facts.c.n
    length = _kept(fact_counts.c.words) - expired.c.w + account_facts.c.w
    stats = (
        sa.select(
            n.label("n"),
            # _bm25's "avg or 1.0": no facts, or none with a word.
            sa.func.coalesce(
                sa.cast(sa.func.nullif(length, 0), sa.Float) / sa.func.nullif(n, 0), number(1.0)
            ).label("avg"),
        )
        .select_from(expired.join(account_facts, sa.true()))
        .cte("stats")
        .prefix_with("MATERIALIZED")
    )
    df = sa.select(hits.c.term, sa.func.count().label("df")).group_by(hits.c.term).subquery()
    ln = sa.func.ln if dialect == "postgresql" else getattr(sa.func, _database.LN)
    # _bm25.bm25_idf, as Python computes it (floats throughout).
    idf = (
        sa.select(
            df.c.term,
            ln(number(1.0) + (stats.c.n - df.c.df + number(0.5)) / (df.c.df + number(0.5))).label(
                "w"
            ),
        )
        .select_from(df.join(stats, sa.true()))
        .cte("idf")
        .prefix_with("MATERIALIZED")
    )
    # _bm25.bm25_term times the idf, summed over the words.
    score = sa.func.sum(
        idf.c.w
        * hits.c.tf
        * number(K1 + 1)
        / (hits.c.tf + number(K1) * (number(1 - B) + number(B) * hits.c.words / stats.c.avg))
    )
    top = (
        sa.select(hits.c.fact_id, score.label("score"), sa.func.max(hits.c.modified_at).label("at"))
        .select_from(hits.join(idf, idf.c.term == hits.c.term).join(stats, sa.true()))
        .group_by(hits.c.fact_id)
        .order_by(score.desc(), sa.func.max(hits.c.modified_at).desc(), hits.c.fact_id.desc())
        .limit(sa.bindparam("limit"))
        .subquery("top")
    )
    # So that a person who keeps no memory is not searched for one (evaluated once).
    has_memories = sa.case(
        (
            sa.exists().where(
                memories.c.account == account,
                memories.c.agent == agent,
                memories.c.owner_key == owner,
            ),
            1,
        ),
        else_=0,
    ).label("has_memories")
    return (
        sa.select(has_memories, top.c.score, *(facts.c[f] for f in _FIELDS))
        .select_from(
            top.join(facts, sa.and_(facts.c.account == account, facts.c.id == top.c.fact_id))
        )
        .order_by(top.c.score.desc(), top.c.at.desc(), top.c.fact_id.desc())
    )
