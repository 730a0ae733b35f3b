"""KorelyMemory, the `langchain_classic` memory for legacy chains."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_classic.chains import ConversationChain
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.prompts import PromptTemplate

from korely_memory import Identity, MemoryEngine
from langchain_korely import KorelyMemory

CHANGED = "## Changed since you last read"


@pytest.mark.asyncio
async def test_the_block_is_loaded_under_the_memory_key(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory(engine=engine, identity=giulia)
    inputs = {"input": "Where do I live?"}

    loaded = (
        await memory.aload_memory_variables(inputs)
        if use_async
        else memory.load_memory_variables(inputs)
    )

    assert memory.memory_variables == ["history"]
    assert loaded == {"history": engine.get_context(giulia, "Where do I live?").text}
    assert "home-city: Giulia lives in Rome" in loaded["history"]


def test_a_reader_is_told_a_change_once(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory(engine=engine, identity=giulia, reader="legacy-bot", memory_key="facts")
    memory.load_memory_variables({"input": "hi"})
    engine.correct(giulia, "home-city", "Giulia lives in Milan")

    told = memory.load_memory_variables({"input": "hi"})["facts"]
    again = memory.load_memory_variables({"input": "hi"})["facts"]

    assert CHANGED in told
    assert "was: Giulia lives in Rome -> now: Giulia lives in Milan" in told
    assert CHANGED not in again


@pytest.mark.asyncio
async def test_exchanges_are_kept_only_when_asked(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    silent = KorelyMemory(engine=engine, identity=giulia)
    keeping = KorelyMemory(engine=engine, identity=giulia, save_exchanges=True)
    inputs, outputs = {"input": "My parcel is late"}, {"response": "I opened ticket 4471 for it."}

    for memory in (silent, keeping):
        if use_async:
            await memory.asave_context(inputs, outputs)
        else:
            memory.save_context(inputs, outputs)

    [kept] = engine.get_context(giulia, "parcel ticket").memories
    assert kept.content == "Human: My parcel is late\nAI: I opened ticket 4471 for it."


def test_several_outputs_need_an_output_key(engine: MemoryEngine, giulia: Identity) -> None:
    memory = KorelyMemory(engine=engine, identity=giulia, save_exchanges=True)
    with pytest.raises(ValueError, match="output_key"):
        memory.save_context({"input": "hi"}, {"text": "a", "other": "b"})


def test_clear_keeps_facts(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    KorelyMemory(engine=engine, identity=giulia).clear()
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_legacy_conversation_chain_reads_the_facts(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    prompts: list[str] = []

    class RecordingLLM(FakeListLLM):
        def _call(self, prompt: str, *args: Any, **kwargs: Any) -> str:
            prompts.append(prompt)
            return super()._call(prompt, *args, **kwargs)

    chain = ConversationChain(
        llm=RecordingLLM(responses=["You live in Rome."]),
        memory=KorelyMemory(engine=engine, identity=giulia, save_exchanges=True),
        prompt=PromptTemplate.from_template("{history}\n\nHuman: {input}\nAI:"),
    )

    assert chain.invoke({"input": "Where do I live?"})["response"] == "You live in Rome."
    assert "home-city: Giulia lives in Rome" in prompts[0]
    assert prompts[0].endswith("Human: Where do I live?\nAI:")
    [kept] = engine.get_context(giulia, "Where do I live").memories
    assert kept.content == "Human: Where do I live?\nAI: You live in Rome."
