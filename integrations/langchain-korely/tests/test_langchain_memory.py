"""KorelyMemory, the `langchain_classic` memory for legacy chains."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from langchain_classic.chains import ConversationChain, LLMChain
from langchain_classic.memory import CombinedMemory, ConversationBufferMemory
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.prompts import PromptTemplate
from pydantic import Field

from korely_memory import Identity, InvalidRequest, MemoryEngine
from korely_memory.limits import MAX_MEMORY
from langchain_korely import KorelyMemory

CHANGED = "## Changed since you last read"
MOVED = "was: Giulia lives in Rome -> now: Giulia lives in Milan"


def legacy(classes: str) -> pytest.MarkDecorator:
    """A test of the legacy chains KorelyMemory serves: LangChain warns that they are deprecated."""
    return pytest.mark.filterwarnings(
        f"ignore:The class `{classes}` was deprecated"
        ":langchain_core._api.deprecation.LangChainDeprecationWarning"
    )


class RecordingLLM(FakeListLLM):
    prompts: list[str] = Field(default_factory=list)

    def _call(self, prompt: str, *args: Any, **kwargs: Any) -> str:
        self.prompts.append(prompt)
        return super()._call(prompt, *args, **kwargs)


def a_change_waits(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="legacy-bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")


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


@pytest.mark.asyncio
async def test_a_change_is_spent_once_the_chain_has_answered(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    a_change_waits(engine, giulia)
    memory = KorelyMemory(engine=engine, identity=giulia, reader="legacy-bot", memory_key="facts")
    inputs, outputs = {"input": "hi"}, {"response": "Hello."}

    async def turn() -> str:
        if use_async:
            loaded = await memory.aload_memory_variables(inputs)
            await memory.asave_context(inputs, outputs)
        else:
            loaded = memory.load_memory_variables(inputs)
            memory.save_context(inputs, outputs)
        return loaded["facts"]

    assert MOVED in await turn()
    assert CHANGED not in await turn()


def test_a_chain_call_that_fails_leaves_the_change_to_be_told(
    db_url: str, giulia: Identity
) -> None:
    now = [dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)]
    with MemoryEngine(db_url, clock=lambda: now[0]) as engine:
        a_change_waits(engine, giulia)
        memory = KorelyMemory(engine=engine, identity=giulia, reader="legacy-bot")
        assert MOVED in memory.load_memory_variables({"input": "hi"})["history"]
        # The model call failed: no save_context. The change is held, then told again.
        assert CHANGED not in memory.load_memory_variables({"input": "hi"})["history"]
        now[0] += dt.timedelta(minutes=11)
        assert MOVED in memory.load_memory_variables({"input": "hi"})["history"]
        memory.save_context({"input": "hi"}, {"response": "Hello."})
        now[0] += dt.timedelta(minutes=11)
        assert CHANGED not in memory.load_memory_variables({"input": "hi"})["history"]


def test_several_inputs_need_an_input_key(engine: MemoryEngine, giulia: Identity) -> None:
    memory = KorelyMemory(engine=engine, identity=giulia, save_exchanges=True)
    inputs = {"question": "Where do I live?", "language": "English"}
    with pytest.raises(InvalidRequest, match="set input_key") as refused:
        memory.load_memory_variables(inputs)
    assert refused.value.field == "input_key"
    with pytest.raises(InvalidRequest, match="set input_key"):
        memory.save_context(inputs, {"text": "In Rome."})
    assert engine.get_context(giulia, "Rome").memories == ()

    chosen = KorelyMemory(engine=engine, identity=giulia, save_exchanges=True, input_key="question")
    chosen.load_memory_variables(inputs)
    chosen.save_context(inputs, {"text": "In Rome."})
    [kept] = engine.get_context(giulia, "Rome").memories
    assert kept.content == "user: Where do I live?\n\nassistant: In Rome."


@legacy("LLMChain")
def test_a_legacy_chain_with_several_inputs_is_refused_rather_than_losing_the_message(
    engine: MemoryEngine, giulia: Identity
) -> None:
    prompt = PromptTemplate.from_template("{history}\n{language}: {question}")
    chain = LLMChain(
        llm=FakeListLLM(responses=["In Rome."]),
        prompt=prompt,
        memory=KorelyMemory(engine=engine, identity=giulia, save_exchanges=True),
    )
    with pytest.raises(InvalidRequest, match="input_key"):
        chain.invoke({"question": "Where do I live?", "language": "English"})
    assert engine.get_context(giulia, "live").memories == ()


def test_several_outputs_need_an_output_key(engine: MemoryEngine, giulia: Identity) -> None:
    memory = KorelyMemory(engine=engine, identity=giulia, save_exchanges=True)
    with pytest.raises(InvalidRequest, match="output_key") as refused:
        memory.save_context({"input": "hi"}, {"text": "a", "other": "b"})
    assert refused.value.field == "output_key"


@pytest.mark.asyncio
async def test_a_long_exchange_is_kept_whole_in_pieces(
    engine: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    memory = KorelyMemory(engine=engine, identity=giulia, save_exchanges=True)
    answer = " ".join(f"step-{n} of the refund procedure explained." for n in range(1500))
    assert len(answer) > MAX_MEMORY
    inputs, outputs = {"input": "How do refunds work?"}, {"response": answer}
    if use_async:
        await memory.asave_context(inputs, outputs)
    else:
        memory.save_context(inputs, outputs)

    found = engine.search_memories(giulia, "refunds refund procedure", limit=50)
    kept = [m.content for m in sorted(found, key=lambda m: m.id)]
    assert len(kept) > 1
    assert all(len(piece) <= MAX_MEMORY for piece in kept)
    first, *rest = kept
    assert first.startswith("user: How do refunds work?\n\nassistant: ")
    assert all(piece.startswith("assistant: ") for piece in rest)  # each piece says who spoke
    words = [first.split("\n\nassistant: ", 1)[1], *(p.removeprefix("assistant: ") for p in rest)]
    assert " ".join(words).split() == answer.split()  # split at breaks, nothing cut off


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
    assert kept.content == "user: My parcel is late\n\nassistant: I opened ticket 4471 for it."


def test_clear_keeps_facts(engine: MemoryEngine, giulia: Identity) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    KorelyMemory(engine=engine, identity=giulia).clear()
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


@legacy("ConversationChain")
def test_a_legacy_conversation_chain_reads_the_facts(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    llm = RecordingLLM(responses=["You live in Rome."], prompts=[])
    chain = ConversationChain(
        llm=llm,
        memory=KorelyMemory(engine=engine, identity=giulia, save_exchanges=True),
        prompt=PromptTemplate.from_template("{history}\n\nHuman: {input}\nAI:"),
    )

    assert chain.invoke({"input": "Where do I live?"})["response"] == "You live in Rome."
    assert "home-city: Giulia lives in Rome" in llm.prompts[0]
    assert llm.prompts[0].endswith("Human: Where do I live?\nAI:")
    [kept] = engine.get_context(giulia, "Where do I live").memories
    assert kept.content == "user: Where do I live?\n\nassistant: You live in Rome."


@legacy("(ConversationChain|ConversationBufferMemory|InMemoryChatMessageHistory)")
def test_combined_with_a_buffer_the_chain_keeps_the_conversation_and_the_facts(
    engine: MemoryEngine, giulia: Identity
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    llm = RecordingLLM(responses=["Hello Giulia.", "You said hello."], prompts=[])
    memory = CombinedMemory(
        memories=[
            ConversationBufferMemory(memory_key="history", input_key="input"),
            KorelyMemory(engine=engine, identity=giulia, memory_key="facts", input_key="input"),
        ]
    )
    chain = ConversationChain(
        llm=llm,
        memory=memory,
        prompt=PromptTemplate.from_template(
            "Facts:\n{facts}\n\nConversation:\n{history}\nHuman: {input}\nAI:"
        ),
    )
    chain.invoke({"input": "Hello!"})
    chain.invoke({"input": "What did I say?"})

    second = llm.prompts[1]
    assert "home-city: Giulia lives in Rome" in second
    assert "Human: Hello!\nAI: Hello Giulia." in second
