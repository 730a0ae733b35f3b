"""The distribution's shape: LlamaIndex's namespace layout and a pinned public surface."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from llama_index.memory import korely

PACKAGE = Path(__file__).resolve().parents[1]


def test_all_is_every_public_name_and_nothing_else(exported: Callable[..., list[str]]) -> None:
    assert korely.__all__ == exported(korely)


def test_every_public_name_is_in_the_readme_api_reference() -> None:
    readme = (PACKAGE / "README.md").read_text()
    reference = readme[readme.index("## API reference") :]
    headings = [line for line in reference.splitlines() if line.startswith("### ")]
    for name in korely.__all__:
        assert any(f"`{name}" in heading for heading in headings), name


def test_llama_index_and_memory_stay_namespace_packages() -> None:
    assert not (PACKAGE / "llama_index" / "__init__.py").exists()
    assert not (PACKAGE / "llama_index" / "memory" / "__init__.py").exists()
    assert (PACKAGE / "llama_index" / "memory" / "korely" / "__init__.py").exists()
    assert (PACKAGE / "llama_index" / "memory" / "korely" / "py.typed").exists()
