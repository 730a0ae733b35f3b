"""Token arithmetic shared by the block and the memory: frames, history, room."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.memory.memory import DEFAULT_MEMORY_BLOCKS_TEMPLATE
from llama_index.core.prompts import RichPromptTemplate

from korely_memory import MemoryEngine, framing

DEFAULT_BLOCK_NAME = "korely"
Tokenizer = Callable[[str], Sequence[Any]]

# How a block's text may end, besides the sample's own ending: tokens can merge across the
# frame's edge, so each is measured.
_LAST_CHARACTERS = ("", "x", "7", ")", "…", ".", "?!", "é")


def engine_tokenizer(engine: MemoryEngine) -> Tokenizer:
    """A ``tokenizer_fn`` for ``Memory`` that counts with the engine's tokenizer.

    ``Memory`` only takes the length of what it returns, so the block's budget
    and the memory's ``token_limit`` are in the same tokens.

    Args:
        engine: The engine whose ``count_tokens`` to use.

    Returns:
        A function from a text to a sequence as long as its token count.
    """
    return lambda text: range(engine.count_tokens(text))


def frame(template: RichPromptTemplate, block_name: str, text: str) -> list[TextBlock]:
    """``text`` framed by ``template`` as ``Memory`` frames a block (``<memory><korely>``).

    LlamaIndex compiles a template's Jinja source each time it renders it (several
    milliseconds); a template that only inserts the text is rendered once per process and
    block name, and its frame put around each text.
    """
    parts = _frame_of(template.template_str, block_name) if _plain(template, text) else None
    if parts is None:
        return _render(template, block_name, text)
    return [
        TextBlock(text=before if after is None else before + text + after)
        for before, after in parts
    ]


def _render(template: RichPromptTemplate, block_name: str, text: str) -> list[TextBlock]:
    messages = template.format_messages(memory_blocks=[(block_name, [TextBlock(text=text)])])
    return [b for b in messages[0].blocks if isinstance(b, TextBlock)] if messages else []


def _plain(template: RichPromptTemplate, text: str) -> bool:
    """Whether ``template`` renders from its source alone, and ``text`` has no edge to trim."""
    return (
        type(template) is RichPromptTemplate
        and not template.kwargs
        and not template.function_mappings
        and not template.template_var_mappings
        and text != ""
        and text == text.strip()
    )


# Texts no block holds, one of them with what a template might escape.
_PROBES = ("\ue000korely-frame\ue001", '\ue000<korely & "frame">\n{{ x }}\ue001')


@functools.lru_cache(maxsize=64)
def _frame_of(template_str: str, block_name: str) -> tuple[tuple[str, str | None], ...] | None:
    """What a template puts before and after a block's text in each text part it renders (a part
    without the text: itself, and None); None when it does anything else with the text."""
    template = RichPromptTemplate(template_str)
    probe, check = _PROBES
    parts: list[tuple[str, str | None]] = []
    for block in _render(template, block_name, probe):
        pieces = block.text.split(probe)
        if len(pieces) > 2 or check in block.text:
            return None
        parts.append((pieces[0], pieces[1]) if len(pieces) == 2 else (pieces[0], None))
    expected = [before if after is None else before + check + after for before, after in parts]
    if [b.text for b in _render(template, block_name, check)] != expected:
        return None
    return tuple(parts)


def frame_cost(template: RichPromptTemplate, block_name: str, tokenizer_fn: Tokenizer) -> int:
    """The most tokens ``template`` adds around a block's text, whatever character it ends in."""
    sample = framing.sample_text()

    def added(text: str) -> int:
        framed = sum(len(tokenizer_fn(b.text)) for b in frame(template, block_name, text))
        return framed - len(tokenizer_fn(text))

    return max(added(sample + last) for last in _LAST_CHARACTERS)


def history_cost(messages: Sequence[ChatMessage], tokenizer_fn: Tokenizer) -> int:
    """The messages' tokens as ``Memory`` counts them: text blocks and additional kwargs.

    Images, audio and other media, which ``Memory`` counts by estimate, are not counted.
    """
    total = 0
    for message in messages:
        if message.additional_kwargs:
            total += len(tokenizer_fn(str(message.additional_kwargs)))
        for block in message.blocks:
            if isinstance(block, TextBlock):
                total += len(tokenizer_fn(block.text))
    return total


def block_room(
    token_limit: int,
    chat_history_token_ratio: float,
    *,
    tokenizer_fn: Tokenizer,
    template: RichPromptTemplate = DEFAULT_MEMORY_BLOCKS_TEMPLATE,
    block_name: str = DEFAULT_BLOCK_NAME,
    frames: int = 1,
) -> int:
    """The most tokens a block can take beside a chat history that fills its share.

    ``Memory`` flushes its chat history down to ``token_limit * chat_history_token_ratio``;
    what is left, less the frames around the block, is the block's room.

    Args:
        token_limit: The memory's ``token_limit``.
        chat_history_token_ratio: The memory's ``chat_history_token_ratio``.
        tokenizer_fn: The memory's ``tokenizer_fn``.
        template: The memory's ``memory_blocks_template``.
        block_name: The block's name (its tag in the frame).
        frames: How many frames the block is split into: 1 for a ``KorelyMemoryBlock`` in a
            ``Memory`` of your own, 2 in a ``KorelyMemory`` (the stable note and the rest).

    Returns:
        The room in tokens (negative when the frames alone do not fit).
    """
    history = math.floor(token_limit * chat_history_token_ratio)
    return token_limit - history - frames * frame_cost(template, block_name, tokenizer_fn)
