"""Memory's token limit and the block's token budget, together."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus
from llama_index.memory.korely import KorelyMemory, KorelyMemoryBlock, block_room


def total_tokens(memory: Memory, messages: list[ChatMessage]) -> int:
    return sum(len(memory.tokenizer_fn(message.content or "")) for message in messages)


def korely_tokens(memory: Memory, messages: list[ChatMessage]) -> int:
    [system] = [m for m in messages if m.role == "system"]
    text = system.content or ""
    inner = text[text.index("<korely>") + len("<korely>") : text.index("</korely>")].strip()
    return len(memory.tokenizer_fn(inner))


def test_default_budget_is_800_when_it_fits(engine, giulia) -> None:
    memory = KorelyMemory.from_defaults(engine, giulia)
    assert memory.korely_block.token_budget == 800
    assert isinstance(memory, Memory)


def test_default_budget_shrinks_to_the_room_token_limit_leaves(engine, giulia) -> None:
    memory = KorelyMemory.from_defaults(engine, giulia, token_limit=1000)
    room = block_room(1000, 0.7, tokenizer_fn=memory.tokenizer_fn)
    assert room < 300
    assert memory.korely_block.token_budget == room


@pytest.mark.parametrize(
    ("memory_kwargs", "message"),
    [
        ({"token_limit": 1000, "token_budget": 800}, "token_budget=800 does not fit"),
        ({"token_limit": 30_000, "chat_history_token_ratio": 0.99, "token_budget": 800}, "does not fit"),
        ({"token_limit": 100}, "fewer than 50"),
    ],
)
def test_budget_that_cannot_fit_is_refused(engine, giulia, memory_kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        KorelyMemory.from_defaults(engine, giulia, **memory_kwargs)


async def test_full_block_and_long_chat_stay_within_token_limit(engine, giulia) -> None:
    for n in range(60):
        engine.remember(giulia, f"project-{n:02d}", f"Giulia looks after project number {n} in the northern region")
    token_limit = 1200
    memory = KorelyMemory.from_defaults(engine, giulia, token_limit=token_limit)
    budget = memory.korely_block.token_budget

    for n in range(40):
        await memory.aput(ChatMessage(role="user", content=f"Question {n}: " + "tell me about the region " * 8))
        await memory.aput(ChatMessage(role="assistant", content=f"Answer {n}: " + "the region is doing well " * 8))
        messages = await memory.aget()
        assert total_tokens(memory, messages) <= token_limit
        assert budget - 40 <= korely_tokens(memory, messages) <= budget
    assert len(await memory.aget_all(status=MessageStatus.ACTIVE)) < 80  # Memory did flush


async def test_block_gives_up_its_last_lines_when_one_turn_outgrows_the_history_share(engine, giulia) -> None:
    for n in range(60):
        engine.remember(giulia, f"project-{n:02d}", f"Giulia looks after project number {n} in the northern region")
    token_limit = 1200
    memory = KorelyMemory.from_defaults(engine, giulia, token_limit=token_limit)
    # One message alone over the history's share: Memory keeps it and truncates the block instead.
    question = "summarise the region " * 250
    await memory.aput(ChatMessage(role="user", content=question))
    history = len(memory.tokenizer_fn(question))
    assert 0.7 * token_limit < history < token_limit

    messages = await memory.aget()
    block_tokens = korely_tokens(memory, messages)
    assert 0 < block_tokens <= token_limit - history


async def test_truncation_drops_lines_from_the_end_and_keeps_change_notices(engine, giulia) -> None:
    block = KorelyMemoryBlock(engine=engine, identity=giulia)
    text = "\n".join(
        [
            "_Standing facts kept between conversations._",
            "",
            "## Changed since you last read",
            "- was: Giulia lives in Rome -> now: Giulia lives in Milan (2026-11-10, corrected)",
            "",
            "## Known facts",
            "- home-city: Giulia lives in Milan (since 2026-11-10)",
            "",
            "## Relevant memories",
            "- 2026-11-09: we talked about the northern region",
        ]
    )
    truncated = await block.atruncate(text, 5)
    assert truncated is not None
    assert truncated.endswith("- home-city: Giulia lives in Milan (since 2026-11-10)")
    truncated = await block.atruncate(text, 30)
    assert truncated is not None
    assert truncated.endswith("(2026-11-10, corrected)")
    assert await block.atruncate(text, 1000) is None
