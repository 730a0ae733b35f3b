"""Capture on a LangChain chat model: `korely_extractor`, and what capture counts.

The prompt, the answer's schema and its check are the engine's
(`korely_memory.capture`), written once for every framework; this module only
asks a chat model for the answer through its structured output.

    from langchain_korely import KorelyMiddleware, korely_extractor

    extractor = korely_extractor(init_chat_model("openai:gpt-4o-mini"))
    KorelyMiddleware(engine, reader="support-bot", capture=extractor)
"""

from __future__ import annotations

import copy
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import HumanMessage

from korely_memory import InvalidRequest
from korely_memory.capture import OPERATIONS_SCHEMA, CaptureStats, ExtractorStats, ModelExtractor

__all__ = ["CaptureStats", "ExtractorStats", "KorelyExtractor", "korely_extractor"]

RUN_NAME = "korely_capture"
"""The extraction call's name in callbacks and traces."""


class KorelyExtractor(ModelExtractor):
    """An extractor for `MemoryEngine.capture` and `KorelyMiddleware(capture=...)`.

    Each call asks the chat model, through its structured output, for the
    operations the engine's `extraction_prompt` describes, and checks the
    answer with `operations_from`: an answer that is not a list of operations
    raises `InvalidRequest` (`field="operations"`), so the capture writes
    nothing; it is counted and logged. What the model raises passes through,
    counted. Made by `korely_extractor`.

    Example:
        ```python
        extractor = korely_extractor(model)
        engine.capture(who, [("user", "I moved to Milan.")], extractor=extractor)
        extractor.stats.malformed
        ```
    """

    def __init__(self, chat_model: Any, *, method: str | None = None) -> None:
        """Ask for the model's structured output; see `korely_extractor`."""
        super().__init__()
        if not callable(getattr(chat_model, "with_structured_output", None)):
            raise InvalidRequest(
                "chat_model",
                f"must be a LangChain chat model (with_structured_output), "
                f"not {type(chat_model).__name__}",
            )
        if method is not None and not isinstance(method, str):
            raise InvalidRequest("method", "must be None or the name of a structured output method")
        options = {"method": method} if method is not None else {}
        try:
            # Without include_raw: LangChain would run the model in a thread pool of its
            # own, which refuses work while the interpreter exits (the last captures).
            structured = chat_model.with_structured_output(
                copy.deepcopy(OPERATIONS_SCHEMA), **options
            )
        except NotImplementedError as missing:
            raise InvalidRequest(
                "chat_model",
                f"{type(chat_model).__name__} has no structured output ({missing}); capture "
                "needs a chat model with tool calling or JSON output",
            ) from None
        self.chat_model = chat_model
        self.method = method
        self._structured = structured.with_config(run_name=RUN_NAME)

    def _ask(self, prompt: str) -> Any:
        try:
            return self._structured.invoke([HumanMessage(prompt)])
        except OutputParserException as unreadable:
            raise InvalidRequest(
                "operations", "the model's answer could not be read"
            ) from unreadable


def korely_extractor(chat_model: Any, *, method: str | None = None) -> KorelyExtractor:
    """An extractor built on a chat model's structured output (`with_structured_output`).

    Args:
        chat_model: A LangChain chat model with structured output (tool calling
            or a JSON mode): the model that reads each excerpt. A small, cheap
            model does; it is called once per capture.
        method: Passed to `with_structured_output` (e.g. `"function_calling"`,
            `"json_schema"`); None: the model's default.

    Returns:
        A `KorelyExtractor`, for `KorelyMiddleware(capture=...)` or `MemoryEngine.capture`.

    Raises:
        InvalidRequest: The model has no structured output (`field="chat_model"`),
            or `method` is not text (`field="method"`).
    """
    return KorelyExtractor(chat_model, method=method)
