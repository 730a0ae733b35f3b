"""The README says what the server does: its curl commands run, one after the other, against a
server on a new database and answer what the comment under each says; its token file reads; its
options are the command's; its JavaScript client is `examples/server_client.mjs` and runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from korely_mcp import read_token_file
from korely_memory import Identity, MemoryEngine
from korely_server.cli import _parser
from tests.cli_helpers import korely

from .servers import GIULIA, TOKENS, Server, running, write_tokens

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "integrations" / "korely-server" / "README.md").read_text()
EXAMPLE = ROOT / "examples" / "server_client.mjs"
SHOWN_URL = "http://127.0.0.1:8080"
CURL = shutil.which("curl")
# The README's token variables, and the tests' callers they stand for.
VARIABLES = {"GIULIA": "giulia", "BACKEND": "backend", "ADMIN": "admin"}


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, flags=re.M | re.S)


def curl_commands() -> list[tuple[str, str]]:
    """Each curl command of the README's bash blocks, with the comment that follows it."""
    found = []
    for block in blocks("bash"):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("curl "):
                continue
            end = i
            while lines[end].endswith("\\"):
                end += 1
            command = " ".join(part.rstrip("\\").strip() for part in lines[i : end + 1])
            said = lines[end + 1] if end + 1 < len(lines) else ""
            assert said.startswith("# "), f"no answer shown under: {command}"
            found.append((command, said.removeprefix("# ")))
    return found


def matches(shown: Any, got: Any) -> bool:
    """Whether ``got`` holds what ``shown`` shows: its fields (an object may have more), its
    lists' items one for one, its values exactly."""
    if isinstance(shown, dict):
        return isinstance(got, dict) and all(
            k in got and matches(v, got[k]) for k, v in shown.items()
        )
    if isinstance(shown, list):
        return (
            isinstance(got, list)
            and len(shown) == len(got)
            and all(matches(s, g) for s, g in zip(shown, got, strict=True))
        )
    return bool(shown == got and type(shown) is type(got))


def route_of(command: str) -> str:
    """``METHOD /path`` of a curl command: its ``-X``, else POST with ``-d``, else GET."""
    method = re.search(r" -X (\w+)", command)
    verb = method.group(1) if method else "POST" if " -d " in command else "GET"
    url = re.search(r"http://127\.0\.0\.1:8080(/[^\s\"?]*)", command)
    assert url is not None, command
    return f"{verb} {url.group(1)}"


def test_every_route_of_the_table_has_a_curl_example() -> None:
    listed = re.findall(r"^\| `((?:GET|POST|PATCH|DELETE) /v1/[^`]*)` \|", README, flags=re.M)
    assert len(listed) == 19
    shown = {route_of(command) for command, _ in curl_commands()}
    for route in listed:
        pattern = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(route))
        assert any(re.fullmatch(pattern, s) for s in shown), f"no curl example of {route}"


def steps() -> list[tuple[str, str, str]]:
    """The README's commands in the order a reader meets them, from the top: ``("shell", line,
    "")``, ``("curl", command, answer shown)`` and ``("python", code, "")``, past the install
    block and the "From Python" one (which `test_the_python_block_makes_the_application` runs),
    up to "Tests" (the contributors' command)."""
    found: list[tuple[str, str, str]] = []
    curls = iter(curl_commands())
    guide = README.partition("\n## Tests\n")[0]
    for block in re.finditer(r"^```(bash|python)\n(.*?)^```$", guide, flags=re.M | re.S):
        language, text = block.groups()
        if language == "python":
            if "create_app" not in text:
                found.append(("python", text, ""))
            continue
        lines = text.splitlines()
        if any(line.startswith("/path/to/venv/") for line in lines):
            continue  # the install block
        for i, line in enumerate(lines):
            if line.startswith("curl "):
                command, said = next(curls)
                found.append(("curl", command, said))
            elif line and not line.startswith("#") and not lines[i - 1].endswith("\\"):
                found.append(("shell", line, ""))
    return found


