"""The embedders the engine takes (LangChain's, LlamaIndex's, or a batch function), and the
document side and query side of each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ._errors import InvalidRequest

Vector = Sequence[float]


EmbedFunction = Callable[[list[str]], Sequence[Vector]]


@runtime_checkable
class LangChainEmbeddings(Protocol):
    """What the engine uses of a LangChain ``Embeddings``."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


@runtime_checkable
class LlamaIndexEmbedding(Protocol):
    """What the engine uses of a LlamaIndex ``BaseEmbedding``."""

    def get_text_embedding_batch(self, texts: list[str], **kwargs: Any) -> list[list[float]]: ...

    def get_query_embedding(self, query: str) -> list[float]: ...


Embedder = LangChainEmbeddings | LlamaIndexEmbedding | EmbedFunction
"""What ``MemoryEngine(embed=...)`` takes: either framework's embeddings, or a batch function."""


EMBEDDERS = (
    "must be a LangChain Embeddings, a LlamaIndex embedding, or a function from a list of texts "
    "to a list of vectors"
)


def check_embed(embed: object) -> None:
    """Refuse, naming ``embed``, what is none of the embedders the engine takes."""
    if embed is not None:
        sides(embed)  # type: ignore[arg-type]


def sides(embed: Embedder) -> tuple[EmbedFunction, Callable[[str], Vector]]:
    """The document side and the query side of ``embed`` (the same function when it has one)."""
    documents: EmbedFunction
    if hasattr(embed, "embed_documents"):
        documents = embed.embed_documents
        query = getattr(embed, "embed_query", None)
    elif hasattr(embed, "get_text_embedding_batch"):
        documents = embed.get_text_embedding_batch
        query = getattr(embed, "get_query_embedding", None)
    elif callable(embed):
        documents, query = embed, None
    else:
        raise InvalidRequest("embed", EMBEDDERS + f", not {type(embed).__name__}")
    if query is None:
        return documents, lambda text: documents([text])[0]
    return documents, query
