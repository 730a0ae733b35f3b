"""``korely db``, the command's errors, and the command as a process."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.command import downgrade

from korely_memory import Identity, MemoryEngine
from korely_memory._db._database import create, resolve_url
from korely_memory._db._migrations import HEAD, VERSION_TABLE, _alembic, schema_transaction
from korely_memory._db._schema import Base

from .cli_helpers import as_json, fill, korely, one_error
from .processes import run_program

# Each test starts from a database with nothing in it: these test how tables are made.
pytestmark = pytest.mark.new_database

ROOT = Path(__file__).resolve().parents[1]


def at_baseline(url: str) -> None:
    db = create(resolve_url(url))
    with schema_transaction(db) as conn:
        _alembic.upgrade(conn, "0001")
    db.dispose()


def set_revision(url: str, revision: str) -> None:
    db = create(resolve_url(url))
    with db.begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = :r"), {"r": revision})
    db.dispose()


def test_db_upgrade_creates_upgrades_and_is_then_a_no_op(db_url: str, giulia: Identity) -> None:
    before = korely("--url", db_url, "--json", "db", "current")
    if db_url.startswith("sqlite"):  # no file yet: only `db upgrade` makes one
        one_error(before, "not_found")
    else:
        assert as_json(before) == {"revision": "empty", "head": HEAD, "up_to_date": False}
    refused = one_error(korely("--url", db_url, "stats"), "not_found")
    assert ("no database at" if db_url.startswith("sqlite") else "holds no memory") in refused
    assert korely("--url", db_url, "db", "upgrade").stdout == f"upgraded from empty to {HEAD}\n"
    assert korely("--url", db_url, "db", "upgrade").stdout == f"already at {HEAD}\n"
    assert korely("--url", db_url, "db", "check").exit_code == 0
    fill(db_url, giulia)
    assert as_json(korely("--url", db_url, "--json", "stats"))["facts"] == 4


def test_an_older_database_is_refused_by_every_command_until_db_upgrade(db_url: str) -> None:
    at_baseline(db_url)
    said = one_error(korely("--url", db_url, "stats"), "schema_version")
    assert "run `korely db upgrade`" in said
    one_error(korely("--url", db_url, "db", "check"), "schema_version")
    assert korely("--url", db_url, "db", "current").stdout.split()[:2] == ["revision", "0001"]

    upgraded = as_json(korely("--url", db_url, "--json", "db", "upgrade"))
    assert upgraded == {"from": "0001", "to": HEAD, "upgraded": True}
    assert korely("--url", db_url, "db", "check").stdout == (
        f"revision {HEAD}: the tables match the models\n"
    )
    assert korely("--url", db_url, "stats").exit_code == 0


def test_db_check_finds_a_table_that_differs_from_the_models(db_url: str) -> None:
    korely("--url", db_url, "db", "upgrade")
    db = create(resolve_url(db_url))
    with db.begin() as conn:
        conn.exec_driver_sql("DROP INDEX ix_korely_marks_subject")
    db.dispose()
    said = one_error(korely("--url", db_url, "db", "check"), "schema_version")
    assert "1 difference(s)" in said and "ix_korely_marks_subject" in said


def test_a_newer_or_unversioned_database_is_refused_and_stamp_adopts_one(db_url: str) -> None:
    korely("--url", db_url, "db", "upgrade")
    set_revision(db_url, "0999")
    for command in (["db", "upgrade"], ["db", "check"], ["facts", "acme", "giulia", "bot"]):
        assert "newer korely-memory" in one_error(
            korely("--url", db_url, *command), "schema_version"
        )

    db = create(resolve_url(db_url))
    with db.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE {VERSION_TABLE}")
    db.dispose()
    assert "korely db stamp" in one_error(korely("--url", db_url, "stats"), "schema_version")
    one_error(korely("--url", db_url, "db", "stamp", "7"), "invalid_request")
    stamped = korely("--url", db_url, "db", "stamp", HEAD)
    assert stamped.stdout == f"recorded revision {HEAD} (was unversioned)\n"
    assert korely("--url", db_url, "db", "check").exit_code == 0


def test_db_upgrade_sql_prints_what_an_upgrade_runs(db_url: str) -> None:
    at_baseline(db_url)
    script = korely("--url", db_url, "db", "upgrade", "--sql")
    assert script.exit_code == 0, script.stderr
    assert "CREATE INDEX ix_korely_memories_owner_only" in script.stdout
    assert f"UPDATE {VERSION_TABLE} SET version_num='{HEAD}'" in script.stdout
    run_script(db_url, script.stdout)
    assert korely("--url", db_url, "db", "check").exit_code == 0
    assert korely("--url", db_url, "db", "upgrade", "--sql").stdout == f"-- already at {HEAD}\n"


def run_script(db_url: str, script: str) -> None:
    """Run printed SQL as sqlite3 or psql would."""
    url = resolve_url(db_url)
    if url.get_backend_name() == "sqlite":
        database = sqlite3.connect(url.database or "")
        database.executescript(script)
        database.close()
    else:  # as psql would run it, BEGIN and COMMIT included
        import psycopg

        # The URL's own connection arguments (its options decoded), as the engine connects.
        args, kwargs = url.get_dialect()().create_connect_args(url)
        with psycopg.connect(*args, **kwargs, autocommit=True) as database:
            database.execute(script.encode())


def test_words_printed_sql_cannot_count_are_counted_by_the_first_engine(
    db_url: str, giulia: Identity
) -> None:
    """Revision 0007 counts facts' words with the stemmer: SQL printed for a reviewer leaves
    that to the first engine that opens the database, which ranks as if upgraded online."""
    with MemoryEngine(db_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome, Rome of the seven hills")
        engine.remember(giulia, "work", "Giulia works in Milan")
        engine.remember(giulia, "trip", "A trip to Rome in May")
        expected = [f.key for f in engine.search(giulia, "Rome hills").facts]
        counted = rows(engine, "SELECT id, words FROM korely_facts ORDER BY id")
        terms = rows(engine, "SELECT fact_id, term, tf FROM korely_fact_terms ORDER BY 1, 2")
    db = create(resolve_url(db_url))
    with schema_transaction(db) as conn:
        downgrade(_alembic.config(conn), "0006")
    db.dispose()
    script = korely("--url", db_url, "db", "upgrade", "--sql")
    assert "'uncounted'" in script.stdout
    run_script(db_url, script.stdout)
    with MemoryEngine(db_url, auto_upgrade=False) as engine:
        assert rows(engine, "SELECT id, words FROM korely_facts ORDER BY id") == counted
        assert (
            rows(engine, "SELECT fact_id, term, tf FROM korely_fact_terms ORDER BY 1, 2") == terms
        )
        assert [f.key for f in engine.search(giulia, "Rome hills").facts] == expected
        left = "SELECT count(*) FROM korely_settings WHERE name = 'uncounted'"
        assert rows(engine, left) == [(0,)]


def rows(engine: MemoryEngine, sql: str) -> list[tuple[object, ...]]:
    with engine.db.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql(sql)]


# -- errors ------------------------------------------------------------------------------------


def test_errors_are_one_line_with_a_code(sqlite_url: str, tmp_path: Path, giulia: Identity) -> None:
    fill(sqlite_url, giulia)
    one_error(korely("--url", "", "stats"), "invalid_request")  # an empty URL names nothing
    assert "no database at" in one_error(
        korely("--url", f"sqlite:///{tmp_path}/typo.db", "stats"), "not_found"
    )
    assert not (tmp_path / "typo.db").exists()
    application = sqlite3.connect(tmp_path / "application.db")
    application.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    application.close()
    other = korely("--url", f"sqlite:///{tmp_path}/application.db", "facts", "a", "b", "c")
    assert "holds no memory" in one_error(other, "not_found")
    application = sqlite3.connect(tmp_path / "application.db")
    tables = application.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    application.close()
    assert tables == [("orders",)]
    one_error(korely("--url", sqlite_url, "erase-user", "acme", "a/b"), "invalid_request")
    usage = one_error(korely("--url", sqlite_url, "facts", "acme"), "usage")
    assert "Missing argument" in usage
    bad_moment = korely("--url", sqlite_url, "facts", "acme", "giulia", "bot", "--as-of", "soon")
    assert "'--as-of': must be a date (2026-03-01) or an ISO 8601 time" in one_error(
        bad_moment, "usage"
    )
    assert bad_moment.exit_code == 2
    both = korely("--url", sqlite_url, "facts", "a", "b", "c", "--history", "--as-of", "2025-01-01")
    one_error(both, "usage")
    one_error(
        korely("--url", sqlite_url, "history", "acme", "giulia", "bot", "!!"), "invalid_request"
    )
    one_error(korely("--url", sqlite_url, "export-user", "acme", "a/b"), "invalid_request")
    one_error(korely("--url", sqlite_url, "trim", "--now", "0001-01-02"), "invalid_request")
    alone = korely("review")
    assert alone.exit_code == 2 and alone.stderr.startswith("Usage: korely review")
    assert "confirm" in alone.stderr  # a group named alone shows its commands
    assert korely("--version").stdout.startswith("korely, version ")
    unreachable = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
    assert korely("--url", unreachable, "stats").exit_code == 1
    one_error(korely("--url", unreachable, "stats"), "database")


def test_a_url_that_does_not_parse_is_one_line_without_its_password() -> None:
    bad_port = korely("--url", "postgresql://u:secret@127.0.0.1:abc/db", "stats")
    said = one_error(bad_port, "invalid_request")
    assert said == (
        "korely: invalid_request: url: the URL given is not a database URL "
        "(sqlite:///path/to/memory.db, postgresql://...)"
    )
    assert "secret" not in bad_port.stderr
    one_error(korely("--url", "not a url", "stats"), "invalid_request")


def test_a_tilde_in_a_sqlite_url_is_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    fill(f"sqlite:///{tmp_path}/memory.db", giulia)
    assert as_json(korely("--json", "admins", "acme", "--url", "sqlite:///~/memory.db")) == ["anna"]
    assert not (Path.cwd() / "~").exists()


def test_the_url_comes_from_the_environment_and_options_go_after_the_command(
    sqlite_url: str,
    giulia: Identity,
) -> None:
    fill(sqlite_url, giulia)
    from_env = korely("--json", "admins", "acme", env={"KORELY_DATABASE_URL": sqlite_url})
    assert as_json(from_env) == ["anna"]
    after = korely("admins", "acme", "--url", sqlite_url, "--json")
    assert as_json(after) == ["anna"]


def test_without_url_or_environment_the_command_opens_the_engine_s_default_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, giulia: Identity
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KORELY_DATABASE_URL", raising=False)
    missing = one_error(korely("stats"), "not_found")
    assert "no database at korely-memory.db, the default" in missing
    assert not (tmp_path / "korely-memory.db").exists()
    with MemoryEngine() as engine:  # the engine's default: ./korely-memory.db
        engine.remember(giulia, "home-city", "Giulia lives in Rome")

    here = as_json(korely("--json", "facts", "acme", "giulia", "support-copilot"))
    assert [f["content"] for f in here] == ["Giulia lives in Rome"]

    elsewhere = f"sqlite:///{tmp_path}/elsewhere.db"
    korely("--url", elsewhere, "db", "upgrade")
    env = {"KORELY_DATABASE_URL": elsewhere}
    assert as_json(korely("--json", "stats", env=env))["facts"] == 0  # the variable, then
    named = korely("--json", "stats", "--url", "sqlite:///korely-memory.db", env=env)
    assert as_json(named)["facts"] == 1  # --url first of all


def test_a_file_that_holds_no_memory_is_left_byte_for_byte(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    application = tmp_path / "application.db"
    database = sqlite3.connect(application)
    database.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    database.commit()
    database.close()
    for path in (empty, application):
        before = path.read_bytes()
        url = f"sqlite:///{path}"
        for command in (["stats"], ["people"], ["facts", "acme", "giulia", "bot"]):
            assert "holds no memory" in one_error(korely("--url", url, *command), "not_found")
        assert as_json(korely("--url", url, "--json", "db", "current"))["revision"] == "empty"
        one_error(korely("--url", url, "db", "check"), "schema_version")
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["application.db", "empty.db"]


def test_export_user_into_a_folder_that_is_not_there_is_one_line(
    sqlite_url: str, tmp_path: Path, giulia: Identity
) -> None:
    fill(sqlite_url, giulia)
    target = tmp_path / "missing" / "dir" / "giulia.json"
    said = one_error(
        korely("--url", sqlite_url, "export-user", "acme", "giulia", "-o", str(target)),
        "invalid_request",
    )
    assert said == (
        f"korely: invalid_request: output: cannot write {str(target)!r}: No such file or directory"
    )
    assert not (tmp_path / "missing").exists()


# -- as a process -----------------------------------------------------------------------------


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)


def python_m(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` in the checkout, forked from the tests' process server (a new Python
    would spend a second importing what the server has imported); the console script below is
    a program of its own."""
    return run_program(Path("-m"), *args, cwd=ROOT)


