"""The example chatbot runs offline and remembers across conversations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llamaindex_chatbot.py"


def test_demo_remembers_where_the_user_lives_in_the_next_conversation(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "KORELY_DATABASE_URL"}}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--demo", "--db", str(tmp_path / "chatbot.db")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("--- conversation 2")
    assert "remember(" in first
    assert "Remembered under 'home-city'." in first
    assert "bot: From what you told me before: The user lives in Rome." in second
    assert not (tmp_path / "korely-memory.db").exists()
