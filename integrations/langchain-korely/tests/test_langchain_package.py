"""The package's public surface, and the README's reference of it."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from langchain_core.tools import BaseTool

import langchain_korely
from langchain_korely import (
    CaptureStats,
    ExtractorStats,
    KorelyMemory,
    KorelyMiddleware,
    KorelyTool,
    korely_extractor,
    korely_tools,
)

README = Path(__file__).resolve().parents[1] / "README.md"


def test_all_is_every_public_name_and_nothing_else(exported: Callable[..., list[str]]) -> None:
    # KorelyMemory is bound on first use (it needs the classic extra): in __all__, not in vars.
    assert "KorelyMemory" not in vars(langchain_korely)
    assert langchain_korely.__all__ == exported(langchain_korely, "KorelyMemory")
    assert langchain_korely.KorelyMemory is not None


def reference() -> dict[str, str]:
    """The README's API reference, section by section."""
    text = README.read_text().split("## API reference", 1)[1].split("\n## ", 1)[0]
    sections = re.split(r"^### (.+)$", text, flags=re.M)[1:]
    return dict(zip(sections[::2], sections[1::2], strict=True))


def test_the_readme_documents_every_public_name() -> None:
    documented = " ".join(reference())
    for name in langchain_korely.__all__:
        assert f"`{name}`" in documented, name


def test_the_readme_documents_every_argument() -> None:
    sections = reference()
    arguments = {
        "`KorelyMiddleware`": list(inspect.signature(KorelyMiddleware.__init__).parameters)[1:],
        "`korely_tools`": list(inspect.signature(korely_tools).parameters),
        "`KorelyTool`": [f for f in KorelyTool.model_fields if f not in BaseTool.model_fields],
        "`KorelyMemory`": list(KorelyMemory.model_fields),
        "`korely_extractor`": list(inspect.signature(korely_extractor).parameters),
        "`ExtractorStats`": [f.name for f in dataclasses.fields(ExtractorStats)],
        "`CaptureStats`": [f.name for f in dataclasses.fields(CaptureStats)],
    }
    for section, names in arguments.items():
        for name in names:
            assert f"`{name}`" in sections[section], (section, name)


def test_package_is_typed() -> None:
    assert (Path(langchain_korely.__file__).parent / "py.typed").is_file()


def test_importing_needs_no_langchain_classic() -> None:
    code = "import sys, langchain_korely; print('langchain_classic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
