"""`KorelyMemory`: the context block as a `langchain_classic` memory, for legacy chains.

Needs the `classic` extra (langchain-classic); from a checkout:
`pip install . "./integrations/langchain-korely[classic]"`.
"""

from __future__ import annotations

from typing import Any

from langchain_classic.base_memory import BaseMemory

from korely_memory import Identity, MemoryEngine
from korely_memory.limits import MAX_MEMORY


class KorelyMemory(BaseMemory):
    """Loads the identity's context block into a chain's inputs.

    The block (facts, changes since this reader last read, relevant memories) is
    returned under `memory_key`, built with the chain's input as the query. With
    `save_exchanges`, each exchange is also kept as a memory, recalled by
    relevance in later conversations.

    Example:
        ```python
        memory = KorelyMemory(engine=engine, identity=who, reader="support-bot")
        memory.load_memory_variables({"input": "Where do I live?"})["history"]
        ```
    """

    engine: MemoryEngine
    """The memory to read and write."""
    identity: Identity
    """Whose memory this is: a legacy chain has no run context, so it is fixed here."""
    reader: str | None = None
    """This chain's name as a reader; with one, changes to facts it read are told once."""
    token_budget: int = 800
    """The most tokens the block may take (50 to 8000)."""
    changes: str | list[str] | None = None
    """Which kinds of change to tell, as `engine.get_context` takes them."""
    memory_key: str = "history"
    """The input variable the block is put under."""
    input_key: str | None = None
    """The input that is the user's message; by default the only input that is not memory."""
    output_key: str | None = None
    """The output that is the answer, for `save_exchanges`; by default the only one, or `output`."""
    save_exchanges: bool = False
    """Keep each exchange as a memory (`engine.add_memory`)."""

    @property
    def memory_variables(self) -> list[str]:
        """The one variable this memory adds: `memory_key`."""
        return [self.memory_key]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, str]:
        """Return the context block for these inputs under `memory_key`."""
        block = self.engine.get_context(self.identity, **self._read_options(inputs))
        return {self.memory_key: block.text}

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, str]:
        """Async twin of `load_memory_variables`."""
        block = await self.engine.aget_context(self.identity, **self._read_options(inputs))
        return {self.memory_key: block.text}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Keep the exchange as a memory when `save_exchanges` is on."""
        if self.save_exchanges:
            self.engine.add_memory(self.identity, self._exchange(inputs, outputs))

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async twin of `save_context`."""
        if self.save_exchanges:
            await self.engine.aadd_memory(self.identity, self._exchange(inputs, outputs))

    def clear(self) -> None:
        """Do nothing: facts outlive conversations.

        A new conversation needs no clearing. To drop facts, use the engine:
        `engine.forget(who, key)`, or `engine.erase_user(account, user)`.
        """

    def _read_options(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {
            "query": self._query(inputs),
            "reader": self.reader,
            "token_budget": self.token_budget,
            "changes": self.changes,
        }

    def _query(self, inputs: dict[str, Any]) -> str | None:
        # The query only ranks facts and memories, so unclear inputs read without one.
        if self.input_key is not None:
            value = inputs.get(self.input_key)
        else:
            keys = set(inputs) - {self.memory_key, "stop"}
            value = inputs[keys.pop()] if len(keys) == 1 else None
        return str(value) if value else None

    def _exchange(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> str:
        said = self._query(inputs) or ""
        answer = outputs[self._output_key(outputs)]
        text = f"Human: {said}\nAI: {answer}"
        if len(text) > MAX_MEMORY:
            text = text[: MAX_MEMORY - 1] + "…"
        return text

    def _output_key(self, outputs: dict[str, Any]) -> str:
        if self.output_key is not None:
            return self.output_key
        if len(outputs) == 1:
            return next(iter(outputs))
        if "output" in outputs:
            return "output"
        msg = f"Got several outputs ({', '.join(sorted(outputs))}); set output_key to say which."
        raise ValueError(msg)
