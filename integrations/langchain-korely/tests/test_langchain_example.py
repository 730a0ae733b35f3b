"""examples/langchain_chatbot.py runs offline and remembers across conversations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "langchain_chatbot.py"
CONFTEST = (
    Path(__file__).resolve().parents[3] / "conftest.py"
)  # the repository root's network guard

# Runs the example with the tests' network guard: a connection off this machine fails it.
OFFLINE = (
    "import runpy, socket, sys; "
    "socket.socket.connect = runpy.run_path(sys.argv.pop(1))['local_only'](socket.socket.connect); "
    "sys.argv.pop(0); "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def run_demo(cwd: Path, *args: str, **env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE, str(CONFTEST), str(EXAMPLE), "--demo", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def remembers_lisbon(out: list[str]) -> None:
    second = out.index("--- conversation 2 ---")
    assert "  [remember] Remembered home-city: Alex lives in Lisbon" in out[:second]
    assert out[second + 1 :] == ["you> Where do I live?", "bot> You live in Lisbon."]


def test_the_demo_remembers_where_the_user_lives(tmp_path: Path) -> None:
    remembers_lisbon(run_demo(tmp_path, "--db", str(tmp_path / "chat.db")))
    assert (tmp_path / "chat.db").is_file()


def test_the_demo_stays_offline_and_in_memory_whatever_the_environment(tmp_path: Path) -> None:
    out = run_demo(
        tmp_path,
        OPENAI_API_KEY="dummy",
        KORELY_DATABASE_URL=f"sqlite:///{tmp_path / 'from-env.db'}",
    )
    remembers_lisbon(out)
    assert list(tmp_path.iterdir()) == []
