"""``korely_extractor``: the engine's prompt and schema, an LLM's ``structured_predict``, checked.

Two scripted LLMs answer: a function-calling one (it calls the schema's
function) and a completion-only one (JSON in its text). Neither reaches a network.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata

from korely_memory import Identity, InvalidRequest, MemoryEngine, Operation
from korely_memory.capture import OPERATIONS_SCHEMA, extraction_prompt
from llama_index.memory.korely import ExtractorStats, KorelyExtractor, korely_extractor

from .conftest import Script, ScriptedLLM

EXCERPT = [("user", "I moved to Milan last week {really}."), ("assistant", "Noted, Milan it is.")]
MILAN = {"action": "replace", "key": "home-city", "content": "Giulia lives in Milan"}


def operations(*items: dict[str, Any]) -> ChatMessage:
    """A function-calling LLM's structured answer: a call of the schema's function."""
    return Script.call("MemoryOperations", operations=list(items))


class TextLLM(CustomLLM):
    """A completion model without function calling: answers each prompt with the next text."""

    answers: list[str] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=False, is_function_calling_model=False)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.answers.pop(0))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_a_function_calling_llm_reads_the_engines_prompt_and_answers_in_its_schema(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    kept = engine.get_facts(giulia)
    llm = ScriptedLLM(operations(MILAN))
    extractor = korely_extractor(llm)
    assert isinstance(extractor, KorelyExtractor)

    report = engine.capture(giulia, EXCERPT, extractor=extractor)

    (prompt,) = llm.received
    assert Script.text(prompt) == extraction_prompt(EXCERPT, kept)  # braces in it stay text
    assert [(s.outcome, s.fact.content if s.fact else None) for s in report.steps] == [
        ("replaced", "Giulia lives in Milan")
    ]
    assert extractor.stats == ExtractorStats(calls=1, malformed=0, failed=0)


def test_a_completion_llm_is_shown_the_engines_schema_and_answers_in_json() -> None:
    llm = TextLLM(
        answers=["Here you are:\n```json\n" + json.dumps({"operations": [MILAN]}) + "\n```"]
    )
    assert korely_extractor(llm)(EXCERPT, []) == [
        Operation("replace", "home-city", "Giulia lives in Milan")
    ]
    (prompt,) = llm.prompts
    assert prompt.startswith(extraction_prompt(EXCERPT, []))
    # The engine's schema, as LlamaIndex's PydanticOutputParser writes it (braces doubled).
    shown = json.dumps(OPERATIONS_SCHEMA, ensure_ascii=False)
    assert shown.replace("{", "{{").replace("}", "}}") in prompt


def test_a_completion_llm_leaves_no_schema_text_in_a_later_function_calling_prompt() -> None:
    answer = "```json\n" + json.dumps({"operations": [MILAN]}) + "\n```"
    korely_extractor(TextLLM(answers=[answer]))(EXCERPT, [])
    llm = ScriptedLLM(operations(MILAN))
    korely_extractor(llm)(EXCERPT, [])
    (prompt,) = llm.received
    assert Script.text(prompt) == extraction_prompt(EXCERPT, [])  # the engine's prompt alone


def test_every_field_of_an_operation_reaches_the_engine() -> None:
    answer = operations(
        {"action": "record", "key": "hours", "content": "Open 9-17", "scope": "account"},
        {"action": "end", "key": "home-city", "content": None, "scope": None},
    )
    assert korely_extractor(ScriptedLLM(answer))(EXCERPT, []) == [
        Operation("record", "hours", "Open 9-17", "account"),
        Operation("end", "home-city"),
    ]


def test_no_operations_is_an_answer() -> None:
    extractor = korely_extractor(ScriptedLLM(operations()))
    assert extractor(EXCERPT, []) == []
    assert extractor.stats.malformed == 0


MALFORMED: dict[str, Any] = {
    "prose instead of a call": Script.say("You should remember Milan."),
    "another function": Script.call("remember", key="home-city"),
    "operations not a list": Script.call("MemoryOperations", operations="home-city"),
    "an unknown action": operations({"action": "rewrite", "key": "home-city", "content": "x"}),
    "no key": operations({"action": "record", "content": "Giulia lives in Milan"}),
    "content not text": operations({"action": "record", "key": "age", "content": 41}),
    "another scope": operations({"action": "record", "key": "k", "content": "x", "scope": "all"}),
    "one good and one bad": operations(MILAN, {"action": "record", "key": 7, "content": "x"}),
    "text with no JSON": TextLLM(answers=["Remember that Giulia lives in Milan."]),
    "JSON of another shape": TextLLM(answers=['{"facts": ["Giulia lives in Milan"]}']),
}


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_writes_nothing_and_is_counted(
    engine: MemoryEngine, giulia: Identity, answer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    llm = answer.model_copy(deep=True) if isinstance(answer, TextLLM) else ScriptedLLM(answer)
    extractor = korely_extractor(llm)

    with caplog.at_level(logging.WARNING), pytest.raises(InvalidRequest) as refused:
        engine.capture(giulia, EXCERPT, extractor=extractor)

    assert refused.value.field == "operations"
    assert engine.search_memories(giulia, "") == []
    assert [f.content for f in engine.get_facts(giulia)] == ["Giulia lives in Rome"]
    assert extractor.stats == ExtractorStats(calls=1, malformed=1, failed=0)
    assert any("nothing is written" in r.getMessage() for r in caplog.records)


def test_a_failing_llm_passes_its_error_through_and_is_counted(
    engine: MemoryEngine, giulia: Identity
) -> None:
    llm = ScriptedLLM(
        ConnectionError("unreachable"),
        operations({"action": "record", "key": "home-city", "content": "Milan"}),
    )
    extractor = korely_extractor(llm)

    with pytest.raises(ConnectionError):
        engine.capture(giulia, EXCERPT, extractor=extractor)
    assert engine.search_memories(giulia, "") == []
    assert extractor.stats == ExtractorStats(calls=1, malformed=0, failed=1)

    # The same excerpt, once the LLM answers, is captured: the failure kept nothing.
    report = engine.capture(giulia, EXCERPT, extractor=extractor)
    assert [s.outcome for s in report.steps] == ["recorded"]
    assert extractor.stats == ExtractorStats(calls=2, malformed=0, failed=1)


@pytest.mark.parametrize("llm", ["gpt-4o-mini", None, object()], ids=["a name", "None", "other"])
def test_what_is_no_llm_is_refused_by_name(llm: Any) -> None:
    with pytest.raises(InvalidRequest) as refused:
        korely_extractor(llm)
    assert refused.value.field == "llm"
