"""Workload: does a read find the fact a question is about, whatever the number of facts?

Each question (``relevance_data``) has one fact it must find. For the engine, a
hit is that fact among ``block.facts`` (budget 800), and among the first 5 of
``search``. The reference is a BM25 over every fact of the person with the
engine's own words (stemming, stop words): its block is the engine's renderer
given every fact ranked by that BM25, its top 5 the 5 best scores. The
LangGraph store does what the peers do in the other workloads (``peers.py``):
search the person's namespace, rank by the same BM25, fit to the budget.

Ties: several facts can score the same (a question naming only a person ties
every fact about them). The reference and the block break them newest first;
``search`` breaks them in the order its rows come, so its top 5 is compared
with the reference's by score at each rank, not by which of equal facts it
took.
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence

from korely_memory import MemoryEngine
from korely_memory._store._versions import visible
from korely_memory._text._render import render
from korely_memory._text._tokens import TokenCounter
from korely_memory._text._words import Words, fact_text
from korely_memory._values._types import Fact

from . import peers
from .base import PEER, Databases, Sizes, Table
from .data import load, person
from .relevance_data import PHRASINGS, Query, queries, world

BUDGET = 800
TOP = 5
REFERENCE = "BM25 over all"


class Exhaustive:
    """BM25 over every fact, in memory: the reference the engine's choices are judged by."""

    def __init__(self, facts: Sequence[Fact]) -> None:
        self.facts = sorted(facts, key=lambda f: (f.modified_at, f.id), reverse=True)
        self.texts = [fact_text(f) for f in self.facts]
        self.bm25 = peers.WholeLexical(Words())
        self.count = TokenCounter()

    def ranked(self, query: str) -> list[tuple[float, Fact]]:
        """Every fact with its score, best first, newest first among equals."""
        scores = self.bm25.scores(query, self.texts)
        order = sorted(range(len(self.facts)), key=lambda i: -scores[i])
        return [(scores[i], self.facts[i]) for i in order]

    def block(self, query: str) -> list[str]:
        """The keys the engine's renderer keeps of every fact ranked by BM25."""

        def rank(_: Sequence[Fact]) -> list[Fact]:
            return [f for _, f in self.ranked(query)]

        chosen = render(
            facts=self.facts, memories=(), changes=(), budget=BUDGET, count=self.count, rank=rank
        )
        return [f.key for f in chosen.facts]

    def top(self, query: str) -> list[str]:
        return [f.key for score, f in self.ranked(query)[:TOP] if score > 0]

    def same_scores(self, query: str, keys: Sequence[str]) -> bool:
        """Whether ``keys`` score, rank by rank, as the reference's top facts do (those of equal
        score may be other facts)."""
        ranked = self.ranked(query)
        by_key = {f.key: round(s, 9) for s, f in ranked}
        best = [round(s, 9) for s, _ in ranked[:TOP] if s > 0]
        return [by_key[k] for k in keys] == best


Finder = Callable[[str], Sequence[str]]


def measured(find: Finder, asked: list[Query], passes: int) -> tuple[list[bool], float]:
    """Whether ``find`` found each question's fact, and its median time per question in ms."""
    find(asked[0].text)  # first use: statements prepared, caches filled
    hits: list[bool] = []
    times: list[float] = []
    for p in range(passes):
        for q in asked:
            t = time.perf_counter_ns()
            found = find(q.text)
            times.append((time.perf_counter_ns() - t) / 1e6)
            if p == 0:
                hits.append(q.key in found)
    return hits, statistics.median(times)


def engine_reads(
    engine: MemoryEngine, asked: list[Query], passes: int, search_passes: int
) -> tuple[tuple[list[bool], float], tuple[list[bool], float], dict[str, list[str]]]:
    """The engine's block and search, measured; and the keys search found for each question."""
    who = person()
    found_by_search: dict[str, list[str]] = {}

    def block(text: str) -> list[str]:
        return [f.key for f in engine.get_context(who, text, token_budget=BUDGET).facts]

    def search(text: str) -> list[str]:
        found_by_search[text] = [f.key for f in engine.search(who, text, limit=TOP).facts]
        return found_by_search[text]

    return measured(block, asked, passes), measured(search, asked, search_passes), found_by_search


def rate(hits: Sequence[bool]) -> float:
    return sum(hits) / len(hits) if hits else float("nan")


