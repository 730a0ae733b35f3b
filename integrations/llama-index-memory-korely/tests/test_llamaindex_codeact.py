"""A real CodeActAgent: the code it writes calls the memory functions, bound to the memory."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core.agent.workflow import CodeActAgent

from korely_memory import InvalidRequest
from korely_memory.tools import MEMORY_TOOLS
from llama_index.memory.korely import KorelyMemory, korely_extractor, korely_functions, korely_tools

from .conftest import Script, ScriptedLLM


def executor(functions: list[Callable[..., str]]) -> Callable[..., Any]:
    """A code executor as the CodeAct examples build one: the functions in its namespace."""
    namespace: dict[str, Any] = {f.__name__: f for f in functions}

    async def execute(code: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, namespace)  # the scripted model's code, in the test's own process
        return out.getvalue()

    return execute


def code(source: str) -> str:
    return f"I will keep it.\n<execute>\n{source}\n</execute>"


async def test_a_code_agent_keeps_facts_with_the_functions_of_its_memory(
    engine, giulia, script
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    functions = korely_functions(memory)
    llm = script.llm(
        script.say(code('print(remember(key="pet", content="Giulia has a cat"))')),
        script.say(code('print(recall(query=""))\nprint(forget(key="home-city", erase=True))')),
        script.say("Noted: a cat, and your city is forgotten."),
    )
    # A copy: CodeActAgent appends its own "execute" tool to the list it is given.
    agent = CodeActAgent(
        code_execute_fn=executor(functions), llm=llm, tools=[*functions], streaming=False
    )
    output = await agent.run(user_msg="I have a cat. Forget where I live.", memory=memory)
    assert str(output.response.content) == "Noted: a cat, and your city is forgotten."

    assert [f.__name__ for f in functions] == [t.name for t in MEMORY_TOOLS]
    described = llm.received[0][0].content or ""  # CodeAct's own system prompt
    assert "def remember(*, key: str, content: str, account_wide: bool | None = False" in described
    assert "Giulia lives in Rome" in script.text(llm.received[0])  # the block reached the model
    ran = script.text(llm.received[1]) + script.text(llm.received[2])
    assert "Remembered pet: Giulia has a cat" in ran
    assert "Not found: query: must say what to look for" in ran  # refusals come back as text
    assert "Forgot home-city and erased every version of it." in ran
    assert [f.key for f in engine.get_facts(giulia)] == ["pet"]
    # The agent is not told its own write: it was made with the memory's reader.
    assert "## Changed since you last read" not in script.text(llm.received[2])


async def test_the_context_taking_tools_are_refused_by_a_code_agent(engine, giulia, script) -> None:
    # What korely_functions is for: LlamaIndex refuses tools that take the Context.
    memory = KorelyMemory.from_defaults(engine, giulia)
    agent = CodeActAgent(
        code_execute_fn=executor([]),
        llm=script.llm(script.say("Hi.")),
        tools=korely_tools(engine, giulia),
        streaming=False,
    )
    with pytest.raises(Exception, match="requires context"):
        await agent.run(user_msg="Hi", memory=memory)


def test_the_functions_need_a_korely_memory(engine, giulia) -> None:
    with pytest.raises(InvalidRequest) as refused:
        korely_functions(giulia)  # type: ignore[arg-type]
    assert refused.value.field == "memory"
    memory = KorelyMemory.from_defaults(engine, giulia)
    with pytest.raises(InvalidRequest) as refused:
        korely_functions(memory, tool_prefix="a b")
    assert refused.value.field == "tool_prefix"
    names = [f.__name__ for f in korely_functions(memory, tool_prefix="memory_")]
    assert names == [f"memory_{t.name}" for t in MEMORY_TOOLS]


async def test_the_functions_of_one_memory_refuse_a_run_of_another(
    engine, giulia, bob, script, caplog
) -> None:
    giulias = korely_functions(KorelyMemory.from_defaults(engine, giulia, reader="support-bot"))
    bobs_memory = KorelyMemory.from_defaults(engine, bob, reader="support-bot")
    llm = script.llm(
        script.say(code('print(remember(key="pet", content="Bob has a dog"))')),
        script.say("I could not keep it."),
    )
    agent = CodeActAgent(
        code_execute_fn=executor(giulias), llm=llm, tools=[*giulias], streaming=False
    )
    await agent.run(user_msg="I'm Bob, I have a dog", memory=bobs_memory)
    ran = script.text(llm.received[1])
    assert (
        "Not saved: these functions serve the memory they were made from, which is not the "
        "memory of this conversation (they are made per conversation), so nothing was done."
    ) in ran
    assert engine.get_facts(giulia) == [] and engine.get_facts(bob) == []
    assert "has no turn open: refused" in caplog.text


async def test_the_functions_refuse_outside_their_memorys_turn(engine, giulia, script) -> None:
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    functions = {f.__name__: f for f in korely_functions(memory)}
    # Never read: no run is reading this memory.
    assert functions["recall"](query="cat").startswith("Not found: these functions serve")
    agent = CodeActAgent(
        code_execute_fn=executor([*functions.values()]),
        llm=script.llm(script.say("Hello.")),
        tools=[*functions.values()],
        streaming=False,
    )
    await agent.run(user_msg="Hi", memory=memory)
    # The run answered: its turn is over.
    refused = functions["remember"](key="pet", content="Giulia has a cat")
    assert refused.startswith("Not saved: these functions serve")
    assert engine.get_facts(giulia) == []


async def test_a_positional_call_is_refused_not_raised(engine, giulia, script) -> None:
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    functions = korely_functions(memory)
    llm = script.llm(
        script.say(code('print(remember("pet", "Giulia has a cat"))')), script.say("Sorry.")
    )
    agent = CodeActAgent(
        code_execute_fn=executor(functions), llm=llm, tools=[*functions], streaming=False
    )
    await agent.run(user_msg="I have a cat", memory=memory)
    assert "Not saved: this tool takes named arguments only." in script.text(llm.received[1])
    assert engine.get_facts(giulia) == []


async def test_a_code_result_is_not_the_person_speaking(
    engine, giulia, script, engine_reads
) -> None:
    """CodeActAgent keeps its code's output as a user message: the memory reads for the
    person's words alone, captures what the person and the agent said, and the turn ends
    with the answer (the functions refuse after it)."""
    engine.remember(giulia, "pet", "Giulia has a cat")
    extraction = ScriptedLLM(
        Script.call("MemoryOperations", operations=[]),
    )
    memory = KorelyMemory.from_defaults(
        engine, giulia, reader="support-bot",
        capture=korely_extractor(extraction), capture_inline=True,
    )  # fmt: skip
    functions = {f.__name__: f for f in korely_functions(memory)}
    llm = script.llm(
        script.say(code('print(recall(query="pet"))')),
        script.say(code('print(remember(key="pet-name", content="The cat is called Ada"))')),
        script.say("You have a cat, Ada."),
    )
    agent = CodeActAgent(
        code_execute_fn=executor([*functions.values()]),
        llm=llm,
        tools=[*functions.values()],
        streaming=False,
    )
    await agent.run(user_msg="Do I have a pet? She is called Ada.", memory=memory)

    assert engine_reads and set(engine_reads) == {"Do I have a pet? She is called Ada."}
    assert not memory.in_turn
    refused = functions["remember"](key="dog", content="Giulia has a dog")
    assert refused.startswith("Not saved: these functions serve")
    assert sorted(f.key for f in engine.get_facts(giulia)) == ["pet", "pet-name"]
    [prompt] = extraction.received
    said = Script.text(prompt).split("Conversation excerpt:\n", 1)[1]
    assert said.splitlines()[:2] == [
        "user: Do I have a pet? She is called Ada.",
        "assistant: You have a cat, Ada.",
    ]
    assert "Result of executing the code" not in said
    assert "<execute>" not in said  # the code it ran is no answer either

    # The next turn is the person's next message, read for its words.
    llm.received.clear()
    answer = script.llm(script.say("Ada, a cat."))
    agent = CodeActAgent(
        code_execute_fn=executor([*functions.values()]),
        llm=answer,
        tools=[*functions.values()],
        streaming=False,
    )
    await agent.run(user_msg="What is my cat called?", memory=memory)
    assert engine_reads[-1] == "What is my cat called?"
    assert "- pet-name: The cat is called Ada" in script.text(answer.received[0])
