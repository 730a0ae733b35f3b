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
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import HumanMessage

from korely_memory import Fact, InvalidRequest, Operation
from korely_memory.capture import OPERATIONS_SCHEMA, extraction_prompt, operations_from

logger = logging.getLogger("langchain_korely")

RUN_NAME = "korely_capture"
"""The extraction call's name in callbacks and traces."""


@dataclass(frozen=True)
class ExtractorStats:
    """What a `KorelyExtractor` met so far."""

    calls: int = 0
    """Times the model was asked."""
    malformed: int = 0
    """Answers that were not a list of operations: the capture wrote nothing."""
    failed: int = 0
    """Calls that raised (the model unreachable, a timeout, a refusal to run)."""


@dataclass(frozen=True)
class CaptureStats:
    """What a `KorelyMiddleware`'s capture did so far (all zero without `capture=`)."""

    captured: int = 0
    """Captures done: the extractor answered and the engine applied it (perhaps writing
    nothing, or finding the excerpt captured before)."""
    failed: int = 0
    """Captures that raised (the model, a malformed answer, the database): nothing written."""
    dropped: int = 0
    """Runs never captured: too many captures waited, or the middleware was closed."""
    superseded: int = 0
    """Runs whose capture was still waiting when a later run of the same thread ended: the
    later capture took it over and covers both."""
    pending: int = 0
    """Captures waiting or running now."""


class KorelyExtractor:
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
        self._counts = {"calls": 0, "malformed": 0, "failed": 0}
        self._lock = threading.Lock()

    @property
    def stats(self) -> ExtractorStats:
        """Counts so far (a snapshot; safe from any thread)."""
        with self._lock:
            return ExtractorStats(**self._counts)

    def __call__(
        self, messages: Sequence[tuple[str, str]], facts: Sequence[Fact]
    ) -> list[Operation]:
        """Ask the model what to change, given the excerpt and the identity's true facts.

        Args:
            messages: The excerpt, as `(role, text)` pairs.
            facts: The identity's true facts: the model is told to reuse their keys.

        Returns:
            The operations, checked.

        Raises:
            InvalidRequest: The answer is not a list of operations (`field="operations"`).
        """
        prompt = extraction_prompt(messages, facts)
        self._count("calls")
        try:
            answer = self._structured.invoke([HumanMessage(prompt)])
        except OutputParserException as unreadable:
            refused = InvalidRequest("operations", "the model's answer could not be read")
            self._malformed(refused)
            raise refused from unreadable
        except Exception:
            self._count("failed")
            raise
        try:
            return operations_from(answer)
        except InvalidRequest as refused:
            self._malformed(refused)
            raise

    def _malformed(self, refused: InvalidRequest) -> None:
        self._count("malformed")
        logger.warning("korely-memory capture: %s; nothing is written for this excerpt", refused)

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1


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
