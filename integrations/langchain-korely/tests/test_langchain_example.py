"""examples/langchain_chatbot.py runs offline and remembers across conversations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "langchain_chatbot.py"


def run_demo(db: Path) -> str:
    env = {
        k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "KORELY_DATABASE_URL"}
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--demo", "--db", str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_demo_remembers_where_the_user_lives(tmp_path: Path) -> None:
    out = run_demo(tmp_path / "chat.db").splitlines()

    second = out.index("--- conversation 2 ---")
    assert "  [remember] Remembered home-city: Alex lives in Lisbon" in out[:second]
    assert out[second + 1 :] == ["you> Where do I live?", "bot> You live in Lisbon."]
    assert (tmp_path / "chat.db").is_file()
