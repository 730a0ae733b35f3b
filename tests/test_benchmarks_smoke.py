"""The benchmarks keep working: ``python -m benchmarks --smoke`` runs every workload at tiny sizes.

No test here asserts a time: the figures are for the README, measured by a full run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# LoCoMo's data is not the project's to ship: CI and the team keep it beside the checkout.
LOCOMO = Path(
    os.environ.get("KORELY_LOCOMO", ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json")
)
LOCOMO_ARGS = ("--data", str(LOCOMO), "--embed", "fake")


def smoke_run(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks --smoke`` with ``args``, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", *args],
        cwd=ROOT,
        # Commits need not wait for the server's disk (as the tests' own sessions, conftest.py):
        # nothing here times anything.
        env={**os.environ, "PGOPTIONS": "-c synchronous_commit=off"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@pytest.mark.timeout(600)
def test_smoke_run_prints_the_table(postgresql_url: str) -> None:
    """``postgresql_url`` only makes sure the server is there; the run makes schemas of its own."""
    done = smoke_run()
    table = done.stdout
    assert "| workload | SQLite | PostgreSQL |" in table
    for row in (
        "get_context, 40 facts, budget 800 |",
        "LangGraph SqliteStore / PostgresStore",
        "told once",
        "remember",
        "relevance, 200 facts: block hit rate, engine / BM25 over all |",
        "relevance, 200 facts: top 5 hit rate, engine search",
        "long memories: get_context, 40 facts + 5 memories of 16,000 characters, query |",
        "each a different person's: RSS growth after warm-up (MB) |",
        "concurrency, 40 facts, budget 800, reads/s, 2 processes: engine |",
        'placement, LangChain, "notes", 20 turns: cacheable share (%) |',
        'placement, LlamaIndex, "notes", 20 turns: recall (turns of 20) |',
        "KorelyStore: put, 200 items |",
        "KorelyStore / LangGraph's store: search, 200 items (lower is faster) |",
        "LangGraph SqliteStore: get, 200 items |",
        "LangGraph PostgresStore: search, 200 items |",
        "KorelyStore: search with a query (BM25), 200 items |",
        "server, 1 client x 10 calls: get_context p50 / p95 / p99 (ms) |",
        "server, 2 clients x 10 calls: calls/s |",
        "server, 2 clients x 10 calls: errors (answers not 2xx) | 0 | 0 |",
    ):
        assert row in table, f"{row!r} missing from the table:\n{table}"
    assert "PostgreSQL skipped" not in done.stderr
    figures = [line.split(" | ", 1)[1] for line in table.splitlines() if line.startswith("| ")]
    assert not [f for f in figures if re.search(r"\bnan", f)], f"a figure is missing:\n{table}"


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    not LOCOMO.is_file(), reason=f"LoCoMo's locomo10.json is not at {LOCOMO} (see KORELY_LOCOMO)"
)
def test_locomo_on_one_conversation_prints_its_tables(postgresql_url: str) -> None:
    """The LoCoMo command runs, on both databases, with the peers and an embedding (a hash of the
    words, no model); no score is asserted."""
    done = smoke_run("--only", "locomo", *LOCOMO_ARGS)
    out = done.stdout
    assert "PostgreSQL skipped" not in done.stderr
    for row in (
        "| LoCoMo: search, p50 / p95 (ms) | ",
        "| LoCoMo: korely block 2,000, evidence in block (1-4) | ",
        "| LoCoMo: load ",
        "LoCoMo, 1 conversations, ",
        "| contender: measure | multi-hop | temporal | open-domain | single-hop | 1-4 |",
        "| korely search: turn hit@10 | ",
        "| korely block 2,000: evidence in block | ",
        "| korely search, embed=fake: session hit@10 | ",
        "| rank_bm25 BM25Okapi: evidence recall@5 | ",
        "| LangGraph InMemoryStore, index fake: turn hit@1 | ",
    ):
        assert row in out, f"{row!r} missing:\n{out}"
    timing = next(line for line in out.splitlines() if line.startswith("| LoCoMo: search, p50"))
    assert "–" not in timing, f"a backend did not run:\n{out}"


def test_the_locomo_judge_scores_as_the_model_labels() -> None:
    """``--answer``'s J: the model answers from the block, then labels its answer; the last
    line's label is the score."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from benchmarks.locomo import Judged, Question

    said = iter(
        [
            AIMessage("A sunset over the lake"),
            AIMessage("Same painting, other words.\nCORRECT"),
            AIMessage("A dog"),
            AIMessage("It says CORRECT nowhere that counts.\nWRONG"),
            AIMessage("A cat"),
            AIMessage("Not the same animal.\nINCORRECT"),
            AIMessage("A sunset"),
            AIMessage("Label: **correct**"),
        ]
    )
    judged = Judged(GenericFakeChatModel(messages=said))
    q = Question("What did Melanie paint?", "a sunset", 4, frozenset({"D1:1"}))
    block = "- 2023-05-08: melanie: we painted a sunset"
    assert [judged(q, block) for _ in range(4)] == [1.0, 0.0, 0.0, 1.0]
