"""How hard the reliability suite pushes: CI figures by default, soak ones with ``KORELY_SOAK=1``.

A soak run is meant to be run by hand; its figures go in this folder's README. Every
test adds what it did to a tally, which ``KORELY_RELIABILITY_TALLY`` (a file
path) collects across tests and processes.
"""

from __future__ import annotations

import atexit
import json
import os
from collections import Counter

SOAK = os.environ.get("KORELY_SOAK") == "1"


def scale(ci: int, soak: int) -> int:
    """The CI figure, or the soak figure in a soak run."""
    return soak if SOAK else ci


_tally: Counter[str] = Counter()


def tally(what: str, n: int = 1) -> None:
    """Count something the suite did (operations run, faults injected, inputs tried)."""
    _tally[what] += n


@atexit.register
def _write_tally() -> None:
    path = os.environ.get("KORELY_RELIABILITY_TALLY")
    if path and _tally:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(dict(_tally)) + "\n")
