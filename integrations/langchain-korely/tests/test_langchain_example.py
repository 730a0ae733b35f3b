"""examples/langchain_chatbot.py runs offline, captures facts and reads them back later."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from korely_memory import Identity, MemoryEngine
from tests.processes import run_program

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "langchain_chatbot.py"


def run_demo(cwd: Path, *args: str, **env: str) -> list[str]:
    done = run_program(EXAMPLE, "--demo", *args, cwd=cwd, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


# The fact captured in conversation 1 is in the block of conversation 3 (and the desk's); the
# correction captured in conversation 3 replaces it, and the desk is told it once.
DEMO = [
    "--- conversation 1, with the chatbot ---",
    "you> Hi! I live in Lisbon.",
    "bot> Nice to meet you! Lisbon is a lovely city.",
    "  [captured] home-city: Alex lives in Lisbon",
    "--- conversation 2, with the travel desk ---",
    "you> Book me a taxi home.",
    "desk> A taxi to Lisbon is booked.",
    "--- conversation 3, with the chatbot ---",
    "you> Where do I live?",
    "bot> You live in Lisbon.",
    "you> Actually, I moved to Porto last month.",
    "bot> Thanks for telling me: Porto it is.",
    "  [captured] home-city: Alex lives in Porto (replaces: Alex lives in Lisbon)",
    "--- conversation 4, with the travel desk ---",
    "you> Book me a taxi home.",
    "desk> I see that Alex lives in Porto now. A taxi to Porto is booked.",
    "you> And one for tomorrow morning, please.",
    "desk> A taxi to Porto is booked.",
]


def test_the_demo_captures_facts_and_a_correction_told_once(tmp_path: Path) -> None:
    assert run_demo(tmp_path, "--db", str(tmp_path / "chat.db")) == DEMO
    alex = Identity("demo", "Alex", "terminal-chatbot")
    with MemoryEngine(f"sqlite:///{tmp_path / 'chat.db'}") as engine:
        lisbon, porto = engine.history(alex, "home-city")
        kept = engine.export_user("demo", "Alex").memories
    # Both read from a conversation, of which only the facts are kept; the correction replaced
    # the fact.
    assert kept == () and lisbon.source_memory_id is None
    assert (lisbon.end_cause, lisbon.replaced_by_id) == ("read_from_memory", porto.id)


def test_the_demo_stays_offline_and_in_memory_whatever_the_environment(tmp_path: Path) -> None:
    out = run_demo(
        tmp_path,
        OPENAI_API_KEY="dummy",
        KORELY_DATABASE_URL=f"sqlite:///{tmp_path / 'from-env.db'}",
    )
    assert out == DEMO
    assert list(tmp_path.iterdir()) == []


def run_chat(cwd: Path, typed: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The chat, with langchain-openai out of reach, installed here or not."""
    env = {**os.environ, **env}
    done = run_program(EXAMPLE, *args, cwd=cwd, env=env, input=typed, hide=["langchain_openai"])
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
    # /new waits for the capture and starts a new conversation, where the fact is read back;
    # /quit ends the chat.
    first, second = done.stdout.split("--- new conversation ---")
    assert "[captured] home-city: Alex lives in Lisbon" in first
    assert "bot> You live in Lisbon." in second
    assert "Porto" not in done.stdout


def test_the_chat_remembers_from_one_run_to_the_next(tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    first = run_chat(tmp_path, "I live in Lisbon.\n", "--db", db, OPENAI_API_KEY="")
    # The capture of the last message is done before the chat ends.
    assert "[captured] home-city: Alex lives in Lisbon" in first.stdout
    assert "OPENAI_API_KEY" not in first.stderr
    # The end of input ends a chat as /quit does; the next run reads the same database.
    second = run_chat(tmp_path, "Where do I live?\n", "--db", db, OPENAI_API_KEY="")
    assert "bot> You live in Lisbon." in second.stdout
