"""korely-memory for LangChain: facts an agent keeps between conversations.

    from korely_memory import Identity, MemoryEngine
    from langchain.agents import create_agent
    from langchain_korely import KorelyMiddleware

    agent = create_agent(model, middleware=[KorelyMiddleware(MemoryEngine(), reader="support-bot")])
    agent.invoke({"messages": [("user", "Hi")]}, context=Identity("acme", "giulia", "support"))

With `capture=korely_extractor(model)`, facts are also drawn from each finished run.

`KorelyMemory` (for legacy chains) needs the `classic` extra.
"""

import typing as _typing

from langchain_korely.capture import (
    CaptureStats,
    ExtractorStats,
    KorelyExtractor,
    korely_extractor,
)
from langchain_korely.middleware import KorelyMiddleware
from langchain_korely.store import KorelyStore
from langchain_korely.tools import (
    KorelyCorrect,
    KorelyForget,
    KorelyRemember,
    KorelyTool,
    korely_tools,
)

if _typing.TYPE_CHECKING:
    from langchain_korely.memory import KorelyMemory

__all__ = [
    "CaptureStats",
    "ExtractorStats",
    "KorelyCorrect",
    "KorelyExtractor",
    "KorelyForget",
    "KorelyMemory",
    "KorelyMiddleware",
    "KorelyRemember",
    "KorelyStore",
    "KorelyTool",
    "korely_extractor",
    "korely_tools",
]


def __getattr__(name: str) -> _typing.Any:
    # langchain-classic is optional: import it only when KorelyMemory is asked for.
    if name == "KorelyMemory":
        from langchain_korely.memory import KorelyMemory

        return KorelyMemory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
