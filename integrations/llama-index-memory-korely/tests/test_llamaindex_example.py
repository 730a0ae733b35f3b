"""The example chatbot: its demo runs offline, the same everywhere, and remembers across chats."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from korely_memory import Identity, MemoryEngine
from tests.processes import run_program

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llamaindex_chatbot.py"


def run_demo(cwd: Path, *arguments: str) -> str:
    env = {
        **os.environ,
        # A key and a database in the environment change nothing in the demo.
        "OPENAI_API_KEY": "sk-not-a-real-key",
        "KORELY_DATABASE_URL": f"sqlite:///{cwd / 'from-the-environment.db'}",
    }
    # Every socket refused: a demo that reached for a network would fail.
    done = run_program(EXAMPLE, "--demo", *arguments, cwd=cwd, env=env, sockets=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_demo_runs_offline_with_a_key_set_and_leaves_nothing_behind(tmp_path: Path) -> None:
    first, second = run_demo(tmp_path).split("--- conversation 2")
    assert "remember(" in first
    assert "Remembered home-city: The user lives in Rome" in first
    assert "bot: From what you told me before: The user lives in Rome." in second
    assert list(tmp_path.iterdir()) == []


def test_demo_captures_a_correction_from_a_chat_engine_without_tools(tmp_path: Path) -> None:
    shown = run_demo(tmp_path)
    captured, last = shown.split("--- conversation 3", 1)[1].split("--- conversation 4")
    assert "remember(" not in captured  # no tool: the fact was captured
    assert "[captured] home-city: The user lives in Milan" in captured
    assert "bot: From what you told me before: The user lives in Milan." in last


def test_demo_keeps_its_facts_in_the_db_it_is_given(tmp_path: Path) -> None:
    run_demo(tmp_path, "--db", str(tmp_path / "chatbot.db"))
    assert [p.name for p in tmp_path.iterdir()] == ["chatbot.db"]
    with MemoryEngine(f"sqlite:///{tmp_path / 'chatbot.db'}") as engine:
        [fact] = engine.get_facts(Identity(account="acme", user="giulia", agent="chatbot"))
    assert (fact.key, fact.content) == ("home-city", "The user lives in Milan")  # captured


def run_chat(cwd: Path, typed: str, *arguments: str, key: str) -> subprocess.CompletedProcess[str]:
    """The chat, with llama-index-llms-openai out of reach, installed here or not."""
    done = run_program(
        EXAMPLE,
        *arguments,
        cwd=cwd,
        env={**os.environ, "OPENAI_API_KEY": key},
        input=typed,
        hide=["llama_index.llms.openai"],
        sockets=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_a_key_without_the_openai_llm_falls_back_to_the_scripted_model_with_one_notice(
    tmp_path: Path,
) -> None:
    typed = "Hi! I live in Rome.\n/new\nWhere do I live?\n/quit\nI live in Turin.\n"
    done = run_chat(tmp_path, typed, "--db", str(tmp_path / "chatbot.db"), key="sk-not-a-real-key")
    notices = [line for line in done.stderr.splitlines() if "OPENAI_API_KEY" in line]
    assert notices == [
        "OPENAI_API_KEY is set but llama-index-llms-openai is not installed "
        "(pip install llama-index-llms-openai): the scripted model answers."
    ]
    assert "Traceback" not in done.stderr
    # /new starts a new conversation, where the fact is read back; /quit ends the chat.
    first, second = done.stdout.split("--- new conversation ---")
    assert "Remembered home-city: The user lives in Rome" in first
    assert "bot: From what you told me before: The user lives in Rome." in second
    assert "Turin" not in done.stdout
    with MemoryEngine(f"sqlite:///{tmp_path / 'chatbot.db'}") as engine:
        [fact] = engine.get_facts(Identity(account="acme", user="giulia", agent="chatbot"))
    assert fact.content == "The user lives in Rome"


def test_the_chat_remembers_from_one_run_to_the_next(tmp_path: Path) -> None:
    db = str(tmp_path / "chatbot.db")
    first = run_chat(tmp_path, "I live in Rome.\n", "--db", db, key="")
    assert "Remembered home-city: The user lives in Rome" in first.stdout
    assert "OPENAI_API_KEY" not in first.stderr
    # The end of input ends a chat as /quit does; the next run reads the same database.
    second = run_chat(tmp_path, "Where do I live?\n", "--db", db, key="")
    assert "bot: From what you told me before: The user lives in Rome." in second.stdout
