"""Fixtures of the LangChain adapter's tests.

The `engine` fixture (a fresh SQLite file, and a fresh PostgreSQL schema when
one is reachable) comes from the repository's root conftest. No test reaches
the network: the root conftest makes a connection to anything but this machine fail.
"""

from __future__ import annotations

import pytest

from korely_memory import Identity


@pytest.fixture
def giulia() -> Identity:
    return Identity(account="acme", user="giulia", agent="support-copilot")


@pytest.fixture(params=["invoke", "ainvoke"])
def use_async(request: pytest.FixtureRequest) -> bool:
    """A test that takes it runs once through the sync API and once through the async one."""
    return request.param == "ainvoke"
