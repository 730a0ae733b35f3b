"""The server's tools: `korely_get_context`, `korely_get_facts`, and one `korely_<name>` tool
for each of the engine's memory tools (`korely_memory.tools.MEMORY_TOOLS`).

    from korely_memory import Identity, MemoryEngine
    from korely_mcp import Caller, KorelyTools

    tools = KorelyTools(MemoryEngine())
    caller = Caller(Identity("acme", "giulia", "support-copilot"), reader="giulia-laptop")
    result = await tools.call(caller, "korely_remember", {"key": "home-city", "content": "..."})

No tool takes an account, a user or an agent: the `Caller` of every call comes from the
server's configuration (stdio) or from the bearer token (HTTP). A refused call is an MCP
tool error (``isError``) whose text is the engine's sentence, so a model can act on it.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from mcp import types

from korely_memory import Identity, MemoryEngine, limits
from korely_memory import tools as engine_tools
from korely_memory.tools import MEMORY_TOOLS, MemoryTool

from . import _reads
from ._held import HeldNotices
from ._reads import GET_CONTEXT, GET_FACTS, Reply
from ._subscribers import Subscribers

__all__ = ["PREFIX", "Caller", "KorelyTools"]

logger = logging.getLogger("korely_mcp")

PREFIX = _reads.PREFIX
"""What the server puts before an engine tool's name (``remember`` -> ``korely_remember``)."""

TITLES = {
    GET_CONTEXT: "Read what is kept about the person",
    GET_FACTS: "List the kept facts",
    "remember": "Remember a fact",
    "correct": "Correct a fact",
    "forget": "Forget a fact",
    "recall": "Search the memory",
}
"""The title a client shows for each tool (an engine tool not named here: its name)."""
DESTRUCTIVE = frozenset({"forget"})
"""The engine tools whose calls remove what was kept. ``remember`` and ``correct`` keep the
version they replace as history: their changes only add."""


@dataclass(frozen=True)
class Caller:
    """Whose memory a call works on, and the reader name it reads under.

    Attributes:
        who: The identity (account, user, agent).
        reader: The client's name as a reader: it is told once of changes to facts it read.
        name: Whose calls acknowledge its held notices: one per client (a token's name over
            HTTP). Two clients with one name would acknowledge each other's notices.
        any_user: The token serves every user of the account (an application's backend,
            which names the user in each request to the REST server); ``who.user`` is None.
            MCP tools work for one person and refuse such a caller.
        admin: The token's user administers the account: the REST server lets it review
            proposals and reach every user of the account.
    """

    who: Identity
    reader: str
    name: str = "stdio"
    any_user: bool = False
    admin: bool = False


