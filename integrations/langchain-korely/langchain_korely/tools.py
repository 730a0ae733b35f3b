"""The memory tools as LangChain tools: one `KorelyTool` wraps any `MemoryTool` of the engine.

The names, descriptions, arguments, sentences and refusals are the engine's
(`korely_memory.tools.MEMORY_TOOLS`); this module only gives them LangChain's
form. Whose memory a call writes is never the model's to say: it is fixed when
the tools are made (`identity=`), or taken from the LangGraph run the call
belongs to (`ToolRuntime`, injected by the agent, invisible to the model).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

from langchain_core.tools import BaseTool, InjectedToolArg, ToolException
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, create_model

from korely_memory import Identity, InvalidRequest, MemoryEngine, limits
from korely_memory.tools import CORRECT, FORGET, MEMORY_TOOLS, REMEMBER, MemoryTool
from langchain_korely._identity import IdentityResolver, resolver_for

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What every provider takes as a tool name (OpenAI's rule is the narrowest)."""


class KorelyTool(BaseTool):
    """One memory tool of the engine (`korely_memory.tools.MemoryTool`) as a LangChain tool.

    A call the engine refuses (a bad key, no fact to correct, the `max_facts`
    ceiling, an argument the tool does not take) reaches the model as a
    `ToolMessage` with `status="error"` and the engine's sentence; a database
    failure as a neutral sentence, never the driver's text.

    Example:
        ```python
        from korely_memory.tools import REMEMBER

        tool = KorelyTool(definition=REMEMBER, engine=engine, identity=who)
        tool.invoke({"key": "home-city", "content": "Giulia lives in Milan"})
        ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    default_definition: ClassVar[MemoryTool | None] = None
    """The definition a subclass wraps when none is given."""

    definition: MemoryTool
    """The engine's tool this wraps."""
    engine: MemoryEngine
    """The memory the tool writes to."""
    identity: Identity | None = None
    """Whose memory the tool writes, fixed; None: taken from the run."""
    identity_from: IdentityResolver | None = None
    """Where the identity comes from when it is taken from the run; by default its context."""
    reader: str | None = None
    """The agent's reader name: the agent is not told its own writes."""
    max_facts: int | None = None
    """Refuse a new key once the identity holds this many facts (None: no ceiling)."""
    handle_tool_error: bool = True
    """A refusal is the tool's answer (an error `ToolMessage`), not an exception."""

    _written: Callable[[Any], None] | None = PrivateAttr(default=None)

    def __init__(self, **fields: Any) -> None:
        """Make the tool.

        Args:
            **fields: `definition` (a `MemoryTool`; the subclass's own by default),
                `engine`, and either `identity` (fixed) or `identity_from` (a
                resolver given the run; by default the run's context), `reader`,
                `max_facts`; `name` and `description` default to the definition's.

        Raises:
            InvalidRequest: A bad `identity`, `reader`, `max_facts` or `name`, or both
                `identity` and `identity_from`; `field` names which.
        """
        definition = fields.setdefault("definition", self.default_definition)
        if not isinstance(definition, MemoryTool):
            raise InvalidRequest("definition", "must be a MemoryTool of korely_memory.tools")
        _check_options(
            fields.get("identity"),
            fields.get("identity_from"),
            fields.get("reader"),
            fields.get("max_facts"),
        )
        name = fields.setdefault("name", definition.name)
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise InvalidRequest(
                "name", f"must be 1 to 64 letters, digits, '_' or '-', not {name!r:.80}"
            )
        fields.setdefault("description", definition.description)
        fields.setdefault(
            "args_schema", arguments_model(definition, from_run=fields.get("identity") is None)
        )
        super().__init__(**fields)

    def _run(self, runtime: ToolRuntime[Any, Any] | None = None, **arguments: Any) -> str:
        # One body: `ainvoke` runs it in a worker thread (BaseTool's own `_arun`).
        if self.identity is not None:
            who = self.identity
            if runtime is not None:  # sent by the caller: an argument like any other
                arguments["runtime"] = runtime
        elif runtime is None:
            raise InvalidRequest(
                "identity",
                f"the {self.name} tool takes its identity from the LangGraph run it is called "
                "in, and this call has none (a direct tool.invoke, a classic AgentExecutor). "
                "Outside an agent run, make the tools with a fixed identity: "
                "korely_tools(engine, identity=Identity(account=..., user=..., agent=...)).",
            )
        else:
            who = resolver_for(self.engine, self.identity_from)(runtime)
        result = self.definition.run(
            self.engine, who, arguments, reader=self.reader, max_facts=self.max_facts
        )
        if not result.ok:
            raise ToolException(result.text)
        if self.definition.writes and self._written is not None and runtime is not None:
            self._written(runtime)
        return result.text