def run_curl(command: str, said: str, server: Server, env: dict[str, str]) -> None:
    status, _, body = said.partition(" ")
    ran = command.replace(SHOWN_URL, server.url).replace(
        "curl ", "curl -S -w '\\n%{http_code}' ", 1
    )
    done = subprocess.run(["bash", "-c", ran], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, (command, done.stderr)
    answer, _, got_status = done.stdout.rpartition("\n")
    assert got_status == status, (command, got_status, answer)
    if body.startswith("{"):
        assert matches(json.loads(body), json.loads(answer)), (command, answer)
    else:
        assert answer == body, (command, answer)


@pytest.mark.skipif(CURL is None, reason="curl is not on this machine")
@pytest.mark.timeout(180)
def test_the_readme_followed_from_the_top_on_a_new_database_answers_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KORELY_")}
    env.update(HOME=str(home), **{v: TOKENS[caller][0] for v, caller in VARIABLES.items()})
    walked = steps()
    assert sum(kind == "curl" for kind, _, _ in walked) >= 25
    with contextlib.ExitStack() as stack:
        server: Server | None = None
        for kind, text, said in walked:
            if kind == "curl":
                assert server is not None, f"{text} comes before the server is started"
                run_curl(text, said, server, env)
            elif kind == "python":
                for name in ("KORELY_DATABASE_URL",):
                    monkeypatch.setenv(name, env[name])
                exec(text, {})
            elif text.startswith("korely-server "):
                words = shlex.split(text)
                assert words[1:3] == ["--tokens", "tokens.json"]  # the tests' callers' file
                server = stack.enter_context(
                    running(None, tmp_path, *words[3:], admin=False, cwd=home, env=env)
                )
            elif text.startswith("korely "):
                done = korely(*shlex.split(text)[1:], env=env)
                assert done.exit_code == 0, (text, done.output)
            else:  # a line of the shell's own: mkdir, export
                done = subprocess.run(
                    ["bash", "-c", f"{text}\nenv -0"], env=env, capture_output=True, timeout=30
                )
                assert done.returncode == 0, (text, done.stderr)
                env = dict(
                    item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item
                )
        assert server is not None
    assert env["KORELY_DATABASE_URL"] == f"sqlite:///{home}/.korely/memory.db"
    with contextlib.closing(MemoryEngine(env["KORELY_DATABASE_URL"])) as engine:
        # pet approved, shoe-size declined; office-hours confirmed for the account
        assert sorted(f.key for f in engine.get_facts(GIULIA)) == ["office-hours", "pet"]
        assert engine.is_admin("acme", "ada")


def test_the_token_file_reads_with_the_fields_it_describes(tmp_path: Path) -> None:
    (shown,) = [b for b in blocks("json") if '"tokens"' in b]
    path = tmp_path / "tokens.json"
    path.write_text(shown)
    path.chmod(0o600)
    callers = {c.name: c for c in read_token_file(path).values()}
    assert {n: (c.who.user, c.any_user, c.admin) for n, c in callers.items()} == {
        "giulia-laptop": ("giulia", False, False),
        "backend": (None, True, False),
        "admin-console": ("ada", False, True),
    }
    assert callers["giulia-laptop"].who == Identity("acme", "giulia", "support-copilot")


def test_the_options_table_is_the_command_s() -> None:
    table = re.findall(r"^\| `(--[^`]+)`(?:, `(--[^`]+)`)? \|", README, flags=re.M)
    shown = {option.split()[0] for row in table for option in row if option}
    offered = {o for a in _parser()._actions for o in a.option_strings} - {"-h", "--help"}
    assert shown == offered


def test_the_javascript_client_is_the_example() -> None:
    (shown,) = blocks("js")
    assert shown == EXAMPLE.read_text()
    assert len(shown.splitlines()) <= 20


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not on this machine")
@pytest.mark.timeout(60)
def test_the_javascript_client_runs(sqlite_url: str, tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None
    with running(sqlite_url, tmp_path) as server:
        env = dict(os.environ, KORELY_SERVER=server.url, KORELY_TOKEN=TOKENS["giulia"][0])
        done = subprocess.run(
            [node, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        assert "- home-city: Giulia lives in Milan (since " in done.stdout
        assert "Rome" not in done.stdout
        with contextlib.closing(MemoryEngine(sqlite_url)) as engine:
            history = engine.history(GIULIA, "home-city")
        assert [f.content for f in history] == ["Giulia lives in Rome", "Giulia lives in Milan"]
        env["KORELY_TOKEN"] = "ksrv_not-a-token"
        refused = subprocess.run(
            [node, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=30
        )
        assert refused.returncode != 0
        assert "401 unauthorized: the bearer token is not one the server knows" in refused.stderr


def test_the_python_block_makes_the_application(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (code,) = [b for b in blocks("python") if "create_app" in b]
    write_tokens(tmp_path / "tokens.json")
    monkeypatch.chdir(tmp_path)
    made: dict[str, Any] = {}
    exec(code, made)
    try:
        assert str(made["app"].state.engine.url) == "sqlite:///memory.db"
    finally:
        made["app"].state.engine.close()
