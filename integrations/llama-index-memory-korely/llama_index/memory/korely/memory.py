"""A ready ``Memory`` with the korely block inside, sized to fit its token limit."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, cast

from llama_index.core.memory import Memory
from llama_index.core.memory.memory import DEFAULT_MEMORY_BLOCKS_TEMPLATE, DEFAULT_TOKEN_LIMIT
from llama_index.core.prompts import RichPromptTemplate

from korely_memory import Identity, MemoryEngine
from korely_memory.limits import MIN_BUDGET

from .block import DEFAULT_BLOCK_NAME, DEFAULT_TOKEN_BUDGET, KorelyMemoryBlock, frame_cost

DEFAULT_CHAT_HISTORY_TOKEN_RATIO: float = Memory.model_fields["chat_history_token_ratio"].default


class KorelyMemory(Memory):
    """A LlamaIndex ``Memory`` whose memory blocks include a :class:`KorelyMemoryBlock`.

    Build it with :meth:`from_defaults`; everything else is ``Memory``'s own
    behaviour (short-term chat history, flushing, insertion into the system message).
    """

    @classmethod
    def class_name(cls) -> str:
        return "KorelyMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        engine: MemoryEngine,
        identity: Identity,
        *,
        reader: str | None = None,
        token_budget: int | None = None,
        changes: str | list[str] | None = None,
        keep_flushed: bool = False,
        block_name: str = DEFAULT_BLOCK_NAME,
        **memory_kwargs: Any,
    ) -> KorelyMemory:
        """A ``Memory`` for one conversation of ``identity``, with its facts in the system message.

        Args:
            engine: the engine that keeps the facts.
            identity: whose memory it is (account, user, agent).
            reader: the reading agent's own name; set it to be told, once, of facts
                that changed since this agent last read them.
            token_budget: the most tokens the block may take. By default 800, or
                less when ``token_limit`` leaves less room. A read takes less still
                when the chat history has outgrown its share of ``token_limit``.
            changes: which kinds of change to tell (see ``MemoryEngine.get_context``).
            keep_flushed: keep messages flushed from the short-term queue as memories.
            block_name: the block's name, also its tag inside ``<memory>``.
            **memory_kwargs: passed to ``Memory.from_defaults`` (``session_id``,
                ``token_limit``, ``chat_history_token_ratio``, ``memory_blocks``, ...).

        Raises:
            ValueError: ``token_budget`` does not fit beside the chat history
                ``Memory`` keeps within ``token_limit``.
        """
        token_limit: int = memory_kwargs.get("token_limit", DEFAULT_TOKEN_LIMIT)
        ratio: float = memory_kwargs.get(
            "chat_history_token_ratio", DEFAULT_CHAT_HISTORY_TOKEN_RATIO
        )
        # Memory counts in the engine's tokens unless told otherwise, so that the
        # block's budget and Memory's limit are one unit.
        if memory_kwargs.get("tokenizer_fn") is None:
            memory_kwargs["tokenizer_fn"] = engine_tokenizer(engine)
        tokenizer_fn = memory_kwargs["tokenizer_fn"]
        template = memory_kwargs.get("memory_blocks_template", DEFAULT_MEMORY_BLOCKS_TEMPLATE)
        room = block_room(
            token_limit, ratio, tokenizer_fn=tokenizer_fn, template=template, block_name=block_name
        )
        if token_budget is None:
            if room < MIN_BUDGET:
                raise ValueError(
                    f"token_limit={token_limit} with chat_history_token_ratio={ratio} leaves "
                    f"{room} tokens for the memory block, fewer than {MIN_BUDGET}: "
                    "raise token_limit or lower the ratio"
                )
            token_budget = min(DEFAULT_TOKEN_BUDGET, room)
        elif token_budget > room:
            raise ValueError(
                f"token_budget={token_budget} does not fit: token_limit={token_limit} with "
                f"chat_history_token_ratio={ratio} leaves {room} tokens for the memory block"
            )
        block = KorelyMemoryBlock(
            name=block_name,
            engine=engine,
            identity=identity,
            reader=reader,
            token_budget=token_budget,
            changes=changes,
            accept_short_term_memory=keep_flushed,
            token_limit=token_limit,
            frame_tokens=frame_cost(template, block_name, tokenizer_fn),
            tokenizer_fn=tokenizer_fn,
        )
        memory_kwargs["memory_blocks"] = [block, *(memory_kwargs.get("memory_blocks") or [])]
        return cast(KorelyMemory, super().from_defaults(**memory_kwargs))

    @property
    def korely_block(self) -> KorelyMemoryBlock:
        """The korely block among this memory's blocks."""
        return next(block for block in self.memory_blocks if isinstance(block, KorelyMemoryBlock))


def engine_tokenizer(engine: MemoryEngine) -> Callable[[str], Sequence[int]]:
    """A ``tokenizer_fn`` for ``Memory`` that counts with the engine's tokenizer.

    ``Memory`` only takes the length of what it returns.
    """
    return lambda text: range(engine.count_tokens(text))


def block_room(
    token_limit: int,
    chat_history_token_ratio: float,
    *,
    tokenizer_fn: Callable[[str], Sequence[Any]],
    template: RichPromptTemplate = DEFAULT_MEMORY_BLOCKS_TEMPLATE,
    block_name: str = DEFAULT_BLOCK_NAME,
) -> int:
    """The most tokens a memory block can take beside a chat history within its share.

    ``Memory`` flushes its chat history down to ``token_limit * chat_history_token_ratio``;
    what is left, less the ``<memory>`` frame around the block, is the block's room.
    """
    history = math.floor(token_limit * chat_history_token_ratio)
    return token_limit - history - frame_cost(template, block_name, tokenizer_fn)
