"""The block reaches the model whatever the order of the agent's middleware, or the run says why.

Each middleware is tried listed before KorelyMiddleware and after it. The one
order that cannot work (a middleware that replaces the system prompt, listed
after KorelyMiddleware, i.e. inside it) is refused at the first model call
with a message naming the order to use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    PIIMiddleware,
    SummarizationMiddleware,
    dynamic_prompt,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from korely_memory import Identity, InvalidRequest, MemoryEngine
from langchain_korely import KorelyMiddleware

from ._agents import (
    NO_INTERRUPT,
    PROMPT,
    ScriptedChatModel,
    ask,
    calls,
    resume,
    scripted,
    skip_async_on_python_3_10,
    tool_replies,
)

FACT = "home-city: Giulia lives in Rome"
THREAD = {"configurable": {"thread_id": "t-1"}}


def build(model: Any, engine: MemoryEngine, other: Any, order: str, placement: str) -> Any:
    korely = KorelyMiddleware(engine, reader="support-bot", placement=placement)
    middleware = [korely, other] if order == "korely first" else [other, korely]
    return create_agent(
        model, system_prompt=PROMPT, middleware=middleware, checkpointer=InMemorySaver()
    )


def given(model: ScriptedChatModel) -> list[str]:
    return ["\n".join(m.text for m in prompt) for prompt in model.received]


ORDERS = ["korely first", "korely last"]


@pytest.fixture
def remembered(engine: MemoryEngine, giulia: Identity) -> MemoryEngine:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    return engine


@dynamic_prompt
def own_prompt(request: ModelRequest[Any]) -> str:
    return "You are Acme's night-shift agent."


@pytest.mark.asyncio
async def test_a_dynamic_prompt_listed_before_korely(
    remembered: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    model = scripted("Hello.")
    agent = build(model, remembered, own_prompt, "korely last", placement)
    await ask(agent, "Hi", giulia, use_async, **THREAD)
    [prompt] = given(model)
    assert prompt.startswith("You are Acme's night-shift agent.")
    assert FACT in prompt


@pytest.mark.asyncio
async def test_a_dynamic_prompt_listed_after_korely_is_refused_with_the_order_to_use(
    remembered: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    agent = build(scripted("Hello."), remembered, own_prompt, "korely first", placement)
    with pytest.raises(InvalidRequest, match="List KorelyMiddleware after") as refused:
        await ask(agent, "Hi", giulia, use_async, **THREAD)
    assert refused.value.field == "middleware"


@pytest.mark.asyncio
@pytest.mark.parametrize("order", ORDERS)
async def test_summarization(
    remembered: MemoryEngine, giulia: Identity, use_async: bool, placement: str, order: str
) -> None:
    model = scripted("Hello.", "Fine.", "Rome.")
    summarizer = SummarizationMiddleware(
        scripted("Giulia greeted us twice."), trigger=("messages", 4), keep=("messages", 1)
    )
    agent = build(model, remembered, summarizer, order, placement)
    for text in ("Hi", "How are you?", "Where do I live?"):
        await ask(agent, text, giulia, use_async, **THREAD)

    *_, last = given(model)
    assert "Giulia greeted us twice." in last  # the history was summarized...
    assert "How are you?" not in last
    assert FACT in last  # ...and the block is there all the same
    assert all(FACT in prompt for prompt in given(model))


@pytest.mark.asyncio
@pytest.mark.parametrize("order", ORDERS)
async def test_model_fallback(
    remembered: MemoryEngine, giulia: Identity, use_async: bool, placement: str, order: str
) -> None:
    failing, fallback = ScriptedChatModel(failures=1), scripted("Hello from the fallback.")
    agent = build(failing, remembered, ModelFallbackMiddleware(fallback), order, placement)
    result = await ask(agent, "Hi", giulia, use_async, **THREAD)

    assert result["messages"][-1].text == "Hello from the fallback."
    assert len(failing.received) == 1
    assert FACT in given(failing)[0]
    assert FACT in given(fallback)[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("order", ORDERS)
async def test_human_in_the_loop(
    remembered: MemoryEngine, giulia: Identity, use_async: bool, placement: str, order: str
) -> None:
    skip_async_on_python_3_10(use_async, NO_INTERRUPT)
    model = scripted(calls("remember", key="team", content="Giulia works in billing"), "Noted.")
    review = HumanInTheLoopMiddleware(interrupt_on={"remember": True})
    agent = build(model, remembered, review, order, placement)

    paused = await ask(agent, "I work in billing.", giulia, use_async, **THREAD)
    assert "__interrupt__" in paused
    done = await resume(
        agent, Command(resume={"decisions": [{"type": "approve"}]}), giulia, use_async, **THREAD
    )

    assert tool_replies(done) == ["Remembered team: Giulia works in billing"]
    before, after = given(model)
    assert FACT in before and FACT in after
    assert "team: Giulia works in billing" in after


@pytest.mark.asyncio
@pytest.mark.parametrize("order", ORDERS)
async def test_pii_redaction(
    remembered: MemoryEngine, giulia: Identity, use_async: bool, placement: str, order: str
) -> None:
    model = scripted("Noted.")
    pii = PIIMiddleware("email", strategy="redact", apply_to_input=True)
    agent = build(model, remembered, pii, order, placement)
    await ask(agent, "Write to giulia@example.com please.", giulia, use_async, **THREAD)

    [prompt] = given(model)
    assert "giulia@example.com" not in prompt
    assert FACT in prompt


@tool
def forget(what: str) -> str:
    """The application's own forget tool: clears a draft."""
    return f"cleared {what}"