class KorelyRemember(KorelyTool):
    """`remember`: records a fact to keep between conversations (see `KorelyTool`)."""

    default_definition: ClassVar[MemoryTool | None] = REMEMBER


class KorelyCorrect(KorelyTool):
    """`correct`: replaces the fact under a key; the old version stays as history."""

    default_definition: ClassVar[MemoryTool | None] = CORRECT


class KorelyForget(KorelyTool):
    """`forget`: ends the fact under a key; with `erase`, removes its words too."""

    default_definition: ClassVar[MemoryTool | None] = FORGET


def korely_tools(
    engine: MemoryEngine,
    max_facts: int | None = None,
    *,
    identity: Identity | None = None,
    identity_from: IdentityResolver | None = None,
    reader: str | None = None,
    tool_prefix: str = "",
) -> list[KorelyTool]:
    """The engine's memory tools (`MEMORY_TOOLS`: remember, correct, forget, ...), for LangChain.

    Args:
        engine: The memory to write to.
        max_facts: Refuse a new key once the identity holds this many facts;
            the model is told to correct or forget one instead.
        identity: Whose memory the tools write, fixed. The tools then need no
            LangGraph run: a direct `tool.invoke`, a classic `AgentExecutor`.
        identity_from: Without `identity`, where the run's identity comes from
            (called with the `ToolRuntime`); by default the run's context
            (`agent.invoke(..., context=Identity(...))`).
        reader: The agent's reader name, passed to every write: the agent is not
            told its own changes, and is told the changes that follow.
        tool_prefix: Put before every tool's name (`"memory_"` gives
            `memory_remember`, ...), when the agent has tools of those names.

    Returns:
        One `KorelyTool` per engine tool, in the engine's order.

    Raises:
        InvalidRequest: A bad `identity`, `reader`, `max_facts` or `tool_prefix`, or
            both `identity` and `identity_from`; `field` names which.
    """
    check_tool_prefix(tool_prefix)
    return [
        KorelyTool(
            definition=definition,
            name=tool_prefix + definition.name,
            engine=engine,
            identity=identity,
            identity_from=identity_from,
            reader=reader,
            max_facts=max_facts,
        )
        for definition in MEMORY_TOOLS
    ]


def check_tool_prefix(tool_prefix: Any) -> str:
    """A tool prefix: letters, digits, '_' and '-', short enough for every tool name."""
    longest = max(len(d.name) for d in MEMORY_TOOLS)
    if not isinstance(tool_prefix, str) or not _TOOL_NAME.fullmatch(tool_prefix or "_"):
        raise InvalidRequest("tool_prefix", "must be letters, digits, '_' or '-'")
    if len(tool_prefix) + longest > 64:
        raise InvalidRequest("tool_prefix", f"must be at most {64 - longest} characters")
    return tool_prefix


@functools.cache
def arguments_model(definition: MemoryTool, *, from_run: bool) -> type[BaseModel]:
    """The arguments of a tool as a pydantic model, from its `ToolArgument`s.

    Extra arguments are kept, not dropped, so that the engine refuses them by
    name (a model that sends `user=` is told the tool takes no such argument).
    With `from_run`, the model also declares the `runtime` the agent injects;
    it is optional, so that a call outside a run gets our error, not pydantic's.
    """
    fields: dict[str, Any] = {}
    for argument in definition.arguments:
        # Strict: pydantic would read "yes", "on" or 1 as True, and the engine refuses them.
        kind: Any = StrictBool if argument.kind is bool else argument.kind
        if argument.required:
            fields[argument.name] = (kind, Field(description=argument.description))
        else:
            if argument.default is None:
                kind = kind | None
            fields[argument.name] = (
                kind,
                Field(default=argument.default, description=argument.description),
            )
    if from_run:
        fields["runtime"] = (Annotated[ToolRuntime[Any, Any] | None, InjectedToolArg], None)
    title = "".join(part.capitalize() for part in re.split(r"[_-]", definition.name)) + "Arguments"
    return create_model(
        title,
        __config__=ConfigDict(extra="allow", arbitrary_types_allowed=True),
        **fields,
    )


def _check_options(identity: Any, identity_from: Any, reader: Any, max_facts: Any) -> None:
    if identity is not None and identity_from is not None:
        raise InvalidRequest(
            "identity", "give identity= (fixed) or identity_from= (from the run), not both"
        )
    if identity is not None:
        if not isinstance(identity, Identity):
            raise InvalidRequest("identity", "must be an Identity(account, user, agent)")
        limits.check_identity(identity)
    if identity_from is not None and not callable(identity_from):
        raise InvalidRequest("identity_from", "must be a function of the run")
    limits.check_reader(reader)
    limits.check_max_facts(max_facts)
