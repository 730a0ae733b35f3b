"""The `korely-server` command's refusals: each one line saying why, before anything is served."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

import pytest

from korely_mcp import hash_token
from korely_memory import MemoryEngine
from korely_server.cli import main

from .servers import GIULIA, write_tokens


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stopped:
        main(list(args))
    code = stopped.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err


def test_the_command_needs_a_token_file_that_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KORELY_SERVER_TOKENS", raising=False)
    code, said = refused(capsys, "--port", "0")
    assert code == 2 and "--tokens (or $KORELY_SERVER_TOKENS) must name the token file" in said
    bad = tmp_path / "tokens.json"
    bad.write_text('{"tokens": [{"name": "x"}]}')
    code, said = refused(capsys, "--tokens", str(bad), "--port", "0")
    assert code == 2 and "korely-server: tokens[0]: lacks sha256" in said
    loose = write_tokens(tmp_path / "loose.json")
    loose.chmod(0o666)
    code, said = refused(capsys, "--tokens", str(loose), "--port", "0")
    assert code == 2 and "may be written by group or others" in said


def test_the_command_says_which_database_does_not_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = write_tokens(tmp_path / "tokens.json")
    code, said = refused(capsys, "--tokens", str(tokens), "--port", "0", "--url", "mysql://x/y")
    assert code == 2 and said.startswith("korely-server: ") and "mysql" in said
    file = tmp_path / "a-file"
    file.write_text("")
    url = f"sqlite:///{file}/memory.db"
    code, said = refused(capsys, "--tokens", str(tokens), "--port", "0", "--url", url)
    assert code == 2 and "cannot open the database" in said


def test_a_sqlite_file_named_that_is_not_there_is_refused_not_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = write_tokens(tmp_path / "tokens.json")
    typo = tmp_path / "memroy" / "memory.db"  # a mistyped folder
    url = f"sqlite:///{typo}"
    code, said = refused(capsys, "--tokens", str(tokens), "--port", "0", "--url", url)
    assert code == 2
    assert said == (
        f"korely-server: cannot open the database {url}: no database at {typo} "
        f"(korely --url {url} db upgrade creates one)\n"
    )
    assert not typo.parent.exists()  # no folder made, no file
    monkeypatch.setenv("KORELY_DATABASE_URL", f"sqlite:///{tmp_path / 'memory.db'}")
    code, said = refused(capsys, "--tokens", str(tokens), "--port", "0")
    assert code == 2 and f"no database at {tmp_path / 'memory.db'}" in said
    assert list(tmp_path.iterdir()) == [tokens]


def test_the_default_database_is_made_where_the_command_runs(tmp_path: Path) -> None:
    from .servers import running

    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "KORELY_DATABASE_URL"}
    with (
        running(None, tmp_path, admin=False, cwd=work, env=env) as server,
        server.client("giulia") as giulia,
    ):
        made = giulia.post("/v1/facts", json={"key": "pet", "content": "Giulia has a cat"})
        assert made.status_code == 201, made.text
    with contextlib.closing(MemoryEngine(f"sqlite:///{work / 'korely-memory.db'}")) as engine:
        assert [f.content for f in engine.get_facts(GIULIA)] == ["Giulia has a cat"]


def test_the_command_says_when_it_cannot_listen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = write_tokens(tmp_path / "tokens.json")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        code, said = refused(capsys, "--tokens", str(tokens), "--port", port)
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in said  # as every refusal
    code, said = refused(capsys, "--tokens", str(tokens), "--max-body", "10")
    assert code == 2 and "--max-body must be at least 1024 bytes" in said


def test_the_command_makes_and_hashes_tokens(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["new-token"]) == 0
    token, digest = (line.split()[1] for line in capsys.readouterr().out.splitlines())
    assert hash_token(token) == digest
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(token + "\n"))
    assert main(["hash-token"]) == 0
    assert capsys.readouterr().out.strip() == digest
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(""))
    assert main(["hash-token"]) == 2
    assert capsys.readouterr().err.startswith("korely-server: hash-token reads a token from stdin")
    for command in ("new-token", "hash-token"):
        for asked in ("--help", "-h"):
            assert main([command, asked]) == 0  # help asked and given; no token made
            said = capsys.readouterr()
            assert said.out.startswith(f"usage: korely-server {command}\n") and said.err == ""
            assert "token file" in said.out and "kmcp_" not in said.out
        assert main([command, "--count", "2"]) == 2
        said = capsys.readouterr()
        assert said.out == "" and f"korely-server {command}: not an argument: --count" in said.err


def test_a_server_off_loopback_warns_of_clear_text_and_unchecked_hosts(
    sqlite_url: str, tmp_path: Path
) -> None:
    from .servers import running

    with running(sqlite_url, tmp_path, "--host", "0.0.0.0") as server:
        said = server.log.read_text()
    assert "bearer tokens travel in clear text" in said
    assert "Host and Origin headers are not checked" in said
    named = tmp_path / "named"
    named.mkdir()
    with running(sqlite_url, named, "--host", "0.0.0.0", "--allowed-host", "memory.example") as s:
        said = s.log.read_text()
    assert "clear text" in said and "not checked" not in said