def by_phrasing(hits: Sequence[bool], asked: Sequence[Query]) -> str:
    rates = [
        rate([h for h, q in zip(hits, asked, strict=True) if q.phrasing == p]) for p in PHRASINGS
    ]
    return " / ".join(f"{r:.2f}" for r in rates)


def relevance(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """Hit rates and read times of the engine, the reference and the LangGraph store, by size."""
    for n in sizes.relevance_facts:
        facts = world(n)
        asked = queries(facts, sizes.relevance_targets)
        who = person()
        passes = sizes.relevance_passes if n <= 1_000 else 1  # reads of every fact: slow
        with dbs.fresh(backend) as url, MemoryEngine(url) as engine:
            load(engine, {"giulia": [f.item for f in facts]})
            with engine.db.connect() as conn:
                reference = Exhaustive(visible(conn, who, dt.datetime.now(dt.timezone.utc)))
            engine_block, engine_top, found_by_search = engine_reads(
                engine, asked, sizes.relevance_passes, passes
            )
        ref_block = measured(reference.block, asked, passes)
        ref_top = measured(reference.top, asked, passes)
        with peers.store_for(backend, dbs.workdir, dbs.libpq()) as store:
            store.load([f.item for f in facts])
            peer_block = measured(lambda text: store.kept(text, BUDGET), asked, passes)
            peer_top = measured(lambda text: store.top(text, TOP), asked, passes)
        same = sum(reference.same_scores(q.text, found_by_search[q.text]) for q in asked)
        label = f"relevance, {n:,} facts"
        trio = f"engine / {REFERENCE} / {PEER}"
        table.put(
            f"{label}: block hit rate, {trio}",
            backend,
            " / ".join(f"{rate(h):.2f}" for h, _ in (engine_block, ref_block, peer_block)),
        )
        table.put(
            f"{label}: block hit rate, engine / {REFERENCE}",
            backend,
            rate(engine_block[0]) / rate(ref_block[0]),
            "{:.2f}x",
        )
        table.put(
            f"{label}: block hit rate by phrasing ({' / '.join(PHRASINGS)}), engine",
            backend,
            by_phrasing(engine_block[0], asked),
        )
        table.put(
            f"{label}: block hit rate by phrasing ({' / '.join(PHRASINGS)}), {REFERENCE}",
            backend,
            by_phrasing(ref_block[0], asked),
        )
        table.put(
            f"{label}: top {TOP} hit rate, engine search / {REFERENCE} / {PEER}",
            backend,
            " / ".join(f"{rate(h):.2f}" for h, _ in (engine_top, ref_top, peer_top)),
        )
        table.put(
            f"{label}: search top {TOP} scores equal to {REFERENCE}'s (questions)",
            backend,
            f"{same} of {len(asked)}",
        )
        table.put(
            f"{label}: block read (ms), engine / {REFERENCE} in memory / {PEER}",
            backend,
            " / ".join(f"{ms:.2f}" for _, ms in (engine_block, ref_block, peer_block)),
        )
        table.put(
            f"{label}: top {TOP} read (ms), engine search / {REFERENCE} in memory / {PEER}",
            backend,
            " / ".join(f"{ms:.2f}" for _, ms in (engine_top, ref_top, peer_top)),
        )
        table.figures[(f"{label}: block read (ms), engine", backend)] = engine_block[1]
        report_misses(backend, n, asked, engine_block[0], ref_block[0], facts_order(facts))


def facts_order(facts: Sequence[object]) -> dict[str, int]:
    """Each key's age rank: 0 is the newest fact."""
    keys = [f.item.key for f in facts]  # type: ignore[attr-defined]
    return {k: len(keys) - 1 - i for i, k in enumerate(keys)}


def report_misses(
    backend: str,
    n: int,
    asked: Sequence[Query],
    engine: Sequence[bool],
    reference: Sequence[bool],
    age: dict[str, int],
) -> None:
    """On stderr: the questions whose fact the reference's block holds and the engine's does not."""
    missed = [q for q, e, r in zip(asked, engine, reference, strict=True) if r and not e]
    if not missed:
        return
    kinds = Counter(q.phrasing for q in missed)
    print(
        f"{backend} relevance, {n:,} facts: the block missed {len(missed)} questions the "
        f"reference's block found ({dict(kinds)}); for example:",
        file=sys.stderr,
    )
    for q in missed[:8]:
        print(f"  {q.text!r} -> {q.key} ({age[q.key]:,} newer facts)", file=sys.stderr)
