"""One run, one person: the identity from the run's context and LangMem's `langgraph_user_id`.

LangMem's tools and manager write under `config["configurable"]["langgraph_user_id"]` (through
`KorelyStore`, that user's memory); `KorelyMiddleware` and korely's tools take the identity from
the run's context. When a run names two different people so, it is refused by name before the
model is called or anything is written, rather than write Marco's memory while showing Giulia's.
The same names agree and the run goes on; a resolver of the application's is its own rule.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from korely_memory import Identity, InvalidRequest, MemoryEngine
from langchain_korely import KorelyMiddleware, KorelyStore, korely_tools

from ._agents import (
    NO_CONFIG_IN_MODEL_HOOK,
    calls,
    scripted,
    skip_async_on_python_3_10,
    tool_messages,
)
from .test_store_users import (
    GIULIA,
    LANGMEM_ASYNC,
    LANGMEM_NAMESPACE,
    LANGMEM_RUNS,
    MARCO,
    THE_AGENT,
    call,
    contents,
    korely_store,
    langmem_only,
    reply_to,
    run,
)

if LANGMEM_RUNS:
    from .test_store_users import create_manage_memory_tool, create_search_memory_tool

AS_MARCO = {"configurable": {"langgraph_user_id": "marco"}}
AS_GIULIA = {"configurable": {"langgraph_user_id": "giulia"}}


def langmem_agent(engine: MemoryEngine, model: Any, store: KorelyStore) -> Any:
    """The README's agent: LangMem's tools on the store, `KorelyMiddleware` showing the block."""
    return create_agent(
        model,
        tools=[
            create_manage_memory_tool(namespace=LANGMEM_NAMESPACE),
            create_search_memory_tool(namespace=LANGMEM_NAMESPACE),
        ],
        store=store,
        middleware=[KorelyMiddleware(engine, reader="assistant-bot")],
    )


@langmem_only
async def test_a_run_naming_two_people_is_refused_before_anything_is_written(
    engine: MemoryEngine, use_async: bool
) -> None:
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    engine.remember(GIULIA, "home-city", "Giulia lives in Rome")
    model = scripted(
        call("manage_memory", "create-1", content="Marco prefers tea", action="create"),
        "Noted.",
    )
    store = korely_store(engine)
    agent = langmem_agent(engine, model, store)

    with pytest.raises(InvalidRequest) as refused:
        await run(agent, "I prefer tea.", use_async, config=AS_MARCO, context=GIULIA)

    assert refused.value.field == "langgraph_user_id"
    assert "'marco'" in refused.value.message and "'giulia'" in refused.value.message
    assert model.received == [], "the model was called"
    assert contents(MARCO, engine) == [] and contents(THE_AGENT, engine) == []
    assert contents(GIULIA, engine) == ["Giulia lives in Rome"]
    assert store.search(("memories",)) == []


@langmem_only
async def test_a_run_naming_one_person_twice_goes_on(engine: MemoryEngine, use_async: bool) -> None:
    skip_async_on_python_3_10(use_async, LANGMEM_ASYNC)
    model = scripted(
        call("manage_memory", "create-1", content="Giulia prefers tea", action="create"),
        call("search_memory", "search-1", query="tea"),
        "Noted.",
    )
    agent = langmem_agent(engine, model, korely_store(engine))

    result = await run(agent, "I prefer tea.", use_async, config=AS_GIULIA, context=GIULIA)

    assert not any(m.status == "error" for m in tool_messages(result))
    (found,) = json.loads(reply_to("search-1", result["messages"]))
    assert found["value"] == {"content": "Giulia prefers tea"}
    assert contents(GIULIA, engine) == ["Giulia prefers tea"]


async def test_korely_s_tools_alone_refuse_a_run_naming_two_people(
    engine: MemoryEngine, use_async: bool
) -> None:
    """The tools without the middleware take the identity from the run too: a call in a run
    naming two people writes nothing for either."""
    model = scripted(calls("remember", key="drink", content="Prefers tea"), "Noted.")
    agent = create_agent(model, tools=korely_tools(engine))

    with pytest.raises(InvalidRequest) as refused:  # as a run with no identity is
        await run(agent, "I prefer tea.", use_async, config=AS_MARCO, context=GIULIA)

    assert refused.value.field == "langgraph_user_id"
    assert contents(GIULIA, engine) == [] and contents(MARCO, engine) == []


async def test_a_team_agent_s_run_naming_a_user_is_refused(
    engine: MemoryEngine, use_async: bool
) -> None:
    """An identity with no user beside a `langgraph_user_id`: LangMem would write the user's
    memory while the block shows the agent's own."""
    skip_async_on_python_3_10(use_async, NO_CONFIG_IN_MODEL_HOOK)
    model = scripted("Hello.")
    agent = create_agent(model, middleware=[KorelyMiddleware(engine, reader="team-bot")])

    with pytest.raises(InvalidRequest) as refused:
        await run(agent, "Hi", use_async, config=AS_MARCO, context=THE_AGENT)

    assert refused.value.field == "langgraph_user_id" and "None" in refused.value.message
    assert model.received == []


@tool
def pause(question: str) -> str:
    """Ask the person a question and wait for the answer."""
    return str(interrupt(question))


async def test_a_resumed_run_is_checked_against_the_identity_it_kept(
    engine: MemoryEngine, use_async: bool
) -> None:
    """A run resumed without context has the identity its thread kept: a resume naming another
    `langgraph_user_id` is refused as a new run would be."""
    skip_async_on_python_3_10(use_async, "LangGraph's interrupt() needs the run's config")
    model = scripted(calls("pause", question="Which city?"), "Milan, then.")
    agent = create_agent(
        model,
        tools=[pause],
        middleware=[KorelyMiddleware(engine, reader="assistant-bot")],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "t-1", "langgraph_user_id": "giulia"}}
    await run(agent, "Book me a trip.", use_async, config=thread, context=GIULIA)
    elsewhere = {"configurable": {"thread_id": "t-1", "langgraph_user_id": "marco"}}

    with pytest.raises(InvalidRequest) as refused:
        if use_async:
            await agent.ainvoke(Command(resume="Milan"), config=elsewhere)
        else:
            agent.invoke(Command(resume="Milan"), config=elsewhere)

    assert refused.value.field == "langgraph_user_id"
    assert len(model.received) == 1


async def test_a_resolver_of_the_application_s_is_its_own_rule(
    engine: MemoryEngine, use_async: bool
) -> None:
    """With `identity_from=`, the application says where the identity comes from: nothing else
    is compared with it."""
    skip_async_on_python_3_10(use_async, NO_CONFIG_IN_MODEL_HOOK)
    model = scripted(calls("remember", key="drink", content="Prefers tea"), "Noted.")
    agent = create_agent(
        model,
        middleware=[
            KorelyMiddleware(
                engine,
                reader="assistant-bot",
                identity_from=lambda run: Identity(
                    "acme", run.config["configurable"]["user_id"], "assistant"
                ),
            )
        ],
    )
    config = {"configurable": {"user_id": "giulia", "langgraph_user_id": "g-7"}}

    await run(agent, "I prefer tea.", use_async, config=config)

    assert contents(GIULIA, engine) == ["Prefers tea"]
