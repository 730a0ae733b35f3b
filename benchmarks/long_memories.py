"""Memories as long as the engine keeps (16,000 characters): what a read costs, and what a process
serving many of them holds.

``memories``: one person with 40 facts and 200 such memories, read with a
query at budget 800, against a person with the same 40 facts and none, read in
turns in the same database. ``rss``: a process reads the block of a different
person each time, each with a memory of its own text, and reports its resident
size after a warm-up and at the end; the engine's caches are bounded in bytes,
so the growth must stay bounded whatever the number of distinct texts.
"""

from __future__ import annotations

import gc
import random
import time

from korely_memory import MemoryEngine
from korely_memory._text._cache import _ALL as CACHES

from . import workloads as w
from .base import Databases, Sizes, Table, in_turns
from .data import _MANNER, _SUBJECTS, _THINGS, _VERBS, QUERY, items, load, load_memories, person
from .relevance_data import _CITIES, _FIRST, _LAST, _PROBLEMS, _PRODUCTS

_SAID = ["said that", "asked whether", "confirmed that", "reminded us that", "wrote that"]
_ASIDES = [
    "Thanks, that helps.",
    "I will check and come back to you.",
    "Could you send it again?",
    "That is fine for this month.",
    "Let me ask the finance team first.",
]


def memory_text(rng: random.Random, chars: int) -> str:
    """A conversation excerpt of exactly ``chars`` characters, different for every ``rng``."""
    parts: list[str] = []
    size = 0
    while size < chars:
        sentence = (
            f"{rng.choice(_FIRST)} {rng.choice(_LAST)} {rng.choice(_SAID)} "
            f"{rng.choice(_SUBJECTS).lower()} {rng.choice(_VERBS)} {rng.choice(_THINGS)} "
            f"{rng.choice(_MANNER)}; the {rng.choice(_PRODUCTS)} for {rng.choice(_CITIES)} "
            f"{rng.choice(_PROBLEMS)} (ref {rng.randint(10000, 99999)}). {rng.choice(_ASIDES)} "
        )
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)[:chars]


def memories(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """A read of a person with long memories against one of a person with only facts."""
    chars = sizes.long_memory_chars
    rng = random.Random(2)
    keeper = person("keeper")
    with dbs.fresh(backend) as url, MemoryEngine(url) as engine:
        load(engine, {"giulia": items(40), "keeper": items(40)})
        t = time.perf_counter()
        for _ in range(sizes.long_memories):
            engine.add_memory(keeper, memory_text(rng, chars))
        added = time.perf_counter() - t
        plain, long = in_turns(
            lambda: engine.get_context(person(), QUERY, token_budget=800),
            lambda: engine.get_context(keeper, QUERY, token_budget=800),
            sizes.runs,
        )
        newest = w.median_ms(lambda: engine.get_context(keeper, None, token_budget=800), sizes.runs)
        shown = engine.get_context(keeper, QUERY, token_budget=800)
    label = f"{sizes.long_memories} memories of {chars:,} characters"
    table.put("long memories: get_context, 40 facts, no memories, query", backend, plain)
    table.put(f"long memories: get_context, 40 facts + {label}, query", backend, long)
    table.put("  ratio (with memories / without)", backend, long / plain, "{:.2f}x")
    table.put(f"long memories: get_context, 40 facts + {label}, no query", backend, newest)
    table.put(
        "  the block with a query: facts / memories shown / tokens",
        backend,
        f"{len(shown.facts)} / {len(shown.memories)} / {shown.tokens}",
    )
    table.put(f"  time to add the {label} (add_memory)", backend, added, "{:.1f} s")


def rss(table: Table, dbs: Databases, backend: str, sizes: Sizes) -> None:
    """A process reading a different person's long memory each time: its resident size."""
    people = sizes.long_memory_warm + sizes.long_memory_people
    with dbs.fresh(backend) as url:
        with MemoryEngine(url) as engine:
            load_memories(
                engine,
                {
                    f"reader-{i:05d}": [memory_text(random.Random(i), sizes.long_memory_chars)]
                    for i in range(people)
                },
            )
        with w.SPAWN.Pool(1) as pool:
            warmed, half, end, peak, cached = pool.apply(
                rss_worker, (url, sizes.long_memory_warm, sizes.long_memory_people)
            )
    label = (
        f"process serving {sizes.long_memory_people:,} reads of {sizes.long_memory_chars:,}-"
        "character memories, each a different person's"
    )
    table.put(label + ": peak RSS (MB)", backend, peak, "{:.0f}")
    table.put(label + ": RSS growth after warm-up (MB)", backend, end - warmed, "{:+.1f}")
    table.put(label + ": RSS growth over the last half (MB)", backend, end - half, "{:+.1f}")
    table.put(label + ": the engine's caches at the end, of their bound (MB)", backend, cached)


def rss_worker(url: str, warm: int, reads: int) -> tuple[float, float, float, float, str]:
    """Read each person's block once: (RSS after ``warm`` reads, after half the others, at the
    end, peak RSS) in MB, and what the engine's caches hold at the end of their bound."""
    asked = [QUERY, None, "tickets for the Milan office", "refund of the laptops"]
    with MemoryEngine(url) as engine:
        for i in range(warm):
            engine.get_context(person(f"reader-{i:05d}"), asked[i % 4], token_budget=800)
        gc.collect()
        warmed = w.rss_mb()
        half = warmed
        for i in range(warm, warm + reads):
            engine.get_context(person(f"reader-{i:05d}"), asked[i % 4], token_budget=800)
            if i == warm + reads // 2:
                gc.collect()
                half = w.rss_mb()
        gc.collect()
        end = w.rss_mb()
        caches = list(CACHES)
        cached = (
            f"{sum(c.bytes for c in caches) / 2**20:.1f} of "
            f"{sum(c.max_bytes for c in caches) / 2**20:.0f}"
        )
    return warmed, half, end, w.peak_rss_mb(), cached
