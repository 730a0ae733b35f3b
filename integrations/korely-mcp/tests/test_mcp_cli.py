"""The `korely-mcp` command refuses a configuration it cannot serve, before it serves anything."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from korely_mcp import cli
from korely_mcp.cli import main
from korely_memory import Identity

STDIO = ["--account", "acme", "--user", "giulia", "--agent", "support-copilot", "--reader", "r"]


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as caught:
        main(list(args))
    assert caught.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # over stdio, stdout is the protocol's
    return captured.err


@pytest.fixture(autouse=True)
def no_identity_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("KORELY_ACCOUNT", "KORELY_USER", "KORELY_AGENT", "KORELY_READER"):
        monkeypatch.delenv(variable, raising=False)


def test_a_server_without_an_identity_does_not_start(capsys: pytest.CaptureFixture[str]) -> None:
    said = refused(capsys, "--account", "acme", "--agent", "support-copilot")
    assert "over stdio, --user (or --no-user) and --reader must be given" in said


def test_the_environment_completes_the_flags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORELY_READER", "laptop")
    monkeypatch.setenv("KORELY_USER", "giulia")
    said = refused(capsys, "--agent", "support-copilot", "--no-user")
    assert "--user (or $KORELY_USER) and --no-user exclude each other" in said


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (["--account", "ac/me"], "korely-mcp: account: must not contain '/'"),
        (["--reader", "a\nb"], "korely-mcp: reader: must not contain a line break"),
        (["--token-budget", "10"], "korely-mcp: token_budget: must be between 50 and 8000"),
        (
            ["--hold", "-1"],  # in the seconds given, not as timedelta's "-1 day, 23:59:59"
            "korely-mcp: hold: must be more than 0 and at most a day, got -1 seconds",
        ),
        (["--hold", "90000"], "korely-mcp: hold: must be more than 0 and at most a day, got 90000"),
        (["--max-facts", "-1"], "korely-mcp: max_facts: must be an integer from 0"),
        (["--max-facts", "2.0"], "korely-mcp: max_facts: must be an integer from 0"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_field(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, change: list[str], said: str
) -> None:
    assert said in refused(capsys, "--url", sqlite_url, *STDIO, *change)


def test_an_http_server_takes_no_identity_from_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    said = refused(capsys, "--transport", "http", "--tokens", str(tmp_path), "--user", "giulia")
    assert "over http the identity comes from each request's token, not from flags" in said


def test_an_http_server_needs_a_token_file_that_reads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert "--tokens (or $KORELY_MCP_TOKENS) must name" in refused(capsys, "--transport", "http")
    missing = tmp_path / "missing.json"
    said = refused(capsys, "--transport", "http", "--tokens", str(missing))
    assert f"korely-mcp: tokens: cannot read the token file {missing}" in said


def test_the_server_s_default_database_only_its_owner_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KORELY_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    before = os.umask(0o022)
    try:
        options = argparse.Namespace(url=None, token_budget=2000, hold=30.0, max_facts=None)
        tools = cli._tools(options)
        tools.engine.remember(Identity("acme", "giulia", "support-copilot"), "k", "A fact")
        made = sorted(tmp_path.iterdir())
        assert [p.name for p in made] == [
            "korely-memory.db",
            "korely-memory.db-shm",
            "korely-memory.db-wal",
        ]
        assert {oct(p.stat().st_mode & 0o777) for p in made} == {"0o600"}
        tools.engine.close()
    finally:
        os.umask(before)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgresql://u:secret@127.0.0.1:abc/db", "the URL given is not a database URL"),
        ("not a url", "'not a url' is not a database URL"),
    ],
)
def test_a_url_that_does_not_parse_is_one_line_without_its_password(
    capsys: pytest.CaptureFixture[str], url: str, said: str
) -> None:
    error = refused(capsys, "--url", url, *STDIO)
    assert error.splitlines() == [
        f"korely-mcp: {said} (sqlite:///path/to/memory.db, postgresql://...)"
    ]
    assert "secret" not in error
