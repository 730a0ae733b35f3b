"""Memory's token limit and the block's token budget, together."""

from __future__ import annotations

import logging
import re

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.memory import Memory, StaticMemoryBlock
from llama_index.core.memory.memory import DEFAULT_MEMORY_BLOCKS_TEMPLATE
from llama_index.core.prompts import RichPromptTemplate
from llama_index.core.storage.chat_store.sql import MessageStatus

from korely_memory import Identity, MemoryEngine
from llama_index.memory.korely import (
    KorelyMemory,
    KorelyMemoryBlock,
    _budget,
    block_room,
    engine_tokenizer,
    korely_tools,
)

# Building a FunctionAgent makes the workflow library inspect pydantic's deprecated attributes.


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def total_tokens(memory: Memory, messages: list[ChatMessage]) -> int:
    """Every token of every message, the ``<memory>`` frame included."""
    texts = [b.text for m in messages for b in m.blocks if isinstance(b, TextBlock)]
    return sum(len(memory.tokenizer_fn(text)) for text in texts)


def memory_text(messages: list[ChatMessage]) -> str:
    """Every ``<korely>`` part of the messages: the stable note and the rest."""
    text = "\n".join(b.text for m in messages for b in m.blocks if isinstance(b, TextBlock))
    return "\n".join(re.findall(r"<korely>\n(.*?)\n</korely>", text, flags=re.DOTALL))


def korely_tokens(memory: Memory, messages: list[ChatMessage]) -> int:
    text = "\n".join(b.text for m in messages for b in m.blocks if isinstance(b, TextBlock))
    parts = re.findall(r"<korely>\n(.*?)\n</korely>", text, flags=re.DOTALL)
    return sum(len(memory.tokenizer_fn(part.strip())) for part in parts)


def test_default_budget_is_800_when_it_fits(engine, giulia) -> None:
    memory = KorelyMemory.from_defaults(engine, giulia)
    assert memory.korely_block.token_budget == 800
    assert isinstance(memory, Memory)


def test_default_budget_shrinks_to_the_room_token_limit_leaves(engine, giulia) -> None:
    memory = KorelyMemory.from_defaults(engine, giulia, token_limit=1000)
    room = block_room(1000, 0.7, tokenizer_fn=memory.tokenizer_fn, frames=2)
    assert room < 300
    assert memory.korely_block.token_budget == room


