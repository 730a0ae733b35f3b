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


# The chat, with langchain-openai out of reach whether or not this environment has it.
WITHOUT_LANGCHAIN_OPENAI = "import sys; sys.modules['langchain_openai'] = None; " + OFFLINE


def run_chat(cwd: Path, typed: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LANGCHAIN_OPENAI, str(CONFTEST), str(EXAMPLE), *args],
        input=typed,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_a_key_without_langchain_openai_falls_back_to_the_scripted_model_with_one_notice(
    tmp_path: Path,
) -> None:
    typed = "I live in Lisbon.\n/new\nWhere do I live?\n/quit\nI live in Porto.\n"
    done = run_chat(tmp_path, typed, "--db", str(tmp_path / "chat.db"), OPENAI_API_KEY="dummy")
    notices = [line for line in done.stderr.splitlines() if "OPENAI_API_KEY" in line]
    assert notices == [
        "OPENAI_API_KEY is set but langchain-openai is not installed "
        "(pip install langchain-openai): the scripted model answers."
    ]
    assert "Traceback" not in done.stderr
    # /new starts a new conversation, where the fact is read back; /quit ends the chat.
    first, second = done.stdout.split("--- new conversation ---")
    assert "[remember] Remembered home-city: Alex lives in Lisbon" in first
    assert "bot> You live in Lisbon." in second
    assert "Porto" not in done.stdout


def test_the_chat_remembers_from_one_run_to_the_next(tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    first = run_chat(tmp_path, "I live in Lisbon.\n", "--db", db, OPENAI_API_KEY="")
    assert "[remember] Remembered home-city: Alex lives in Lisbon" in first.stdout
    assert "OPENAI_API_KEY" not in first.stderr
    # The end of input ends a chat as /quit does; the next run reads the same database.
    second = run_chat(tmp_path, "Where do I live?\n", "--db", db, OPENAI_API_KEY="")
    assert "bot> You live in Lisbon." in second.stdout