def test_python_m_korely_memory_and_the_console_script(sqlite_url: str, giulia: Identity) -> None:
    fill(sqlite_url, giulia)
    done = python_m("korely_memory", "--url", sqlite_url, "admins", "acme")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "anna"
    failed = python_m(
        "korely_memory", "--url", sqlite_url, "review", "confirm", "999", "--as", "anna"
    )
    assert failed.returncode == 1 and failed.stderr == "korely: not_found: no fact 999\n"
    script = Path(sys.executable).with_name("korely")
    assert script.exists(), "pip install -e . makes the console script"
    current = run(str(script), "--url", sqlite_url, "--json", "db", "current")
    assert current.returncode == 0 and f'"revision": "{HEAD}"' in current.stdout


def test_importing_and_starting_the_engine_loads_neither_alembic_nor_click(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from korely_memory import MemoryEngine\n"
        f"MemoryEngine({f'sqlite:///{tmp_path}/new.db'!r}).close()\n"
        f"MemoryEngine({f'sqlite:///{tmp_path}/new.db'!r}).close()\n"
        "print(sorted(m for m in ('alembic', 'click', 'mako') if m in sys.modules))\n"
    )
    done = run(sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
    assert os.path.exists(tmp_path / "new.db")
    with MemoryEngine(f"sqlite:///{tmp_path}/new.db") as engine:
        assert engine.get_facts(Identity("acme", "giulia", "bot")) == []


def test_db_create_partitions_every_table_of_an_account_s_rows(
    postgresql_url: str, giulia: Identity
) -> None:
    """``korely db create --partitions N``: each table that holds an account's rows is split by
    hash of the account into N partitions; the engine opens it as any other, and ``db check``
    finds the tables the models declare (PostgreSQL's partitions and their keys aside)."""
    made = as_json(korely("--url", postgresql_url, "--json", "db", "create", "--partitions", "8"))
    assert made == {"revision": HEAD, "partitions": 8}
    assert korely("--url", postgresql_url, "db", "check").exit_code == 0
    again = one_error(
        korely("--url", postgresql_url, "db", "create", "--partitions", "8"), "invalid_request"
    )
    assert f"already holds the memory's tables (revision {HEAD})" in again
    with MemoryEngine(postgresql_url) as engine:
        engine.remember(giulia, "home-city", "Giulia lives in Rome")
        assert "Rome" in engine.get_context(giulia, "Where?", reader="bot").text
        with engine.db.connect() as conn:
            split = dict(
                conn.exec_driver_sql(
                    "SELECT c.relname, count(i.inhrelid) FROM pg_partitioned_table p"
                    " JOIN pg_class c ON c.oid = p.partrelid"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " LEFT JOIN pg_inherits i ON i.inhparent = c.oid"
                    " WHERE n.nspname = current_schema() GROUP BY c.relname"
                ).all()
            )
            holding = (
                conn.exec_driver_sql(
                    "SELECT count(*) FROM korely_facts_p0"
                    " UNION ALL SELECT count(*) FROM korely_facts"
                )
                .scalars()
                .all()
            )
    every = {t.name for t in Base.metadata.sorted_tables} - {"korely_settings"}
    assert split == dict.fromkeys(every, 8)
    assert holding[1] == 1 and holding[0] in (0, 1)


@pytest.mark.parametrize("partitions", ["1", "257", "eight"])
def test_db_create_refuses_a_number_of_partitions_out_of_range(
    postgresql_url: str, partitions: str
) -> None:
    refused = korely("--url", postgresql_url, "db", "create", "--partitions", partitions)
    assert refused.exit_code != 0
    db = create(resolve_url(postgresql_url))
    with db.connect() as conn:
        assert sa.inspect(conn).get_table_names() == []
    db.dispose()


def test_db_create_refuses_sqlite_and_makes_no_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/memory.db"
    refused = one_error(
        korely("--url", url, "db", "create", "--partitions", "8"), "invalid_request"
    )
    assert "PostgreSQL only" in refused
    assert not (tmp_path / "memory.db").exists()


def test_stats_counts_the_bytes_of_every_partition(postgresql_url: str, giulia: Identity) -> None:
    """On tables partitioned by account the rows are in the partitions, the parents hold none:
    ``korely stats`` counts the partitions' bytes, each once, not the empty parents'."""
    korely("--url", postgresql_url, "db", "create", "--partitions", "8")
    fill(postgresql_url, giulia)
    with MemoryEngine(postgresql_url) as engine:
        for n in range(300):
            engine.add_memory(giulia, f"Giulia said thing number {n} " + "word " * 40)
        with engine.db.connect() as conn:
            names = [t.name for t in Base.metadata.sorted_tables]
            parents, leaves = conn.execute(
                sa.text(
                    "SELECT (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                    "        WHERE c.oid = ANY(:tables)),"
                    "       (SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0)"
                    "        FROM pg_inherits i WHERE i.inhparent = ANY(:tables))"
                ).bindparams(sa.bindparam("tables", type_=sa.ARRAY(sa.Integer))),
                {"tables": [_oid(conn, name) for name in names]},
            ).one()
    assert leaves > 10 * parents  # the rows are in the partitions
    said = as_json(korely("--url", postgresql_url, "--json", "stats"))["size_bytes"]
    assert said == parents + leaves


def _oid(conn: sa.Connection, table: str) -> int:
    return int(
        conn.execute(sa.text("SELECT CAST(to_regclass(:t) AS oid)"), {"t": table}).scalar_one()
    )
