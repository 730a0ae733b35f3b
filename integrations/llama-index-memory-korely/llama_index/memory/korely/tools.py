"""The memory tools (``korely_memory.tools.MEMORY_TOOLS``) as LlamaIndex ``FunctionTool``s.

Every tool of the engine's tuple is wrapped the same way, by its definition:
name, description, arguments, refusals and replies all come from the engine.
What this module adds is where a call's identity comes from: the memory of the
run (an agent hands its tools the workflow ``Context``, which holds the memory
passed to ``run``), or an identity fixed when the tools are made.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Callable
from typing import Any

from llama_index.core.async_utils import asyncio_run
from llama_index.core.bridge.pydantic import BaseModel, Field, create_model
from llama_index.core.memory import BaseMemory, Memory
from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput
from llama_index.core.workflow import Context

from korely_memory import Identity, InvalidRequest, MemoryEngine, limits
from korely_memory.tools import FORGET, MEMORY_TOOLS, MemoryTool, ToolArgument, ToolResult

from .block import KorelyMemoryBlock
from .memory import KorelyMemory

logger = logging.getLogger("llama_index.memory.korely")

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CONTEXT = "ctx"


def korely_tools(
    engine: MemoryEngine,
    identity: Identity | None = None,
    *,
    max_facts: int | None = None,
    tool_prefix: str = "",
) -> list[FunctionTool]:
    """The tools an agent uses to keep facts about the person it works for.

    Without ``identity`` (the usual way, and the only one for a server where one
    agent serves many people), each call writes for the identity of the run's
    memory: the ``KorelyMemory`` (or a ``Memory`` holding a ``KorelyMemoryBlock``)
    passed to ``agent.run(..., memory=...)``, with its reader name, so the agent
    is not told of its own writes. With ``identity``, the tools write for that
    identity and refuse a run whose memory belongs to someone else.

    The model fills in only the arguments of the tool's definition; a call naming
    anything else (a user, an account) writes nothing. A refused or failed call
    returns a ``ToolOutput`` with ``is_error=True`` and a sentence the model can act
    on; a database failure returns a neutral sentence (and is logged), never the
    driver's message.

    Args:
        engine: The engine that keeps the facts.
        identity: A fixed identity to write for; None to take it from each run's memory.
        max_facts: Refuse a new key once the identity keeps this many facts.
        tool_prefix: Put before every tool name (``"memory_"`` makes ``memory_forget``),
            when the agent has tools of its own with the same names: LlamaIndex keeps
            only the last tool of a name, silently.

    Returns:
        One ``FunctionTool`` per tool of ``MEMORY_TOOLS``, in its order. Each takes the
        workflow ``Context``, which a ``CodeActAgent`` does not hand over: give a code agent
        ``korely_functions(memory)`` instead.

    Raises:
        InvalidRequest: A bad identity, ``max_facts`` or ``tool_prefix``.
    """
    if identity is not None:
        identity = limits.check_identity(identity)
    _check_options(max_facts, tool_prefix)
    return [
        _KorelyTool(engine, tool, tool_prefix + tool.name, identity, max_facts)
        for tool in MEMORY_TOOLS
    ]


def korely_functions(
    memory: KorelyMemory, *, max_facts: int | None = None, tool_prefix: str = ""
) -> list[Callable[..., str]]:
    """The memory tools as plain functions, for agents that run code (``CodeActAgent``).

    A ``CodeActAgent`` refuses tools that take the workflow ``Context``, as
    ``korely_tools`` do, and the code it writes calls the functions of its code
    executor, which never see a run. These functions are bound to one
    conversation's memory instead: they write for its identity, with its reader
    name, and tell it of each write as the tools do. Build them, the executor and
    the agent per conversation, and pass the same memory to ``agent.run``.

    Each function is named as its tool (with ``tool_prefix``), takes the tool's
    arguments by name, and returns the tool's sentence: a refused or failed call
    returns the refusal (``Not saved: ...``), never raises for the model's input.
    A call while the memory has no turn open (its run has not read it, or has
    answered) is refused: the run it comes from reads another memory.

    Args:
        memory: The conversation's memory.
        max_facts: Refuse a new key once the identity keeps this many facts.
        tool_prefix: Put before every function name.

    Returns:
        One function per tool of ``MEMORY_TOOLS``, in its order.

    Raises:
        InvalidRequest: ``memory`` is no ``KorelyMemory``, or a bad ``max_facts`` or
            ``tool_prefix``.
    """
    if not isinstance(memory, KorelyMemory):
        raise InvalidRequest("memory", "must be a KorelyMemory, the conversation's memory")
    _check_options(max_facts, tool_prefix)
    return [_function(memory, tool, tool_prefix + tool.name, max_facts) for tool in MEMORY_TOOLS]


def _function(
    memory: KorelyMemory, tool: MemoryTool, name: str, max_facts: int | None
) -> Callable[..., str]:
    def call(*args: Any, **arguments: Any) -> str:
        if args:
            return f"{tool.refusal}: this tool takes named arguments only."
        if not memory.in_turn:
            # The memory has no turn open: the run the model works in reads another memory
            # (or none), whose person these functions would write for in the wrong place.
            logger.error(
                "the %s function is bound to the memory of %s, which has no turn open: refused "
                "(build korely_functions, the executor and the agent per conversation, from the "
                "memory passed to agent.run)",
                name,
                memory.korely_block.identity,
            )
            return (
                f"{tool.refusal}: these functions serve the memory they were made from, which is "
                "not the memory of this conversation (they are made per conversation), so "
                "nothing was done."
            )
        block = memory.korely_block
        result = tool.run(
            block.engine, block.identity, arguments, reader=block.reader, max_facts=max_facts
        )
        erasing = tool is FORGET and arguments.get("erase") not in (None, False)
        if erasing or (result.ok and tool.writes):
            memory.written(erased=erasing)
        return result.text

    call.__name__ = call.__qualname__ = name
    call.__doc__ = tool.description + "".join(
        f"\n\n{a.name}: {a.description}" for a in tool.arguments
    )
    parameters = [
        inspect.Parameter(
            a.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=a.kind if a.required else a.kind | None,
            **({} if a.required else {"default": a.default}),
        )
        for a in tool.arguments
    ]
    call.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    return call


def _check_options(max_facts: int | None, tool_prefix: str) -> None:
    limits.check_max_facts(max_facts)
    if not isinstance(tool_prefix, str) or not all(
        _TOOL_NAME.fullmatch(tool_prefix + tool.name) for tool in MEMORY_TOOLS
    ):
        raise InvalidRequest(
            "tool_prefix",
            "must make tool names of at most 64 letters, digits, '_' and '-', "
            f"got {tool_prefix!r:.40}",
        )


class _KorelyTool(FunctionTool):
    """One memory tool: the engine's definition, the identity from the run."""

    def __init__(
        self,
        engine: MemoryEngine,
        tool: MemoryTool,
        name: str,
        identity: Identity | None,
        max_facts: int | None,
    ) -> None:
        self._engine = engine
        self._tool = tool
        self._identity = identity
        self._max_facts = max_facts

        async def run(**arguments: Any) -> ToolOutput:
            return await self.acall(**arguments)

        # Declared so that agents hand the tool their workflow Context; the model never sees it.
        run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter(_CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=Context),
                inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD),
            ]
        )
        metadata = ToolMetadata(
            name=name, description=tool.description, fn_schema=_schema(name, tool.arguments)
        )
        super().__init__(async_fn=run, metadata=metadata)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Run the call: the run's context (if any) says whose memory it is."""
        ctx = kwargs.pop(_CONTEXT, None)
        memory = await ctx.store.get("memory", default=None) if ctx is not None else None
        whose = self._whose(memory)
        if isinstance(whose, ToolResult):
            return self._output(whose, kwargs)
        if args:
            return self._output(self._positional(), kwargs)
        who, reader = whose
        result = await asyncio.to_thread(
            self._tool.run, self._engine, who, kwargs, reader=reader, max_facts=self._max_facts
        )
        if isinstance(memory, KorelyMemory):
            erasing = self._tool is FORGET and kwargs.get("erase") not in (None, False)
            if erasing or (result.ok and self._tool.writes):
                memory.written(erased=erasing)
        return self._output(result, kwargs)

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """The same call, from synchronous code."""
        if kwargs.get(_CONTEXT) is not None:
            output: ToolOutput = asyncio_run(self.acall(*args, **kwargs))
            return output
        kwargs.pop(_CONTEXT, None)
        whose = self._whose(None)
        if isinstance(whose, ToolResult):
            return self._output(whose, kwargs)
        if args:
            return self._output(self._positional(), kwargs)
        who, reader = whose
        result = self._tool.run(self._engine, who, kwargs, reader=reader, max_facts=self._max_facts)
        return self._output(result, kwargs)

    def _whose(self, memory: BaseMemory | None) -> tuple[Identity, str | None] | ToolResult:
        """The identity and reader a call writes for, or the refusal when there is none."""
        blocks = korely_blocks(memory)
        identities = {block.identity for block in blocks}
        refusal = self._tool.refusal
        if self._identity is not None:
            if identities and identities != {self._identity}:
                return self._not_bound_to(identities)
            reader = next((b.reader for b in blocks if b.identity == self._identity), None)
            return self._identity, reader
        if len(identities) == 1:
            return blocks[0].identity, blocks[0].reader
        logger.error(
            "the %s tool found %s korely memory in its run: refused (pass memory=KorelyMemory "
            "to agent.run, or give korely_tools an identity)",
            self.metadata.name,
            "more than one" if identities else "no",
        )
        said = "more than one person's memory" if identities else "no memory of a person"
        return ToolResult(
            f"{refusal}: this conversation has {said} to write to, so nothing was written.",
            ok=False,
        )

    def _not_bound_to(self, identities: set[Identity]) -> ToolResult:
        """The refusal of a run whose memory is not of the identity the tools were made for."""
        mine = self._identity
        assert mine is not None
        same_person = all((i.account, i.user) == (mine.account, mine.user) for i in identities)
        if same_person:
            # An AgentWorkflow has one memory for all its agents: tools made for another agent
            # definition of the person would write where no block of this run reads.
            logger.error(
                "the %s tool is bound to agent %r but the run's memory is of agent %s: refused. "
                "One workflow run has one memory, so its agents share its identity: give them "
                "korely_tools(engine) without an identity (they write to the run's memory), or "
                "run an agent that needs a memory of its own in a run of its own, with its own "
                "KorelyMemory (an agent can call such a run as a tool)",
                self.metadata.name,
                mine.agent,
                ", ".join(sorted(repr(i.agent) for i in identities)),
            )
            said = "another agent"
        else:
            logger.error(
                "the %s tool is bound to %s but the run's memory belongs to %s: refused",
                self.metadata.name,
                mine,
                ", ".join(sorted(map(str, identities))),
            )
            said = "another person"
        return ToolResult(
            f"{self._tool.refusal}: these memory tools were made for {said} than the one this "
            "conversation's memory belongs to, so nothing was written.",
            ok=False,
        )

    def _positional(self) -> ToolResult:
        return ToolResult(f"{self._tool.refusal}: this tool takes named arguments only.", ok=False)

    def _output(self, result: ToolResult, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(
            content=result.text,
            tool_name=self.metadata.get_name(),
            raw_input={"kwargs": arguments},
            raw_output=result.text,
            is_error=not result.ok,
        )


def korely_blocks(memory: BaseMemory | None) -> list[KorelyMemoryBlock]:
    """The korely blocks of a run's memory: its ``KorelyMemory``'s, or a ``Memory``'s."""
    if isinstance(memory, KorelyMemory):
        return [memory.korely_block]
    if isinstance(memory, Memory):
        return [b for b in memory.memory_blocks if isinstance(b, KorelyMemoryBlock)]
    return []


def _schema(name: str, arguments: tuple[ToolArgument, ...]) -> type[BaseModel]:
    """The schema the model fills in: the definition's arguments, nothing else."""
    fields: dict[str, Any] = {}
    for argument in arguments:
        if argument.required:
            fields[argument.name] = (argument.kind, Field(description=argument.description))
        else:
            kind: Any = argument.kind if argument.default is not None else argument.kind | None
            fields[argument.name] = (
                kind,
                Field(default=argument.default, description=argument.description),
            )
    return create_model(name, **fields)
