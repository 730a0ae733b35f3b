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


@pytest.mark.timeout(600)
def test_smoke_run_prints_the_table(postgresql_url: str) -> None:
    """``postgresql_url`` only makes sure the server is there; the run makes schemas of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke"],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
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
        "KorelyStore: put, 40 items |",
        "KorelyStore / LangGraph's store: search, 200 items (lower is faster) |",
        "LangGraph SqliteStore: get, 200 items |",
        "LangGraph PostgresStore: search, 40 items |",
        "KorelyStore: search with a query (BM25), 200 items |",
    ):
        assert row in table, f"{row!r} missing from the table:\n{table}"
    assert "PostgreSQL skipped" not in done.stderr
    figures = [line.split(" | ", 1)[1] for line in table.splitlines() if line.startswith("| ")]
    assert not [f for f in figures if re.search(r"\bnan", f)], f"a figure is missing:\n{table}"
