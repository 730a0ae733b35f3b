"""korely-memory: durable, correctable memory for LangChain and LlamaIndex agents.

from korely_memory import MemoryEngine, Identity
engine = MemoryEngine("sqlite:///memory.db")
who = Identity(account="acme", user="giulia", agent="support-copilot")
engine.remember(who, "home-city", "Giulia lives in Rome")
print(engine.get_context(who, "Where does Giulia live?").text)
"""

from .engine import MemoryEngine
from .errors import (
    InvalidRequest,
    KorelyError,
    LimitExceeded,
    NotCurrent,
    NotFound,
    PermissionDenied,
)
from .identity import Identity, Scope
from .types import Change, ContextBlock, ErasureReport, Fact, Memory, TrimReport

__version__ = "0.1.0"  # the one place the version is written; pyproject.toml reads it

__all__ = [
    "Change",
    "ContextBlock",
    "ErasureReport",
    "Fact",
    "Identity",
    "InvalidRequest",
    "KorelyError",
    "LimitExceeded",
    "Memory",
    "MemoryEngine",
    "NotCurrent",
    "NotFound",
    "PermissionDenied",
    "Scope",
    "TrimReport",
]
