"""Where a run's identity comes from: the run, never the model."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Hashable, Mapping
from typing import Annotated, Any

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # a dependency of langchain-core's
    from typing_extensions import NotRequired

from korely_memory import Identity, InvalidRequest, MemoryEngine
from korely_memory.sealing import seal, verifies
from langchain_korely._turns import thread_of

IdentityResolver = Callable[[Any], Identity]
"""Turns a run into the `Identity` whose memory it reads and writes.

It is called with the run as the tools see it (LangGraph's `ToolRuntime`) and as
the middleware sees it (the model call's `Runtime` with the run's `config` and
`state` added), so one resolver serves both: each has `.context`, `.config`,
`.state`, `.store`, `.server_info` and `.execution_info`.
"""

_FIELDS = ("account", "user", "agent")
_MISSING = object()
_SEAL = "seal"
KEPT = "korely_identity"
"""The state key under which the middleware keeps the identity of the thread's latest run, with
its seal."""


class KorelyState(AgentState[Any]):
    """The agent's state, with the identity the run was given (never its memory).

    A run resumed from its checkpoint (`Command(resume=...)` after an interrupt,
    `invoke(None, config)` after a failure) is given no context unless the
    application passes it again; it finds the identity here, sealed for its
    thread (`KeptOrContext`). Private: not an input of the agent, not in what
    `invoke` returns.
    """

    korely_identity: NotRequired[Annotated[dict[str, str | None] | None, PrivateStateAttr]]


def identity_from_context(run: Any) -> Identity:
    """The default resolver: the identity is the run's context.

    The context may be an `Identity`, any object with `account`, `user` and
    `agent` attributes, or a mapping with those keys, as passed with
    `agent.invoke(..., context=...)`. With `KorelyMiddleware` (and the tools it
    makes), a run given no context that resumes a run which had one
    (`Command(resume=...)` after an interrupt, `invoke(None, config)` after a
    failure) has that run's identity, kept in the thread's state under a seal
    of the database's (see `KeptOrContext`).

    Raises:
        InvalidRequest: The context holds no identity (`field` is `context`).
    """
    return _identity_in(getattr(run, "context", None))


class KeptOrContext:
    """The resolver of `KorelyMiddleware` and of tools made without `identity_from=`: the run's
    context, or, for a run given none, the identity kept in the thread's state, if its seal
    verifies under `engine`'s database.

    The kept identity is sealed for its thread (an HMAC under a secret only the database
    holds): a state update (`Command(update=...)`, `update_state`) cannot make one, nor
    move one from another thread.

    Either way, a run whose config names another user under `langgraph_user_id` (LangMem's)
    is refused: see `check_langgraph_user`. A resolver of the application's is its own rule.
    """

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    def __call__(self, run: Any) -> Identity:
        context = getattr(run, "context", None)
        who: Identity | None = None
        if context is None:
            who = kept_identity(self.engine, getattr(run, "state", None), _thread(run))
        if who is None:
            who = _identity_in(context)
        check_langgraph_user(who, run)
        return who


LANGGRAPH_USER = "langgraph_user_id"
"""The key of the run's `configurable` that names its user for LangMem's tools and manager
(their namespaces' `{langgraph_user_id}`)."""


def check_langgraph_user(who: Identity, run: Any) -> None:
    """Refuse a run whose config names another user under `langgraph_user_id` than `who`'s.

    LangMem's tools and manager write under `config["configurable"]["langgraph_user_id"]`
    (through `KorelyStore`, that user's memory), while the identity comes from the run's
    context: when the two differ, the run would write one person's memory while showing
    another's. Nothing is checked where the config is out of sight (an async run on Python
    3.10, in the middleware's model hook).

    Raises:
        InvalidRequest: They differ (`field` is `langgraph_user_id`).
    """
    try:
        config = getattr(run, "config", None)
    except InvalidRequest:  # RunView: out of the middleware's sight
        return
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    named = configurable.get(LANGGRAPH_USER) if isinstance(configurable, Mapping) else None
    if named is None or str(named) == who.user:
        return
    raise InvalidRequest(
        LANGGRAPH_USER,
        f"the run's config names langgraph_user_id={str(named)!r}, the user LangMem's tools "
        "and manager write for, but its identity (the memory korely shows and its tools "
        f"write) is user {who.user!r}: one run would write one person's memory and show "
        "another's. Give both the same user (context=Identity(account, user, agent) and "
        "config={'configurable': {'langgraph_user_id': user}}), or take the identity from "
        "the config with identity_from=.",
    )


def resolver_for(engine: MemoryEngine, identity_from: IdentityResolver | None) -> IdentityResolver:
    """The resolver asked for (`identity_from_context` or none: `KeptOrContext(engine)`)."""
    if identity_from is None or identity_from is identity_from_context:
        return KeptOrContext(engine)
    return identity_from


def kept_identity(engine: MemoryEngine, state: Any, thread: Hashable | None) -> Identity | None:
    """The identity `KorelyMiddleware` kept in a graph state for `thread`, if any.

    Raises:
        InvalidRequest: The state holds an identity whose seal does not verify (`field` is
            `korely_identity`).
    """
    found = state.get(KEPT) if isinstance(state, Mapping) else getattr(state, KEPT, None)
    if found is None:
        return None
    if (
        not isinstance(found, Mapping)
        or set(found) != {*_FIELDS, _SEAL}
        or not verifies(engine, _sealed_text(found, thread), found[_SEAL])
    ):
        raise InvalidRequest(
            KEPT,
            "the identity kept in the thread's state is not one KorelyMiddleware kept for "
            "this thread (its seal does not verify): only the middleware writes it; pass "
            "the run's identity again with context=Identity(account=..., user=..., agent=...).",
        )
    return Identity(found["account"], found["user"], found["agent"])


def identity_to_keep(
    engine: MemoryEngine, state: Any, context: Any, thread: Hashable | None
) -> dict[str, Any] | None:
    """The state update that keeps the identity of a run given `context` (None: no change).

    A run given no identity clears the one kept: only a run resumed, which does
    not start over, uses the identity of the run before it.
    """
    try:
        kept = kept_identity(engine, state, thread)
    except InvalidRequest:  # not the middleware's: replaced or cleared
        kept = None
        present = True
    else:
        present = kept is not None
    try:
        who = _identity_in(context)
    except InvalidRequest:  # the model call says why, or the resolver is not the default
        return {KEPT: None} if present else None
    if who == kept:
        return None
    found = {"account": who.account, "user": who.user, "agent": who.agent}
    return {KEPT: {**found, _SEAL: seal(engine, _sealed_text(found, thread))}}


def _sealed_text(found: Mapping[str, Any], thread: Hashable | None) -> str:
    return json.dumps([[found.get(name) for name in _FIELDS], repr(thread)])


def _thread(run: Any) -> Hashable | None:
    """The run's thread, as LangGraph's `execution_info` has it for the middleware and the tools
    alike (a model hook's config is out of sight in an async run on Python 3.10)."""
    return thread_of(None, run)


def _identity_in(context: Any) -> Identity:
    if isinstance(context, Identity):
        return context
    if isinstance(context, Mapping):
        values = [context.get(name, _MISSING) for name in _FIELDS]
    else:
        values = [getattr(context, name, _MISSING) for name in _FIELDS]
    if context is None or any(value is _MISSING for value in values):
        raise InvalidRequest(
            "context",
            "korely-memory needs the run's identity: invoke the agent with "
            "context=Identity(account=..., user=..., agent=...), or pass identity_from= "
            f"to say where it comes from (the run's context was {type(context).__name__}).",
        )
    account, user, agent = values
    return Identity(account=account, user=user, agent=agent)


class RunView:
    """A model call's `Runtime` seen as a tool sees its run: with `config` and `state`.

    A resolver written for tools (`runtime.config["configurable"][...]`) thus
    works in the middleware as well; every other attribute is the `Runtime`'s.

    LangChain calls a middleware's model hook without the run's config; the
    middleware reads it from the context variable LangChain sets for the run.
    In an async run on Python 3.10 that variable is not set (asyncio tasks take
    a context only from 3.11 on), so there `config` raises `InvalidRequest`
    rather than let a resolver take an identity from an empty config.
    """

    def __init__(self, runtime: Any, config: Mapping[str, Any] | None, state: Any) -> None:
        self._runtime = runtime
        self._config = config
        self.state = state

    @property
    def config(self) -> Mapping[str, Any]:
        """The run's config.

        Raises:
            InvalidRequest: The config is out of the middleware's sight (an async
                run on Python 3.10); `field` is `identity_from`.
        """
        if self._config is None:
            raise InvalidRequest(
                "identity_from",
                "the resolver reads the run's config, which LangChain does not give a "
                "middleware's model hook in an async run on Python 3.10 (asyncio tasks carry "
                "no context before 3.11): take the identity from the run's context "
                "(agent.ainvoke(..., context=...)), invoke the agent synchronously, or use "
                "Python 3.11 or newer.",
            )
        return self._config

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)
