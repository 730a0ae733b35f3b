"""The `"notes"` placement once the message of an earlier note is flushed from the history.

A note shows a fact once, as a line with its key; later notes tell its changes as
`was -> now` lines, which name no key. Once the message whose note showed the key is flushed
(`Memory` archives it past `token_limit`), a change made by someone else comes with the fact
again, under its key: the agent can still correct or forget it. A real `FunctionAgent`.
"""

from __future__ import annotations

import re

from llama_index.core.agent.workflow import FunctionAgent

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import KorelyMemory

KEYED = re.compile(r"^- home-city: (.*) \(since \d{4}-\d\d-\d\d\)$", re.MULTILINE)


async def test_a_change_after_the_note_with_the_key_was_flushed_shows_the_fact_again(
    engine: MemoryEngine, giulia: Identity, script
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Milan")
    memory = KorelyMemory.from_defaults(
        engine, giulia, reader="bot", placement="notes", token_limit=1200,
        chat_history_token_ratio=0.2, token_flush_size=100,
    )  # fmt: skip
    llm = script.llm(*(script.say("word " * 150) for _ in range(3)))
    agent = FunctionAgent(llm=llm, tools=[], system_prompt="You are a support agent.")
    await agent.run(user_msg="Where do I live?", memory=memory)
    await agent.run(user_msg="Tell me about my plan.", memory=memory)
    engine.correct(giulia, "home-city", "Giulia lives in Turin", reader="crm-sync")
    await agent.run(user_msg="Did anything change?", memory=memory)

    first, _, third = (script.text(p) for p in llm.received)
    assert KEYED.findall(first) == ["Giulia lives in Milan"]
    assert "Where do I live?" not in third  # turn 1 was flushed, and its note with it
    assert "- was: Giulia lives in Milan -> now: Giulia lives in Turin" in third
    assert KEYED.findall(third) == ["Giulia lives in Turin"]
