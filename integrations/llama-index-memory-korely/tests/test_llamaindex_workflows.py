"""ReActAgent and AgentWorkflow: the block reaches the model that answers, read once a turn."""

from __future__ import annotations

import logging

import pytest
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.tools import FunctionTool

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemory, korely_tools

NOTICE = "- was: Giulia lives in Rome -> now: Giulia lives in Milan"


def told_before(engine: MemoryEngine, giulia, reader: str = "support-bot") -> None:
    """Giulia's home city was read by ``reader``, then corrected by another agent."""
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader=reader)
    engine.correct(giulia, "home-city", "Giulia lives in Milan")


@pytest.mark.parametrize("placement", ["system", "context", "notes"])
@pytest.mark.parametrize("system_prompt", [None, "You help Giulia."])
async def test_a_react_agent_gets_the_block_with_or_without_a_system_prompt(
    engine, giulia, script, placement, system_prompt
) -> None:
    told_before(engine, giulia)
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot", placement=placement)
    llm = script.llm(
        script.say("Thought: I can answer.\nAnswer: You live in Milan."),
        script.say("Thought: I can answer.\nAnswer: Bye."),
    )
    agent = ReActAgent(llm=llm, tools=korely_tools(engine), system_prompt=system_prompt)
    output = await agent.run(user_msg="Where do I live?", memory=memory)
    assert str(output.response.content) == "You live in Milan."

    shown = script.text(llm.received[0])
    assert NOTICE in shown
    # With "notes", the change line says what holds now, and the fact is not shown twice.
    now = (
        "now: Giulia lives in Milan"
        if placement == "notes"
        else "- home-city: Giulia lives in Milan"
    )
    assert now in shown
    if system_prompt is not None:
        assert system_prompt in shown
        assert script.STABLE_START in shown
    # Told once: the model answered with it.
    await agent.run(user_msg="Thanks", memory=memory)
    second = llm.received[1]
    if placement == "notes":  # the first turn's note stays at its message; the new one is empty
        assert script.text(second).count(NOTICE) == 1
        assert "<memory>" not in script.words([m for m in second if m.role == "user"][-1])
    else:
        assert NOTICE not in script.text(second)
        assert "- home-city: Giulia lives in Milan" in script.text(second)


async def test_a_react_agent_that_calls_a_tool_keeps_the_block_for_the_whole_turn(
    engine, giulia, script, engine_reads
) -> None:
    told_before(engine, giulia)
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    llm = script.llm(
        script.say(
            'Thought: I should keep this.\nAction: remember\nAction Input: {"key": "pet", '
            '"content": "Giulia has a cat"}'
        ),
        script.say("Thought: Done.\nAnswer: Noted."),
    )
    agent = ReActAgent(llm=llm, tools=korely_tools(engine))
    engine_reads.clear()
    await agent.run(user_msg="I have a cat.", memory=memory)
    # Read once for the turn, and again after the agent's own write: the new fact shows, and
    # the notice stays in every call of the turn.
    assert engine_reads == ["I have a cat.", "I have a cat."]
    assert all(NOTICE in script.text(received) for received in llm.received)
    assert "Remembered pet: Giulia has a cat" in script.text(llm.received[1])
    assert "- pet: Giulia has a cat" in script.text(llm.received[1])
    assert sorted(f.key for f in engine.get_facts(giulia)) == ["home-city", "pet"]


def workflow(engine: MemoryEngine, script, front_steps: list, billing_steps: list) -> tuple:
    front_llm = script.llm(*front_steps)
    billing_llm = script.llm(*billing_steps)
    front = FunctionAgent(
        name="front",
        description="Greets the customer and hands billing questions over.",
        llm=front_llm,
        tools=korely_tools(engine),
        can_handoff_to=["billing"],
    )
    billing = FunctionAgent(
        name="billing",
        description="Answers billing questions.",
        llm=billing_llm,
        tools=korely_tools(engine),
        system_prompt="You answer billing questions.",
    )
    return AgentWorkflow(agents=[front, billing], root_agent="front"), front_llm, billing_llm


@pytest.mark.parametrize("placement", ["system", "context", "notes"])
async def test_one_read_per_turn_across_a_handoff_and_the_answering_agent_is_told(
    engine, giulia, script, engine_reads, placement
) -> None:
    told_before(engine, giulia)
    flow, front_llm, billing_llm = workflow(
        engine,
        script,
        [
            script.call("handoff", to_agent="billing", reason="an invoice question"),
            script.say("You're welcome."),
        ],
        [script.say("Your invoice goes to Milan.")],
    )
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot", placement=placement)
    engine_reads.clear()
    output = await flow.run(user_msg="Where does my invoice go?", memory=memory)
    assert str(output.response.content) == "Your invoice goes to Milan."

    assert engine_reads == ["Where does my invoice go?"]
    assert NOTICE in script.text(front_llm.received[0])
    answering = script.text(billing_llm.received[0])
    assert NOTICE in answering
    assert "You answer billing questions." in answering

    await flow.run(user_msg="Thanks", memory=memory)
    assert engine_reads == ["Where does my invoice go?", "Thanks"]
    # Each run starts with the root agent again.
    # (With "notes", the first turn's note stays at its message, as it was: told then.)
    second = front_llm.received[1]
    latest = [m for m in second if m.role == "user"][-1]
    assert NOTICE not in script.text([*(m for m in second if m.role == "system"), latest])
    # What holds now is in the prompt: as a fact, or (with "notes") in the first turn's note's
    # change line, which says it.
    now = (
        "now: Giulia lives in Milan"
        if placement == "notes"
        else "- home-city: Giulia lives in Milan"
    )
    assert now in script.text(front_llm.received[1])


