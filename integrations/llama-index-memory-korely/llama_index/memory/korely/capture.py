"""Capture on a LlamaIndex LLM: `korely_extractor`, built on ``structured_predict``.

The prompt, the answer's schema and its check are the engine's
(``korely_memory.capture``), written once for every framework; this module only
asks an LLM for the answer through ``LLM.structured_predict``: a function call
for a function-calling LLM, JSON read from the text for the others.

    from llama_index.memory.korely import KorelyMemory, korely_extractor

    extractor = korely_extractor(OpenAI(model="gpt-4o-mini"))
    memory = KorelyMemory.from_defaults(engine, who, reader="support-bot", capture=extractor)
"""

from __future__ import annotations

import copy
from typing import Any

from llama_index.core.bridge.pydantic import BaseModel, ConfigDict
from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate

from korely_memory import InvalidRequest
from korely_memory.capture import OPERATIONS_SCHEMA, CaptureStats, ExtractorStats, ModelExtractor

__all__ = ["CaptureStats", "ExtractorStats", "KorelyExtractor", "korely_extractor"]

# The engine's prompt goes in whole, as the template's one value: its braces stay text.
_PROMPT = "{request}"


class MemoryOperations(BaseModel):
    """The engine's schema for ``structured_predict``, which asks for a pydantic class.

    Its JSON schema is ``OPERATIONS_SCHEMA`` itself; it takes whatever the model
    answers, so that ``operations_from``, the engine's one check, judges it.
    """

    model_config = ConfigDict(extra="allow")

    operations: Any = None

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(OPERATIONS_SCHEMA)


class KorelyExtractor(ModelExtractor):
    """An extractor for ``MemoryEngine.capture`` and ``KorelyMemory.from_defaults(capture=...)``.

    Each call asks the LLM, with ``structured_predict``, for the operations the
    engine's ``extraction_prompt`` describes, and checks the answer with
    ``operations_from``: an answer that is not a list of operations (or not
    JSON at all) raises ``InvalidRequest`` (``field="operations"``), so the
    capture writes nothing; it is counted and logged. What the LLM raises
    passes through, counted. Made by :func:`korely_extractor`.
    """

    def __init__(self, llm: Any) -> None:
        """Ask for the LLM's structured output; see :func:`korely_extractor`."""
        super().__init__()
        if not isinstance(llm, LLM):
            raise InvalidRequest(
                "llm", f"must be a LlamaIndex LLM (structured_predict), not {type(llm).__name__}"
            )
        self.llm = llm

    def _ask(self, prompt: str) -> Any:
        try:
            # A new template each call: the text-completion program attaches its output parser
            # (the JSON schema's instructions) to the template it is given, and a shared one
            # would carry them into every later prompt, a function-calling model's included.
            template = PromptTemplate(_PROMPT)
            return self.llm.structured_predict(MemoryOperations, template, request=prompt)
        except (ValueError, KeyError) as unreadable:
            # structured_predict raises ValueError for text with no JSON in it, a reply that
            # calls no function, or arguments of the wrong shape (pydantic's ValidationError
            # is one), and KeyError for a call of a function it did not offer.
            raise InvalidRequest("operations", "the model's answer could not be read") from (
                unreadable
            )


def korely_extractor(llm: Any) -> KorelyExtractor:
    """An extractor built on an LLM's ``structured_predict``.

    Args:
        llm: A LlamaIndex LLM: a function-calling one answers through a function
            of the engine's schema, any other in JSON read from its text. A small,
            cheap model does; it is called once per capture.

    Returns:
        A :class:`KorelyExtractor`, for ``KorelyMemory.from_defaults(capture=...)`` or
        ``MemoryEngine.capture``.

    Raises:
        InvalidRequest: ``llm`` is not a LlamaIndex LLM (``field="llm"``).
    """
    return KorelyExtractor(llm)
