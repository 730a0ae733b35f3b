"""`KorelyMemory` without the `classic` extra: an error that names the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

# langchain-classic made absent for this process: the first finder answers for it as Python does
# where no finder finds a module, which is what an environment without the extra gets.
WITHOUT_CLASSIC = """
import sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "langchain_classic":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
"""


@pytest.mark.parametrize(
    "use",
    [
        "from langchain_korely import KorelyMemory",
        "import langchain_korely; langchain_korely.KorelyMemory",
        "from langchain_korely.memory import KorelyMemory",
    ],
)
def test_korely_memory_without_the_classic_extra_names_the_extra(use: str) -> None:
    code = (
        WITHOUT_CLASSIC
        + "import langchain_korely\n"  # the package itself needs no langchain-classic
        + "try:\n"
        + f"    {use}\n"
        + "except ImportError as e:\n"
        + "    print(type(e).__name__, e.name, e, sep='|')\n"
        + "else:\n"
        + "    print('imported')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    kind, name, message = out.stdout.strip().split("|")
    assert (kind, name) == ("ModuleNotFoundError", "langchain_classic")
    assert "the extra langchain-korely[classic]" in message
    assert 'pip install . "./integrations/langchain-korely[classic]"' in message
    assert "KorelyMemory" in message


def test_another_missing_module_is_not_reported_as_the_extra() -> None:
    """Only langchain-classic's own absence is the extra's: a module it fails to import itself
    is that module's error, unchanged."""
    code = (
        "import sys; sys.modules['langchain_classic.base_memory'] = None\n"
        "try:\n"
        "    import langchain_korely.memory\n"
        "except ImportError as e:\n"
        "    print(e.name, 'langchain-korely[classic]' in str(e), sep='|')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "langchain_classic.base_memory|False"
