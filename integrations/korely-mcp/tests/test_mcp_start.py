"""Starting the server as a desktop assistant does, and a database that does not open.

Each test runs the command as a subprocess: what is pinned is the process (its PATH, its
working folder, its exit status and stderr).
"""

from __future__ import annotations

import json
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from korely_memory import MemoryEngine

from .servers import GIULIA, command, text

README = Path(__file__).resolve().parents[1] / "README.md"
VENV_BIN = Path(sys.executable).parent  # the venv the tests run in, as the README's /path/to/venv
STDIO = ["--account", "acme", "--user", "giulia", "--agent", "support-copilot", "--reader", "r"]


def desktop_config() -> dict[str, Any]:
    """The README's desktop configuration, as the README shows it."""
    blocks = re.findall(r"```json\n(.*?)```", README.read_text(), flags=re.S)
    [config] = [json.loads(b) for b in blocks if '"command"' in b]
    entry: dict[str, Any] = config["mcpServers"]["korely"]
    return entry


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.parametrize("form", ["command", "python -m"])
async def test_the_readme_s_desktop_config_runs_without_the_venv_on_path(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = desktop_config()
    assert entry["command"] == "/path/to/venv/bin/korely-mcp"
    assert entry["env"] == {"KORELY_DATABASE_URL": "sqlite:///~/.korely/memory.db"}
    args = list(entry["args"])
    if form == "command":
        program = entry["command"].replace("/path/to/venv/bin", str(VENV_BIN))
    else:  # the README's other form: the venv's python, with -m korely_mcp first
        program = str(VENV_BIN / "python")
        args = ["-m", "korely_mcp", *args]
    # What a desktop assistant gives its servers: its own PATH, without the venv's bin; a home
    # of its own here, where ~/.korely does not exist yet; some other working folder.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server = StdioServerParameters(command=program, args=args, env=entry["env"], cwd=elsewhere)
    async with Client(server) as client:
        listed = await client.list_tools()
        saved = await client.call_tool("korely_remember", {"key": "pet", "content": "A cat"})
    assert "korely_get_context" in [tool.name for tool in listed.tools]
    assert text(saved) == "Remembered pet: A cat"
    folder = tmp_path / "home" / ".korely"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert list(elsewhere.iterdir()) == []
    with MemoryEngine(f"sqlite:///{folder / 'memory.db'}") as engine:
        assert [f.content for f in engine.get_facts(GIULIA)] == ["A cat"]


def test_the_bare_command_name_is_not_found_on_a_desktop_path() -> None:
    # Why the README gives the absolute path: the same config with "korely-mcp" alone.
    found = subprocess.run(
        ["sh", "-c", "command -v korely-mcp"], env={"PATH": "/usr/bin:/bin"}, capture_output=True
    )
    assert found.returncode != 0
    assert (VENV_BIN / "korely-mcp").exists()


def start(url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("--url", url, *STDIO),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
    )


def test_a_sqlite_file_whose_folder_cannot_be_made_stops_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    url = f"sqlite:///{tmp_path}/a-file/memory.db"
    done = start(url)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"korely-mcp: cannot open the database {url}: ")
    assert line.endswith("a-file is not a folder")


def test_a_tilde_in_a_sqlite_url_is_the_home_folder(tmp_path: Path) -> None:
    done = start("sqlite:///~/deep/er/memory.db", HOME=str(tmp_path))
    assert (done.returncode, done.stderr) == (0, "")  # stdin at its end: served, then done
    assert (tmp_path / "deep" / "er" / "memory.db").exists()
    assert not (Path.cwd() / "~").exists()


def test_a_postgresql_server_that_does_not_answer_stops_with_one_line() -> None:
    url = f"postgresql+psycopg://korely:s3cret@127.0.0.1:{free_port()}/memory"
    done = start(url)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    shown = url.replace(":s3cret@", ":***@")
    assert line.startswith(f"korely-mcp: cannot open the database {shown}: connection failed")
    assert "Connection refused" in line
    assert "s3cret" not in done.stderr


def test_a_line_that_is_not_json_rpc_is_logged(tmp_path: Path) -> None:
    done = subprocess.run(
        command("--url", f"sqlite:///{tmp_path}/memory.db", *STDIO),
        input='this is not json\n{"jsonrpc": "2.0"}\n',
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0
    logged = [line for line in done.stderr.splitlines() if "not a JSON-RPC message" in line]
    assert len(logged) == 2, done.stderr
    assert logged[0].startswith(
        "WARNING:korely_mcp:ignored a line on stdin that is not a JSON-RPC message: "
    )
