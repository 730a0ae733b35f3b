"""The package's public surface: ``__all__`` is every public name it holds, and nothing else."""

from __future__ import annotations

from types import ModuleType

import korely_mcp


def test_all_is_every_public_name_and_nothing_else() -> None:
    assert korely_mcp.__all__ == exported(korely_mcp, "__version__")
    assert korely_mcp.__version__ == korely_mcp.server.VERSION


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
