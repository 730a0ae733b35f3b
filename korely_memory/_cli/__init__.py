"""The ``korely`` command: what the memory holds, changed and kept in shape without Python.

Run as ``korely`` or ``python -m korely_memory``; ``korely --help`` lists the
commands. Built on click; imported only by the command, never by ``import
korely_memory``.
"""

from __future__ import annotations

from . import _db, _facts, _lists, _people, _upkeep  # noqa: F401  (each adds its commands)
from ._app import cli, main

__all__ = ["cli", "main"]
