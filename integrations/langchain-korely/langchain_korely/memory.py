"""`KorelyMemory`: the context block as a `langchain_classic` memory, for legacy chains.

Needs the `classic` extra (langchain-classic); from a checkout:
`pip install . "./integrations/langchain-korely[classic]"`.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import PrivateAttr

try:
    from langchain_classic.base_memory import BaseMemory
except ModuleNotFoundError as missing:  # the extra is not installed: say which one to install
    if missing.name != "langchain_classic":
        raise
    raise ModuleNotFoundError(
        "KorelyMemory needs langchain-classic, which the extra langchain-korely[classic] "
        'installs; from a checkout: `pip install . "./integrations/langchain-korely[classic]"`',
        name=missing.name,
    ) from missing

from korely_memory import Identity, InvalidRequest, MemoryEngine
from korely_memory.tools import exchange_memories

logger = logging.getLogger("langchain_korely")


class KorelyMemory(BaseMemory):
    """Loads the identity's context block into a chain's inputs.

    The block (facts, changes since this reader last read, relevant memories) is
    returned under `memory_key`, built with the user's message as the query. It
    takes the place of a conversation buffer: to keep the conversation too,
    combine it with one (`CombinedMemory`). Changes the block shows are held
    until `save_context`, which a chain calls once the model has answered: a
    chain call that fails leaves them to be told again. With `save_exchanges`,
    each exchange is also kept as memories, recalled by relevance later.

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
    """The input that is the user's message; needed when the chain has several inputs."""
    output_key: str | None = None
    """The output that is the answer, for `save_exchanges`; by default the only one, or `output`."""
    save_exchanges: bool = False
    """Keep each exchange as memories (`engine.add_memory`), split to the size a memory may have."""

    _receipt: str | None = PrivateAttr(default=None)

    @property
    def memory_variables(self) -> list[str]:
        """The one variable this memory adds: `memory_key`."""
        return [self.memory_key]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, str]:
        """Return the context block for these inputs under `memory_key`.

        Raises:
            InvalidRequest: The chain has several inputs and no `input_key` says
                which is the user's message (`field` is `input_key`).
        """
        block = self.engine.get_context(self.identity, **self._read_options(inputs))
        self._receipt = block.receipt
        return {self.memory_key: block.text}

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, str]:
        """Async twin of `load_memory_variables`."""
        block = await self.engine.aget_context(self.identity, **self._read_options(inputs))
        self._receipt = block.receipt
        return {self.memory_key: block.text}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """The chain answered: spend the changes shown, and keep the exchange if asked.

        Raises:
            InvalidRequest: Several inputs and no `input_key`, or several outputs
                and no `output_key` (`field` names which).
        """
        exchange = self._exchange(inputs, outputs) if self.save_exchanges else []
        receipt, self._receipt = self._receipt, None
        if receipt is not None:
            try:
                self.engine.acknowledge(receipt)
            except Exception:
                logger.warning("could not acknowledge a korely-memory block", exc_info=True)
        for piece in exchange:
            self.engine.add_memory(self.identity, piece)

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async twin of `save_context`."""
        exchange = self._exchange(inputs, outputs) if self.save_exchanges else []
        receipt, self._receipt = self._receipt, None
        if receipt is not None:
            try:
                await self.engine.aacknowledge(receipt)
            except Exception:
                logger.warning("could not acknowledge a korely-memory block", exc_info=True)
        for piece in exchange:
            await self.engine.aadd_memory(self.identity, piece)

    def clear(self) -> None:
        """Do nothing: facts outlive conversations.

        A new conversation needs no clearing. To drop facts, use the engine:
        `engine.forget(who, key)`, or `engine.erase_user(account, user)`.
        """

    def _read_options(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {
            "query": self._said(inputs) or None,
            "reader": self.reader,
            "token_budget": self.token_budget,
            "changes": self.changes,
            "hold": True,
        }

    def _said(self, inputs: dict[str, Any]) -> str:
        # LangChain's own memories' rule: the one input that is not a memory variable.
        if self.input_key is not None:
            return str(inputs.get(self.input_key) or "")
        keys = sorted(set(inputs) - {self.memory_key, "stop"})
        if len(keys) != 1:
            raise InvalidRequest(
                "input_key",
                f"the chain has {len(keys)} inputs ({', '.join(keys) or 'none'}); "
                "set input_key to the one that holds the user's message",
            )
        return str(inputs[keys[0]] or "")

    def _exchange(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> list[str]:
        answer = str(outputs[self._output_key(outputs)])
        return exchange_memories([("user", self._said(inputs)), ("assistant", answer)])

    def _output_key(self, outputs: dict[str, Any]) -> str:
        if self.output_key is not None:
            return self.output_key
        if len(outputs) == 1:
            return next(iter(outputs))
        if "output" in outputs:
            return "output"
        raise InvalidRequest(
            "output_key",
            f"the chain has several outputs ({', '.join(sorted(outputs))}); "
            "set output_key to the one that holds the answer",
        )
