"""`KorelyMiddleware`: memory for any `langchain.agents.create_agent` agent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

from korely_memory import Identity, MemoryEngine
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.types import Command
from typing_extensions import NotRequired

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

    Before the first model call of each invocation (one user turn), it asks the
    engine for the context block, with the latest user message as the query,
    and appends it to the agent's own system prompt. Later model calls of the
    same run reuse that block, so a "changed since you last read" notice is
    spent only on a prompt the model sees. It also registers the `remember`,
    `correct` and `forget` tools.

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
        """
        super().__init__()
        self.engine = engine
        self.reader = reader
        self.token_budget = token_budget
        self.changes = changes
        self.identity_from: IdentityResolver = identity_from or identity_from_context
        self.tools = korely_tools(engine, max_facts, identity_from=identity_from)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Call the model with the run's context block after the system prompt."""
        kept = request.state.get(_BLOCK)
        if isinstance(kept, str):
            return handler(_with_block(request, kept))
        read = self.engine.get_context(self._identity(request), **self._read_options(request))
        return _keep_for_run(handler(_with_block(request, read.text)), read.text)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        kept = request.state.get(_BLOCK)
        if isinstance(kept, str):
            return await handler(_with_block(request, kept))
        read = await self.engine.aget_context(
            self._identity(request), **self._read_options(request)
        )
        return _keep_for_run(await handler(_with_block(request, read.text)), read.text)

    def _identity(self, request: ModelRequest[Any]) -> Identity:
        return self.identity_from(request.runtime)

    def _read_options(self, request: ModelRequest[Any]) -> dict[str, Any]:
        return {
            "query": _latest_user_text(request.messages),
            "reader": self.reader,
            "token_budget": self.token_budget,
            "changes": self.changes,
        }


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


def _keep_for_run(response: ModelResponse[Any], block: str) -> ExtendedModelResponse[Any]:
    return ExtendedModelResponse(model_response=response, command=Command(update={_BLOCK: block}))
