"""The package's public surface."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import langchain_korely

PUBLIC = [
    "KorelyCorrect",
    "KorelyForget",
    "KorelyMemory",
    "KorelyMiddleware",
    "KorelyRemember",
    "KorelyTool",
    "korely_tools",
]


def test_public_names_are_pinned_and_sorted() -> None:
    assert langchain_korely.__all__ == PUBLIC
    assert sorted(langchain_korely.__all__) == langchain_korely.__all__
    for name in PUBLIC:
        assert getattr(langchain_korely, name) is not None


def test_package_is_typed() -> None:
    assert (Path(langchain_korely.__file__).parent / "py.typed").is_file()


def test_importing_needs_no_langchain_classic() -> None:
    code = "import sys, langchain_korely; print('langchain_classic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
