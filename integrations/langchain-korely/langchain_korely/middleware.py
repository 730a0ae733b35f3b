"""`KorelyMiddleware`: memory for any `langchain.agents.create_agent` agent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.runtime import Runtime
from typing_extensions import NotRequired

from korely_memory import MemoryEngine
from korely_memory import limits
from langchain_korely._identity import IdentityResolver, identity_from_context
from langchain_korely.tools import korely_tools

_BLOCK = "korely_context"


class KorelyState(AgentState[Any]):
    """Agent state with the context block of the current run.

    The block lives in an untracked channel: it lasts for one invocation of the
    agent, is never checkpointed, and belongs to that run alone.
    """

    korely_context: NotRequired[Annotated[str, UntrackedValue, PrivateStateAttr]]


class KorelyMiddleware(AgentMiddleware[KorelyState, Any]):
    """Puts the identity's memory into the system prompt and gives the agent its tools.

    When an invocation (one user turn) starts, it asks the engine for the
    context block once, with the latest user message as the query, and keeps
    it in the run's state; every model call of that run, retries included,
    gets the same block after the agent's own system prompt. A "changed since
    you last read" notice is thus in every prompt of the run that reads it,
    whatever other middleware does around the model call. It also registers
    the `remember`, `correct` and `forget` tools.

    Example:
        ```python
        from korely_memory import Identity, MemoryEngine
        from langchain.agents import create_agent
        from langchain_korely import KorelyMiddleware

        engine = MemoryEngine()
        agent = create_agent(model, system_prompt="You are a support agent.",
                             middleware=[KorelyMiddleware(engine, reader="support-bot")])
        who = Identity(account="acme", user="giulia", agent="support-copilot")
        agent.invoke({"messages": [("user", "Where do I live?")]}, context=who)
        ```
    """

    state_schema = KorelyState

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        reader: str | None = None,
        token_budget: int = 800,
        changes: str | Sequence[str] | None = None,
        max_facts: int | None = None,
        identity_from: IdentityResolver | None = None,
    ) -> None:
        """Configure the middleware.

        Args:
            engine: The memory to read and write.
            reader: This agent's own name as a reader. With a reader, the engine
                keeps what it handed over and tells the agent, once, when a fact
                it read has changed. Without one, no notices are told.
            token_budget: The most tokens the block may take (50 to 8000).
            changes: Which kinds of change to tell, as `engine.get_context` takes
                them (`None`: the engine's default; `"all"`: every kind).
            max_facts: Ceiling passed to the `remember` tool.
            identity_from: Where the identity comes from, given the run's
                runtime; by default the run's context
                (`agent.invoke(..., context=Identity(...))`).

        Raises:
            InvalidRequest: `reader`, `token_budget` or `changes` is not one the
                engine takes; `field` names which.
        """
        super().__init__()
        limits.check_reader(reader)
        limits.check_token_budget(token_budget)
        limits.check_changes(changes)
        self.engine = engine
        self.reader = reader
        self.token_budget = token_budget
        self.changes = changes
        self.identity_from: IdentityResolver = identity_from or identity_from_context
        self.tools = korely_tools(engine, max_facts, identity_from=identity_from)

    def before_agent(self, state: KorelyState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Read the block for this invocation and keep it in the run's state."""
        return {_BLOCK: self._read(state["messages"], runtime)}

    async def abefore_agent(self, state: KorelyState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Async twin of `before_agent`."""
        return await asyncio.to_thread(self.before_agent, state, runtime)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Call the model with the run's block after the system prompt."""
        block = _kept(request)
        if block is None:
            block = self._read(request.messages, request.runtime)
        return handler(_with_block(request, block))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        block = _kept(request)
        if block is None:
            block = await asyncio.to_thread(self._read, request.messages, request.runtime)
        return await handler(_with_block(request, block))

    def _read(self, messages: Sequence[AnyMessage], runtime: Runtime[Any]) -> str:
        return self.engine.get_context(
            self.identity_from(runtime),
            _latest_user_text(messages),
            reader=self.reader,
            token_budget=self.token_budget,
            changes=self.changes,
        ).text


def _kept(request: ModelRequest[Any]) -> str | None:
    # The state lacks the block only in a run resumed after an interrupt: it is
    # not checkpointed, so each model call of such a run reads it anew.
    block = request.state.get(_BLOCK)
    return block if isinstance(block, str) else None


def _latest_user_text(messages: Sequence[AnyMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text or None
    return None


def _with_block(request: ModelRequest[Any], block: str) -> ModelRequest[Any]:
    system = request.system_message
    if system is None:
        return request.override(system_message=SystemMessage(content=block))
    content = system.content
    if isinstance(content, str):
        merged: str | list[str | dict[str, Any]] = f"{content}\n\n{block}" if content else block
    else:
        # Content blocks (e.g. with cache markers) stay as they are; ours goes last.
        merged = [*content, {"type": "text", "text": block}]
    return request.override(system_message=system.model_copy(update={"content": merged}))
