"""The distribution's shape: LlamaIndex's namespace layout and a pinned public surface."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from llama_index.memory import korely

PACKAGE = Path(__file__).resolve().parents[1]


def test_all_is_every_public_name_and_nothing_else() -> None:
    assert korely.__all__ == exported(korely)


def exported(module: ModuleType, *also: str) -> list[str]:
    """What ``__all__`` must be, as httpx pins its own: every name in ``vars(module)`` that does
    not start with "_" (but not its own submodules, bound when anything imports them) and
    ``also``, in ruff's order for ``__all__``: constants, then classes, then the rest."""
    inside = module.__name__ + "."
    names = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not (isinstance(value, ModuleType) and value.__name__.startswith(inside))
    }
    return sorted(
        names | set(also), key=lambda n: (0 if n.isupper() else int(n[0].islower()) + 1, n)
    )


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