class KorelyTools:
    """The tools one server offers, over one engine.

    Args:
        engine: The memory.
        token_budget: The budget of a block when the model gives none.
        hold: How long a block's changes are held for the caller's next call (seconds or
            a ``timedelta``); None or 0 spends them as the block is read.
        max_facts: Refuse a new key once an identity holds this many facts.
        memory_tools: The engine's tools to offer, each as ``korely_<name>``.

    Raises:
        InvalidRequest: ``token_budget``, ``hold`` or ``max_facts`` breaks the engine's rule.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        token_budget: int = limits.DEFAULT_BUDGET,
        hold: float | dt.timedelta | None = limits.DEFAULT_HOLD,
        max_facts: int | None = None,
        memory_tools: Sequence[MemoryTool] = MEMORY_TOOLS,
    ) -> None:
        self.engine = engine
        self.token_budget = limits.check_token_budget(token_budget)
        self.hold = limits.check_hold(hold) if hold else None
        self.max_facts = limits.check_max_facts(max_facts)
        self.held = HeldNotices(engine)
        self.subscribers = Subscribers()
        """The clients told when a tool here changes the memory they read."""
        self._memory_tools = {PREFIX + tool.name: tool for tool in memory_tools}

    def definitions(self) -> list[types.Tool]:
        """The tools as `tools/list` gives them."""

        def reading(title: str) -> types.ToolAnnotations:
            return types.ToolAnnotations(title=title, read_only_hint=True, open_world_hint=False)

        return [
            types.Tool(
                name=GET_CONTEXT,
                title=TITLES[GET_CONTEXT],
                description=_reads.CONTEXT_DESCRIPTION,
                input_schema=_object(_reads.CONTEXT_ARGUMENTS, required=[]),
                output_schema=_reads.CONTEXT_OUTPUT,
                annotations=reading(TITLES[GET_CONTEXT]),
            ),
            types.Tool(
                name=GET_FACTS,
                title=TITLES[GET_FACTS],
                description=_reads.FACTS_DESCRIPTION,
                input_schema=_object(_reads.FACTS_ARGUMENTS, required=[]),
                output_schema=_reads.FACTS_OUTPUT,
                annotations=reading(TITLES[GET_FACTS]),
            ),
            *(_definition(name, tool) for name, tool in self._memory_tools.items()),
        ]

    async def call(
        self, caller: Caller, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        """Run one `tools/call` of ``caller``'s.

        The call first acknowledges the notices ``caller``'s earlier blocks held: it has
        them, since it calls again.

        Raises:
            InvalidRequest: ``caller`` is not a valid identity or reader (the operator's
                mistake, checked when the server starts).
        """
        await self.held.acknowledge(caller.name)
        arguments = arguments or {}
        if name == GET_CONTEXT:
            reply = await self._get_context(caller, arguments)
        elif name == GET_FACTS:
            reply = await self._get_facts(caller, arguments)
        elif name in self._memory_tools:
            reply = await self._run(self._memory_tools[name], caller, arguments)
        else:
            known = ", ".join(t.name for t in self.definitions())
            reply = Reply(f"There is no tool named {name!r}; the tools are {known}.", ok=False)
        if reply.receipt is not None:
            self.held.keep(caller.name, reply.receipt)
        if reply.wrote:
            await self.subscribers.changed(caller.who)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=reply.text)],
            structured_content=reply.structured,
            is_error=not reply.ok,
        )

    async def read_context(self, caller: Caller) -> Reply:
        """The caller's block with the server's default budget and no query, as the
        ``korely://context`` resource gives it.

        A read of the resource may be the client's own, on a change notice, with no model
        involved: it spends no notice held for the caller, and the notices it shows are
        held like a tool's, for the caller's next tool call; a clean end of a stdio
        session releases them rather than spend them.
        """
        reply = await self._get_context(caller, {})
        if reply.receipt is not None:
            self.held.keep(caller.name, reply.receipt, client_read=True)
        return reply

    async def _get_context(self, caller: Caller, arguments: Mapping[str, Any]) -> Reply:
        read = functools.partial(
            engine_tools.get_context,
            self.engine,
            caller.who,
            arguments,
            reader=caller.reader,
            token_budget=self.token_budget,
            hold=self.hold,
        )
        return _reads.reply(await anyio.to_thread.run_sync(read))

    async def _get_facts(self, caller: Caller, arguments: Mapping[str, Any]) -> Reply:
        # With the reader, the facts handed over are marked: a change to one is told later.
        # Every fact the read finds is marked, those of later pages too: a change to one the
        # model did not page to is told all the same (told once too often, never missed).
        read = functools.partial(
            engine_tools.get_facts,
            self.engine,
            caller.who,
            arguments,
            reader=caller.reader,
            prefix=PREFIX,
        )
        return _reads.reply(await anyio.to_thread.run_sync(read))

    async def _run(self, tool: MemoryTool, caller: Caller, arguments: Mapping[str, Any]) -> Reply:
        run = functools.partial(
            tool.run,
            self.engine,
            caller.who,
            arguments,
            reader=caller.reader,
            max_facts=self.max_facts,
        )
        return _reads.reply(await anyio.to_thread.run_sync(run), wrote=tool.writes)


def _definition(name: str, tool: MemoryTool) -> types.Tool:
    arguments = {
        a.name: {"type": "boolean" if a.kind is bool else "string", "description": a.description}
        for a in tool.arguments
    }
    required = [a.name for a in tool.arguments if a.required]
    title = TITLES.get(tool.name, tool.name.replace("_", " ").capitalize())
    return types.Tool(
        name=name,
        title=title,
        description=tool.description,
        input_schema=_object(arguments, required=required),
        annotations=types.ToolAnnotations(
            title=title,
            read_only_hint=not tool.writes,
            # Meaningful only for a tool that writes (the hint's default there is True).
            destructive_hint=tool.name in DESTRUCTIVE if tool.writes else None,
            open_world_hint=False,
        ),
    )


def _object(properties: Mapping[str, Any], *, required: list[str]) -> dict[str, Any]:
    # additionalProperties: false tells the model what the tools check anyway: an argument
    # besides these (an account, a user) is refused, never used.
    return {
        "type": "object",
        "properties": dict(properties),
        "required": required,
        "additionalProperties": False,
    }
