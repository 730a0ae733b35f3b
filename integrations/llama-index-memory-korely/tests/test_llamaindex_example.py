"""The example chatbot: its demo runs offline, the same everywhere, and remembers across chats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from korely_memory import Identity, MemoryEngine

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llamaindex_chatbot.py"

# Runs the example with every socket refused: a demo that reached for a network would fail.
NO_NETWORK = """
import runpy, socket, sys

def refuse(*args, **kwargs):
    raise OSError("this test runs without a network")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_demo(cwd: Path, *arguments: str) -> str:
    env = {
        **os.environ,
        # A key and a database in the environment change nothing in the demo.
        "OPENAI_API_KEY": "sk-not-a-real-key",
        "KORELY_DATABASE_URL": f"sqlite:///{cwd / 'from-the-environment.db'}",
    }
    done = subprocess.run(
        [sys.executable, "-c", NO_NETWORK, str(EXAMPLE), "--demo", *arguments],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_demo_runs_offline_with_a_key_set_and_leaves_nothing_behind(tmp_path: Path) -> None:
    first, second = run_demo(tmp_path).split("--- conversation 2")
    assert "remember(" in first
    assert "Remembered home-city: The user lives in Rome" in first
    assert "bot: From what you told me before: The user lives in Rome." in second
    assert list(tmp_path.iterdir()) == []


def test_demo_keeps_its_facts_in_the_db_it_is_given(tmp_path: Path) -> None:
    run_demo(tmp_path, "--db", str(tmp_path / "chatbot.db"))
    assert [p.name for p in tmp_path.iterdir()] == ["chatbot.db"]
    with MemoryEngine(f"sqlite:///{tmp_path / 'chatbot.db'}") as engine:
        [fact] = engine.get_facts(Identity(account="acme", user="giulia", agent="chatbot"))
    assert (fact.key, fact.content) == ("home-city", "The user lives in Rome")