async def test_a_change_made_during_a_workflow_turn_is_told_at_the_next_turn(
    engine, giulia, script
) -> None:
    told_before(engine, giulia)

    def check_invoice(number: str) -> str:
        """Look an invoice up."""
        # Meanwhile another agent learns of another move: after this turn's read.
        engine.correct(giulia, "home-city", "Giulia lives in Turin")
        return f"Invoice {number} is paid."

    front_llm = script.llm(
        script.call("handoff", to_agent="billing", reason="invoice"), script.say("Noted.")
    )
    billing_llm = script.llm(
        script.call("check_invoice", number="42"), script.say("Invoice 42 is paid.")
    )
    front = FunctionAgent(
        name="front", description="Front desk.", llm=front_llm, can_handoff_to=["billing"]
    )
    billing = FunctionAgent(
        name="billing",
        description="Billing.",
        llm=billing_llm,
        tools=[FunctionTool.from_defaults(check_invoice)],
    )
    flow = AgentWorkflow(agents=[front, billing], root_agent="front")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot")
    await flow.run(user_msg="Is invoice 42 paid?", memory=memory)
    turin = "- was: Giulia lives in Milan -> now: Giulia lives in Turin"
    assert all(turin not in script.text(r) for r in [*front_llm.received, *billing_llm.received])

    await flow.run(user_msg="Thanks", memory=memory)
    assert turin in script.text(front_llm.received[-1])


# -- a memory of its own for one agent of a workflow -----------------------------------------


async def test_tools_of_another_agent_in_one_workflow_are_refused_as_another_agents(
    engine, giulia, script, caplog
) -> None:
    billing_of_giulia = Identity("acme", "giulia", "billing")
    front_llm = script.llm(script.call("handoff", to_agent="billing", reason="invoice"))
    billing_llm = script.llm(
        script.call("remember", key="invoice-city", content="Invoices go to Milan"),
        script.say("Noted."),
    )
    front = FunctionAgent(
        name="front", description="Front desk.", llm=front_llm, tools=korely_tools(engine)
    )
    billing = FunctionAgent(
        name="billing",
        description="Billing.",
        llm=billing_llm,
        tools=korely_tools(engine, billing_of_giulia),
    )
    flow = AgentWorkflow(agents=[front, billing], root_agent="front")
    with caplog.at_level(logging.ERROR, logger="llama_index.memory.korely"):
        await flow.run(
            user_msg="Send my invoices to Milan.",
            memory=KorelyMemory.from_defaults(engine, giulia),
        )
    result = [m for m in billing_llm.received[-1] if m.role == "tool"][-1]  # after the handoff
    assert result.content == (
        "Not saved: these memory tools were made for another agent than the one this "
        "conversation's memory belongs to, so nothing was written."
    )
    assert "another person" not in caplog.text
    assert "run an agent that needs a memory of its own in a run of its own" in caplog.text
    assert engine.get_facts(billing_of_giulia, include_invalidated=True) == []
    assert engine.get_facts(giulia, include_invalidated=True) == []


async def test_an_agent_run_as_a_tool_keeps_a_memory_of_its_own(engine, giulia, script) -> None:
    # What the refusal above points to: the billing agent, in a run of its own with its own
    # memory, called by the front agent as a tool.
    billing_of_giulia = Identity("acme", "giulia", "billing")
    engine.remember(billing_of_giulia, "plan", "Giulia pays yearly")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    billing_llm = script.llm(
        script.call("remember", key="invoice-city", content="Invoices go to Milan"),
        script.say("Invoices will go to Milan."),
    )
    billing = FunctionAgent(name="billing", llm=billing_llm, tools=korely_tools(engine))
    billing_memory = KorelyMemory.from_defaults(engine, billing_of_giulia, reader="billing-bot")

    async def ask_billing(question: str) -> str:
        """Ask the billing desk."""
        output = await billing.run(user_msg=question, memory=billing_memory)
        return str(output.response.content)

    front_llm = script.llm(
        script.call("ask_billing", question="Send Giulia's invoices to Milan."),
        script.say("Done: invoices go to Milan."),
    )
    front = FunctionAgent(
        name="front",
        llm=front_llm,
        tools=[*korely_tools(engine), FunctionTool.from_defaults(async_fn=ask_billing)],
    )
    output = await front.run(
        user_msg="Send my invoices to Milan.",
        memory=KorelyMemory.from_defaults(engine, giulia, reader="support-bot"),
    )
    assert str(output.response.content) == "Done: invoices go to Milan."
    # Each agent read its own memory, and billing wrote into its own.
    assert "- plan: Giulia pays yearly" in script.text(billing_llm.received[0])
    assert "home-city" not in script.text(billing_llm.received[0])
    assert "- home-city: Giulia lives in Rome" in script.text(front_llm.received[0])
    assert "plan" not in script.text(front_llm.received[0])
    assert sorted(f.key for f in engine.get_facts(billing_of_giulia)) == ["invoice-city", "plan"]
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]