@pytest.mark.asyncio
async def test_an_app_tool_with_a_memory_tools_name_is_refused(
    remembered: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    model = scripted("Hello.")
    agent = create_agent(model, tools=[forget], middleware=[KorelyMiddleware(remembered)])
    with pytest.raises(InvalidRequest, match="tool_prefix='memory_'") as refused:
        await ask(agent, "Hi", giulia, use_async)
    assert refused.value.field == "tool_prefix"
    assert model.received == []  # refused before the model was called


@pytest.mark.asyncio
async def test_a_tool_prefix_lets_both_tools_live(
    remembered: MemoryEngine, giulia: Identity, use_async: bool
) -> None:
    model = scripted(calls("forget", what="the draft"), calls("memory_forget", key="home-city"), "")
    middleware = KorelyMiddleware(remembered, tool_prefix="memory_")
    agent = create_agent(model, tools=[forget], middleware=[middleware])
    result = await ask(agent, "Clear the draft and forget where I live.", giulia, use_async)
    assert tool_replies(result) == ["cleared the draft", "Forgot home-city."]
    assert middleware.name == "KorelyMiddleware_memory_"


@pytest.mark.asyncio
async def test_two_memories_in_one_agent(
    engine: MemoryEngine, giulia: Identity, use_async: bool, placement: str
) -> None:
    team = Identity("acme", None, "support-copilot")
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.remember(team, "escalation", "Escalations go to Marco")

    def resolver(who: Identity) -> Callable[[Any], Identity]:
        return lambda run: who

    model = scripted(calls("team_remember", key="hours", content="The team works 9 to 5"), "Noted.")
    agent = create_agent(
        model,
        middleware=[
            KorelyMiddleware(engine, placement=placement, tool_prefix="user_"),
            KorelyMiddleware(
                engine, placement=placement, tool_prefix="team_", identity_from=resolver(team)
            ),
        ],
    )
    await ask(agent, "Note our hours.", giulia, use_async)

    first, second = given(model)
    assert "Giulia lives in Rome" in first and "Escalations go to Marco" in first
    assert "The team works 9 to 5" in second
    assert sorted(f.key for f in engine.get_facts(team)) == ["escalation", "hours"]
    assert [f.key for f in engine.get_facts(giulia)] == ["home-city"]


def test_two_memories_need_two_names(engine: MemoryEngine) -> None:
    with pytest.raises(AssertionError, match="duplicate middleware"):
        create_agent(scripted(), middleware=[KorelyMiddleware(engine), KorelyMiddleware(engine)])
