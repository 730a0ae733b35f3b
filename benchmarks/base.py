"""What every workload shares: the sizes of a run, the table of figures, fresh databases."""

from __future__ import annotations

import contextlib
import os
import statistics
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import sqlalchemy as sa

from . import workloads as w

PEER = "LangGraph SqliteStore / PostgresStore"


@dataclass(frozen=True)
class Sizes:
    facts: tuple[int, ...] = (40, 1_000, 10_000)
    budgets: tuple[int, ...] = (800, 4_000)
    runs: int = 200
    peer_runs: int = 30
    other_owners: int = 100_000
    big_owner: int = 100_000
    one_person: int = 1_000  # the facts of the person ``big_owner`` is compared with
    remember: int = 2_000
    told_readers: int = 8
    told_writers: int = 2
    told_reads: int = 7_000  # reads of each shape of readers: 21,000 in all
    memory_reads: int = 10_000
    memory_warm: int = 1_000
    relevance_facts: tuple[int, ...] = (40, 1_000, 10_000)
    relevance_targets: int = 50  # facts asked for, each in four ways
    relevance_passes: int = 3  # timed passes over the questions (the peers: 1 past 1,000 facts)
    long_memories: int = 200
    long_memory_chars: int = 16_000
    long_memory_people: int = 3_000  # reads of a different person each, after the warm-up
    long_memory_warm: int = 500
    concurrency: int = 8  # threads, and processes
    concurrency_seconds: float = 5.0
    placements: tuple[str, ...] = ("system", "context", "notes")
    store_items: tuple[int, ...] = (40, 1_000, 10_000)
    locomo_conversations: int | None = None  # the first N of the file's ten (None: all)
    locomo_questions: int | None = None  # the first N questions of each category (None: all)
    locomo_turns: int | None = None  # the first N turns of each conversation (None: all)
    server_clients: int = 20  # korely-server: clients at once, each its own person
    server_calls: int = 50  # calls of each client
    warm: int | None = None  # at most this many unmeasured runs before a timing (None: as asked)


SMOKE = Sizes(
    facts=(40,),
    budgets=(800,),
    runs=3,
    peer_runs=2,
    other_owners=200,
    big_owner=400,
    one_person=40,
    remember=20,
    told_readers=2,
    told_writers=1,
    told_reads=60,
    memory_reads=50,
    memory_warm=10,
    relevance_facts=(40, 200),
    relevance_targets=3,
    relevance_passes=1,
    long_memories=5,
    long_memory_people=20,
    long_memory_warm=5,
    concurrency=2,
    concurrency_seconds=0.3,
    placements=("notes",),
    store_items=(200,),
    locomo_conversations=1,
    locomo_questions=2,
    locomo_turns=60,  # every category still has questions whose evidence is in them
    server_clients=2,
    server_calls=10,
    warm=1,
)


@dataclass
class Table:
    rows: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    figures: dict[tuple[str, str], float] = field(default_factory=dict)
    sections: list[str] = field(default_factory=list)  # tables of their own, printed after

    def put(self, label: str, backend: str, value: float | str, fmt: str = "{:.2f}") -> None:
        if isinstance(value, float | int):
            self.figures[(label, backend)] = float(value)
            text = fmt.format(value)
        else:
            text = value
        for name, cells in self.rows:
            if name == label:
                cells[backend] = text
                return
        self.rows.append((label, {backend: text}))

    def get(self, label: str, backend: str) -> float | None:
        return self.figures.get((label, backend))

    def markdown(self) -> str:
        out = ["| workload | SQLite | PostgreSQL |", "|---|---:|---:|"]
        out += [
            f"| {name} | {cells.get('sqlite', '–')} | {cells.get('postgresql', '–')} |"
            for name, cells in self.rows
        ]
        return "\n".join(out)


class Databases:
    """Fresh, empty databases: a SQLite file, or a PostgreSQL schema dropped afterwards."""

    def __init__(self, postgres: str, workdir: str) -> None:
        self.postgres = sa.make_url(postgres)
        self.workdir = workdir
        self.unavailable: str | None = None
        try:
            probe = sa.create_engine(self.postgres, connect_args={"connect_timeout": 3})
            with probe.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            probe.dispose()
        except Exception as exc:  # any failure means no PostgreSQL for this run
            self.unavailable = f"PostgreSQL not reachable: {exc.__class__.__name__}"

    @contextlib.contextmanager
    def fresh(self, backend: str) -> Iterator[str]:
        name = f"korely_bench_{uuid.uuid4().hex[:10]}"
        if backend == "sqlite":
            yield f"sqlite:///{os.path.join(self.workdir, name)}.db"
            return
        admin = sa.create_engine(self.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        try:
            schema_url = self.postgres.update_query_dict({"options": session_options(name)})
            yield schema_url.render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
            admin.dispose()

    def libpq(self) -> str:
        return self.postgres.set(drivername="postgresql").render_as_string(hide_password=False)


def session_options(schema: str) -> str:
    """libpq's ``options`` for a session in ``schema``, with what ``$PGOPTIONS`` sets: the
    keyword replaces that variable rather than adding to it."""
    return f"-csearch_path={schema} {os.environ.get('PGOPTIONS', '')}".strip()


def in_turns(
    first: Callable[[], object], second: Callable[[], object], runs: int
) -> tuple[float, float]:
    """Medians of two reads measured in alternating batches (five, or one a run for fewer)."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(min(5, runs)):
        a.append(w.median_ms(first, max(1, runs // 5), warm=5))
        b.append(w.median_ms(second, max(1, runs // 5), warm=5))
    return statistics.median(a), statistics.median(b)
