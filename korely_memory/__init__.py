"""korely-memory: durable, correctable memory for LangChain and LlamaIndex agents.

from korely_memory import Identity, MemoryEngine
engine = MemoryEngine("sqlite:///memory.db")
who = Identity(account="acme", user="giulia", agent="support-copilot")
engine.remember(who, "home-city", "Giulia lives in Rome")
print(engine.get_context(who, "Where does Giulia live?").text)
"""

from ._engine import MemoryEngine
from ._engine.items import Items
from ._engine.listings import Listings
from ._store._export import MarkRecord, UserExport
from ._values._embedders import Embedder, LangChainEmbeddings, LlamaIndexEmbedding
from ._values._errors import (
    AlreadyDecided,
    InvalidRequest,
    KorelyError,
    LimitExceeded,
    NotCurrent,
    NotFound,
    NotRefittable,
    PermissionDenied,
    SchemaVersionError,
)
from ._values._identity import EndCause, Identity, Scope
from ._values._types import (
    CaptureReport,
    CaptureStep,
    Change,
    ContextBlock,
    ErasureReport,
    Fact,
    Memory,
    Note,
    Operation,
    PendingFact,
    SearchResult,
    StoreItem,
    TrimReport,
)

__version__ = "0.1.0"  # the one place the version is written; pyproject.toml reads it

__all__ = [
    "AlreadyDecided",
    "CaptureReport",
    "CaptureStep",
    "Change",
    "ContextBlock",
    "Embedder",
    "EndCause",
    "ErasureReport",
    "Fact",
    "Identity",
    "InvalidRequest",
    "Items",
    "KorelyError",
    "LangChainEmbeddings",
    "LimitExceeded",
    "Listings",
    "LlamaIndexEmbedding",
    "MarkRecord",
    "Memory",
    "MemoryEngine",
    "NotCurrent",
    "NotFound",
    "NotRefittable",
    "Note",
    "Operation",
    "PendingFact",
    "PermissionDenied",
    "SchemaVersionError",
    "Scope",
    "SearchResult",
    "StoreItem",
    "TrimReport",
    "UserExport",
    "__version__",
]
