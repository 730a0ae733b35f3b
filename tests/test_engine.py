"""The engine object: where it keeps its data, its async twins, and what it imports."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import korely_memory
from korely_memory import Identity, InvalidRequest, MemoryEngine, NotFound, sealing
from korely_memory._db import _database

from .cli_helpers import korely
from .processes import PROCESSES, run_program

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_every_public_name_and_nothing_else(exported: Callable[..., list[str]]) -> None:
    assert korely_memory.__all__ == exported(korely_memory, "__version__")


def test_a_bare_import_binds_only_the_public_names() -> None:
    # No submodule either: the public ones (capture, limits, tools...) are the user's to import.
    code = (
        "import korely_memory\n"
        "print(sorted(n for n in vars(korely_memory) if not n.startswith('_')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == repr(sorted(set(korely_memory.__all__) - {"__version__"}))


def test_importing_the_engine_pulls_in_no_agent_framework() -> None:
    code = (
        "import sys, korely_memory\n"
        "frameworks = ('langchain', 'langchain_core', 'llama_index', 'openai')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in frameworks]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_default_url_is_a_sqlite_file_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    monkeypatch.delenv("KORELY_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with MemoryEngine() as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
    assert (tmp_path / "korely-memory.db").exists()
    with MemoryEngine() as again:
        assert [f.content for f in again.get_facts(giulia)] == ["Giulia lives in Rome"]


@pytest.mark.parametrize("default", [True, False], ids=["default-url", "url-given"])
def test_the_sqlite_file_and_its_companions_only_their_owner_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, giulia: Identity, default: bool
) -> None:
    monkeypatch.delenv("KORELY_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / ("korely-memory.db" if default else "memory.db")
    before = os.umask(0o022)  # the usual umask: files others may read
    try:
        with MemoryEngine(None if default else f"sqlite:///{path}") as engine:
            engine.remember(giulia, "home-city", "Giulia lives in Rome")
            made = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
            assert all(f.exists() for f in made)
            assert {f.name: oct(f.stat().st_mode & 0o777) for f in made} == {
                f.name: "0o600" for f in made
            }
    finally:
        os.umask(before)


def test_an_engine_starts_and_reads_while_another_process_writes(
    db_url: str, giulia: Identity
) -> None:
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
    writer = sa.create_engine(db_url)
    try:
        with writer.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, held
                conn.exec_driver_sql("INSERT INTO korely_admins VALUES ('acme', 'anna')")
            else:
                conn.begin()  # every write of the memory's own tables waits; reads do not
                conn.exec_driver_sql(
                    "LOCK TABLE korely_settings, korely_alembic_version, korely_facts, "
                    "korely_marks IN EXCLUSIVE MODE"
                )
            with MemoryEngine(db_url, write_wait=1) as starting:
                assert [f.content for f in starting.get_facts(giulia)] == ["Giulia lives in Rome"]
            shown = korely("--url", db_url, "facts", "acme", "giulia", "support-copilot")
            assert shown.exit_code == 0, shown.stderr
            assert "Giulia lives in Rome" in shown.stdout
            conn.rollback()
    finally:
        writer.dispose()


def test_environment_url_is_used_when_none_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str, giulia: Identity
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KORELY_DATABASE_URL", db_url)
    with MemoryEngine() as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        assert engine.url.get_backend_name() == db_url.split(":")[0].split("+")[0]
    assert not (tmp_path / "korely-memory.db").exists()
    with MemoryEngine(db_url) as direct:
        assert len(direct.get_facts(giulia)) == 1


def test_in_memory_sqlite_is_one_database_across_threads(giulia: Identity) -> None:
    with MemoryEngine("sqlite://") as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        seen: list[int] = []
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                engine.remember(giulia, f"k{i}", f"fact {i}")
                seen.append(len(engine.get_facts(giulia)))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and min(seen) >= 2
        assert len(engine.get_facts(giulia)) == 9


async def test_async_twins_give_the_same_results(engine: MemoryEngine, giulia: Identity) -> None:
    rome = await engine.aremember(giulia, "home-city", "Giulia lives in Rome")
    milan = await engine.acorrect(giulia, "home-city", "Giulia lives in Milan")
    assert await engine.aget_facts(giulia) == engine.get_facts(giulia) == [milan]
    assert await engine.ahistory(giulia, "home-city") == engine.history(giulia, "home-city")
    assert [f.id for f in engine.history(giulia, "home-city")] == [rome.id, milan.id]
    ended = await engine.aforget(giulia, "home-city")
    assert ended.id == milan.id and ended.end_cause == "forgotten"
    with pytest.raises(NotFound):
        await engine.aforget(giulia, "home-city")
    engine.remember(giulia, "plan", "Pro plan")
    assert (await engine.aget_context(giulia, "plan")).text == engine.get_context(
        giulia, "plan"
    ).text
    results = await asyncio.gather(*(engine.aremember(giulia, f"k{i}", f"v{i}") for i in range(5)))
    assert len({f.id for f in results}) == 5


def test_every_public_method_has_an_async_twin() -> None:
    public = [
        n for n in dir(MemoryEngine) if not n.startswith("_") and callable(getattr(MemoryEngine, n))
    ]
    for name in public:
        if name in ("close", "count_tokens") or (name.startswith("a") and name[1:] in public):
            continue
        assert asyncio.iscoroutinefunction(getattr(MemoryEngine, "a" + name)), name


# MemoryEngine's public surface, pinned: a new method is a deliberate edit here (and in the
# reference), or a method of one of its parts (engine.items, engine.listings) instead.
ENGINE_METHODS = (
    "remember", "correct", "forget", "get_facts", "history",
    "confirm", "reject", "proposals", "grant_admin", "revoke_admin", "is_admin",
    "get_context", "notes", "acknowledge", "release",
    "add_memory", "forget_memory", "search_memories", "search", "capture",
    "pending", "approve", "decline",
    "erase_user", "export_user", "import_user", "scrub", "delete_reader", "trim",
)  # fmt: skip
ENGINE_WITHOUT_TWINS = ("count_tokens", "close", "language", "items", "listings")


def test_the_engine_s_public_names_are_a_pinned_list() -> None:
    public = {n for n in dir(MemoryEngine) if not n.startswith("_")}
    pinned = {*ENGINE_METHODS, *("a" + n for n in ENGINE_METHODS), *ENGINE_WITHOUT_TWINS}
    assert sorted(public - pinned) == [], "public names of MemoryEngine not on the pinned list"
    assert sorted(pinned - public) == [], "pinned names MemoryEngine no longer has"
    assert len(set(ENGINE_METHODS)) == len(ENGINE_METHODS)


def test_quickstart_runs_offline(tmp_path: Path) -> None:
    env = {**os.environ, "KORELY_DATABASE_URL": f"sqlite:///{tmp_path}/quickstart.db"}
    out = run_program(ROOT / "examples" / "quickstart.py", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "Giulia lives in Milan" in out.stdout
    assert "## Known facts" in out.stdout


def open_and_write(url: str, n: int, start: Any, answers: Any) -> None:
    start.wait()  # every process opens the new database at the same moment
    try:
        with MemoryEngine(url) as engine:
            engine.remember(Identity("acme", f"user{n}", "bot"), "k", f"fact {n}")
            answers.put(len(engine.get_facts(Identity("acme", f"user{n}", "bot"))))
    except Exception as exc:
        answers.put(repr(exc))


@pytest.mark.new_database
def test_many_processes_may_create_the_schema_at_once(db_url: str) -> None:
    start, answers = PROCESSES.Barrier(6), PROCESSES.Queue()
    procs = [
        PROCESSES.Process(target=open_and_write, args=(db_url, n, start, answers)) for n in range(6)
    ]
    for proc in procs:
        proc.start()
    got = [answers.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(10)
    assert got == [1] * 6


def connect_at_once(urls: list[str], start: Any, answers: Any) -> None:
    """Connect to each of ``urls`` in turn, at the same moment as the other processes: one
    process for all the attempts (a process starts slower than it connects)."""
    for attempt, url in enumerate(urls):
        db = _database.create(sa.make_url(url))
        start.wait()  # every process connects to the new file at the same moment
        try:
            with db.connect() as conn:
                answers.put((attempt, conn.exec_driver_sql("PRAGMA journal_mode").scalar()))
        except Exception as exc:
            answers.put((attempt, repr(exc)))
        finally:
            db.dispose()


def test_processes_connecting_to_a_new_sqlite_file_at_once_all_get_wal_mode(
    tmp_path: Path,
) -> None:
    # SQLite refuses all but one of them the lock WAL mode needs, without waiting.
    urls = [f"sqlite:///{tmp_path / f'new-{attempt}.db'}" for attempt in range(10)]
    start, answers = PROCESSES.Barrier(6), PROCESSES.Queue()
    procs = [
        PROCESSES.Process(target=connect_at_once, args=(urls, start, answers)) for _ in range(6)
    ]
    for proc in procs:
        proc.start()
    got = sorted(answers.get(timeout=60) for _ in range(6 * len(urls)))
    for proc in procs:
        proc.join(10)
    assert got == [(attempt, "wal") for attempt in range(len(urls)) for _ in range(6)]


def test_a_seal_verifies_under_every_engine_on_its_database_only(
    db_url: str, tmp_path: Path
) -> None:
    with MemoryEngine(db_url) as first:
        sealed = sealing.seal(first, "giulia")
        with MemoryEngine(db_url) as second:  # another process, as far as the secret goes
            assert sealing.verifies(second, "giulia", sealed)
            assert not sealing.verifies(second, "marco", sealed)
            assert not sealing.verifies(
                second, "giulia", sealed[:-1] + ("1" if sealed[-1] == "0" else "0")
            )
            assert not sealing.verifies(second, "giulia", None)
    with MemoryEngine(f"sqlite:///{tmp_path / 'other.db'}") as elsewhere:
        assert not sealing.verifies(elsewhere, "giulia", sealed)


def test_a_url_is_read_once_for_every_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        MemoryEngine("postgresql://u:secret@127.0.0.1:abc/db")
    assert refused.value.field == "url"
    assert "secret" not in str(refused.value)
    monkeypatch.setenv("HOME", str(tmp_path))
    with MemoryEngine("sqlite:///~/memory.db") as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
    assert (tmp_path / "memory.db").exists()