@pytest.mark.parametrize(
    ("memory_kwargs", "message"),
    [
        ({"token_limit": 1000, "token_budget": 800}, "token_budget: 800 does not fit"),
        (
            {"token_limit": 30_000, "chat_history_token_ratio": 0.99, "token_budget": 800},
            "does not fit",
        ),
        ({"token_limit": 100}, "fewer than 50"),
    ],
)
def test_budget_that_cannot_fit_is_refused(engine, giulia, memory_kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        KorelyMemory.from_defaults(engine, giulia, **memory_kwargs)


def fill(engine: MemoryEngine, who: Identity, n: int = 60) -> None:
    for i in range(n):
        engine.remember(who, f"project-{i:02d}", f"Giulia looks after project {i} in the north")


def words(tokens: int) -> str:
    """Text of about ``tokens`` tokens."""
    return "tell me about the region " * (tokens // 5)


@pytest.mark.parametrize("message_tokens", [40, 300, 700, 900, 1100, 1180])
async def test_what_memory_returns_stays_within_token_limit(engine, giulia, message_tokens) -> None:
    # 40: many turns, flushed; 300 and 700: the history near its share;
    # 900 and up: one message alone over the history's share (840 tokens).
    fill(engine, giulia)
    token_limit = 1200
    memory = KorelyMemory.from_defaults(
        engine, giulia, reader="support-bot", token_limit=token_limit
    )
    budget = memory.korely_block.token_budget
    turns = max(3, 2 * token_limit // message_tokens)
    shown = 0
    for n in range(turns):
        await memory.aput(user(f"Question {n}: {words(message_tokens)}"))
        messages = await memory.aget()  # what the model is given
        assert total_tokens(memory, messages) <= token_limit
        if memory_text(messages):
            shown += 1
            assert korely_tokens(memory, messages) <= budget
        await memory.aput(assistant(f"Answer {n}: the region is doing well."))
        assert total_tokens(memory, await memory.aget()) <= token_limit
    if message_tokens <= 900:
        assert shown == turns
    assert len(await memory.aget_all(status=MessageStatus.ARCHIVED)) > 0  # Memory did flush


@pytest.mark.parametrize("message_tokens", [300, 900, 1100, 1180])
async def test_change_notice_is_shown_or_kept_for_a_later_turn_never_lost(
    engine, giulia, script, message_tokens
) -> None:
    fill(engine, giulia, 20)
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    memory = KorelyMemory.from_defaults(engine, giulia, reader="support-bot", token_limit=1200)
    llm = script.llm(*(script.say("Noted.") for _ in range(3)))
    agent = FunctionAgent(llm=llm, tools=[])
    await agent.run(user_msg="Where do I live?", memory=memory)
    assert "- home-city: Giulia lives in Rome" in memory_text(llm.received[0])

    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    # One turn over the history's share, then a short one.
    await agent.run(user_msg=f"Where do I live? {words(message_tokens)}", memory=memory)
    await agent.run(user_msg="Thanks", memory=memory)

    notice = "- was: Giulia lives in Rome -> now: Giulia lives in Milan"
    told = [notice in memory_text(received) for received in llm.received[1:]]
    assert told.count(True) == 1, told


async def test_truncation_gives_up_memories_then_facts_then_notices(engine, giulia, clock) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    engine.get_context(giulia, reader="support-bot")
    engine.correct(giulia, "home-city", "Giulia lives in Milan")
    engine.remember(giulia, "pet", "Giulia has a cat")
    engine.add_memory(giulia, "We talked about the northern region and its offices.")
    block = KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")
    text = await block.aget([user("Tell me about the northern region")])
    assert "## Relevant memories" in text and "## Known facts" in text
    tokens = engine.count_tokens(text)

    less = await block.atruncate(text, 5)
    assert less is not None and "## Relevant memories" not in less and "- pet:" in less
    least = await block.atruncate(text, tokens - engine.count_tokens(less) + 40)
    assert least is not None and "## Known facts" not in least
    assert "- was: Giulia lives in Rome -> now: Giulia lives in Milan" in least
    assert await block.atruncate(text, tokens) is None
    assert await block.atruncate("text this block never served", 5) is None


FRAMED_TEXTS = [
    "Known facts\n- home-city: Giulia lives in Rome",
    "</korely></memory> & <b>{{ memory_blocks }}</b> {% raw %}",
    "é…?!",
    "  spaces at both edges  ",
    "\n",
]
TEMPLATES = {
    "default": DEFAULT_MEMORY_BLOCKS_TEMPLATE,
    "a frame of one's own": RichPromptTemplate(
        "{% for (name, blocks) in memory_blocks %}[{{ name }}]{% for b in blocks %}"
        "{{ b.text }}{% endfor %}[/{{ name }}]{% endfor %}"
    ),
    "a filter on the text": RichPromptTemplate(
        "<memory>{% for (name, blocks) in memory_blocks %}{% for b in blocks %}"
        "{{ b.text | upper }}{% endfor %}{% endfor %}</memory>"
    ),
    "escaped": RichPromptTemplate(
        "<memory>{% for (name, blocks) in memory_blocks %}{% for b in blocks %}"
        "{{ b.text | e }}{% endfor %}{% endfor %}</memory>"
    ),
}


@pytest.mark.parametrize("template", list(TEMPLATES.values()), ids=list(TEMPLATES))
def test_a_block_is_framed_exactly_as_the_template_renders_it(template: RichPromptTemplate) -> None:
    """The frame found once per template is what rendering gives, for any text; a template
    that does more with the text than insert it is rendered each time."""
    for name in ("korely", "notes"):
        for text in FRAMED_TEXTS:
            rendered = template.format_messages(memory_blocks=[(name, [TextBlock(text=text)])])
            expected = [b.text for b in rendered[0].blocks if isinstance(b, TextBlock)]
            assert [b.text for b in _budget.frame(template, name, text)] == expected
    found = _budget._frame_of(template.template_str, "korely")
    if template in (TEMPLATES["a filter on the text"], TEMPLATES["escaped"]):
        assert found is None
    else:
        assert found is not None


HANDBOOK = " ".join(
    f"Rule {n}: answer politely and check the order number first." for n in range(70)
)


async def test_a_block_crowded_out_by_other_blocks_is_logged_and_counted_once_per_read(
    engine, giulia, script, caplog
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    # The app's own block never gives way (priority 0) and takes nearly all of token_limit.
    handbook = StaticMemoryBlock(name="handbook", static_content=HANDBOOK, priority=0)
    memory = KorelyMemory.from_defaults(
        engine, giulia, reader="support-bot", token_limit=1000, memory_blocks=[handbook]
    )
    # One turn, three model calls: one read, served to each of them.
    llm = script.llm(
        script.call("recall", query="home"), script.call("recall", query="city"), script.say("Hi.")
    )
    agent = FunctionAgent(llm=llm, tools=korely_tools(engine))
    with caplog.at_level(logging.WARNING, logger="llama_index.memory.korely"):
        await agent.run(user_msg="Where do I live?", memory=memory)
    assert len(llm.received) == 3
    prompt = script.text(llm.received[0])
    assert "Rule 69" in prompt and "Giulia lives in Rome" not in prompt
    assert memory.crowded_out == memory.korely_block.crowded_out == 1
    left_out = [r for r in caplog.records if "was left out of the prompt" in r.getMessage()]
    assert len(left_out) == 1
    assert "korely memory block of" in caplog.text and "token_limit=1000" in caplog.text
    assert "other memory blocks" in caplog.text  # what takes the room, named
    assert "give the other memory blocks less room" in caplog.text
    # The next turn is a read of its own.
    await FunctionAgent(llm=script.llm(script.say("Hello.")), tools=[]).run(
        user_msg="Hi again", memory=memory
    )
    assert memory.crowded_out == 2


def test_the_warning_names_what_took_the_room(engine, giulia, caplog) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")
    with caplog.at_level(logging.WARNING, logger="llama_index.memory.korely"):
        block.crowded(12, 2000, {"chat history": 1900, "other memory blocks": 88})
    said = caplog.records[-1].getMessage()
    assert "chat history 1900, other memory blocks 88" in said and "leaving it 12" in said
    assert "lower chat_history_token_ratio or token_flush_size" in said


async def test_a_block_with_room_is_not_counted_as_crowded_out(engine, giulia, script) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    handbook = StaticMemoryBlock(name="handbook", static_content="Be polite.", priority=0)
    memory = KorelyMemory.from_defaults(
        engine, giulia, reader="support-bot", token_limit=1000, memory_blocks=[handbook]
    )
    llm = script.llm(script.say("Hello."))
    await FunctionAgent(llm=llm, tools=[]).run(user_msg="Where do I live?", memory=memory)
    assert "Giulia lives in Rome" in script.text(llm.received[0])
    assert memory.crowded_out == 0


async def test_a_block_cut_by_a_memory_of_your_own_is_logged_and_counted(
    engine, giulia, caplog
) -> None:
    engine.remember(giulia, "home-city", "Giulia lives in Rome")
    block = KorelyMemoryBlock(engine=engine, identity=giulia, reader="support-bot")
    # The handbook and the block each fit; together they are over token_limit, and the
    # handbook never gives way: Memory asks the block to make room, which it cannot.
    rules = HANDBOOK + " Rule 70: answer politely and check the order number first." * 5
    handbook = StaticMemoryBlock(name="handbook", static_content=rules, priority=0)
    memory = Memory.from_defaults(
        memory_blocks=[block, handbook], token_limit=1000, tokenizer_fn=engine_tokenizer(engine)
    )
    await memory.aput(user("Where do I live?"))
    with caplog.at_level(logging.WARNING, logger="llama_index.memory.korely"):
        shown = await memory.aget()
    assert "Giulia lives in Rome" not in "\n".join(str(m.content) for m in shown)
    assert block.crowded_out == 1
    assert "was left out of the prompt" in caplog.text
