"""The package's public surface: ``__all__`` is every public name it holds, and nothing else."""

from __future__ import annotations

from collections.abc import Callable

import korely_mcp


def test_all_is_every_public_name_and_nothing_else(exported: Callable[..., list[str]]) -> None:
    assert korely_mcp.__all__ == exported(korely_mcp, "__version__")
    assert korely_mcp.__version__ == korely_mcp.server.VERSION
