"""`korely_extractor`: the engine's prompt and schema, a chat model's structured output, checked."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import Field

from korely_memory import Identity, InvalidRequest, MemoryEngine, Operation
from korely_memory.capture import OPERATIONS_SCHEMA, extraction_prompt
from langchain_korely import ExtractorStats, KorelyExtractor, korely_extractor

from ._agents import operations, scripted

EXCERPT = [("user", "I moved to Milan last week."), ("assistant", "Noted, Milan it is.")]
MILAN = {"action": "replace", "key": "home-city", "content": "Giulia lives in Milan"}


def test_the_model_reads_the_engines_prompt_and_answers_in_its_schema(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    kept = engine.get_facts(giulia)
    model = scripted(operations(MILAN))
    extractor = korely_extractor(model)
    assert isinstance(extractor, KorelyExtractor)

    report = engine.capture(giulia, EXCERPT, extractor=extractor)

    (prompt,) = model.received
    assert prompt == [HumanMessage(extraction_prompt(EXCERPT, kept))]
    assert "- home-city: Giulia lives in Rome" in prompt[0].text
    assert model.bound == [[OPERATIONS_SCHEMA]]  # the engine's schema, the one tool offered
    assert [(s.outcome, s.fact.content if s.fact else None) for s in report.steps] == [
        ("replaced", "Giulia lives in Milan")
    ]
    assert extractor.stats == ExtractorStats(calls=1, malformed=0, failed=0)


def test_every_field_of_an_operation_reaches_the_engine() -> None:
    answer = operations(
        {"action": "record", "key": "hours", "content": "Open 9-17", "scope": "account"},
        {"action": "end", "key": "home-city", "content": None, "scope": None},
    )
    assert korely_extractor(scripted(answer))(EXCERPT, []) == [
        Operation("record", "hours", "Open 9-17", "account"),
        Operation("end", "home-city"),
    ]


def test_no_operations_is_an_answer() -> None:
    extractor = korely_extractor(scripted(operations()))
    assert extractor(EXCERPT, []) == []
    assert extractor.stats.malformed == 0


UNREADABLE_JSON = AIMessage(
    content="",
    additional_kwargs={
        "tool_calls": [
            {
                "id": "call-ops",
                "type": "function",
                "function": {"name": "MemoryOperations", "arguments": "{operations: ["},
            }
        ]
    },
)
MALFORMED: dict[str, Any] = {
    "prose instead of the schema": AIMessage(content="You should remember Milan."),
    "another tool": AIMessage(
        content="", tool_calls=[{"name": "remember", "args": {"key": "k"}, "id": "c"}]
    ),
    "arguments that are not JSON": UNREADABLE_JSON,
    "operations not a list": AIMessage(
        content="",
        tool_calls=[{"name": "MemoryOperations", "args": {"operations": "home-city"}, "id": "c"}],
    ),
    "an unknown action": operations({"action": "rewrite", "key": "home-city", "content": "x"}),
    "no key": operations({"action": "record", "content": "Giulia lives in Milan"}),
    "content not text": operations({"action": "record", "key": "age", "content": 41}),
    "another scope": operations({"action": "record", "key": "k", "content": "x", "scope": "all"}),
    "one good and one bad": operations(MILAN, {"action": "record", "key": 7, "content": "x"}),
}


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_writes_nothing_and_is_counted(
    engine: MemoryEngine, giulia: Identity, answer: AIMessage, caplog: pytest.LogCaptureFixture
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    extractor = korely_extractor(scripted(answer))

    with (
        caplog.at_level(logging.WARNING, logger="langchain_korely"),
        pytest.raises(InvalidRequest) as refused,
    ):
        engine.capture(giulia, EXCERPT, extractor=extractor)

    assert refused.value.field == "operations"
    assert engine.search_memories(giulia, "") == []
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]
    assert extractor.stats == ExtractorStats(calls=1, malformed=1, failed=0)
    assert any("nothing is written" in r.getMessage() for r in caplog.records)


def test_a_failing_model_passes_its_error_through_and_is_counted(
    engine: MemoryEngine, giulia: Identity
) -> None:
    model = scripted(operations({"action": "record", "key": "home-city", "content": "Milan"}))
    model.failures = 1
    extractor = korely_extractor(model)

    with pytest.raises(ConnectionError):
        engine.capture(giulia, EXCERPT, extractor=extractor)
    assert engine.search_memories(giulia, "") == []
    assert extractor.stats == ExtractorStats(calls=1, malformed=0, failed=1)

    # The same excerpt, once the model answers, is captured: the failure kept nothing.
    report = engine.capture(giulia, EXCERPT, extractor=extractor)
    assert [s.outcome for s in report.steps] == ["recorded"]
    assert extractor.stats == ExtractorStats(calls=2, malformed=0, failed=1)


class StructuredOptions(GenericFakeChatModel):
    """Records what `with_structured_output` was asked for."""

    asked: list[dict[str, Any]] = Field(default_factory=list)

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.asked.append({"schema": schema, **kwargs})
        return scripted(operations()).with_structured_output(schema)


def test_method_is_passed_to_the_models_structured_output() -> None:
    model = StructuredOptions(messages=iter([]))
    korely_extractor(model, method="json_schema")
    korely_extractor(model)
    assert [a.get("method") for a in model.asked] == ["json_schema", None]
    assert all(a["schema"] == OPERATIONS_SCHEMA for a in model.asked)
    assert all(a["schema"] is not OPERATIONS_SCHEMA for a in model.asked)  # the engine's stays


@pytest.mark.parametrize(
    ("model", "options", "field"),
    [
        (GenericFakeChatModel(messages=iter([])), {}, "chat_model"),  # no tool calling
        ("gpt-4o-mini", {}, "chat_model"),
        (None, {}, "chat_model"),
        (scripted(), {"method": 3}, "method"),
    ],
    ids=["no structured output", "a model name", "None", "method not text"],
)
def test_what_cannot_extract_is_refused_by_name(
    model: Any, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        korely_extractor(model, **options)
    assert refused.value.field == field
