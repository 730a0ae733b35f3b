"""Where a run's identity comes from: the run, never the model."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # a dependency of langchain-core's
    from typing_extensions import NotRequired

from korely_memory import Identity, InvalidRequest

IdentityResolver = Callable[[Any], Identity]
"""Turns a run into the `Identity` whose memory it reads and writes.

It is called with the run as the tools see it (LangGraph's `ToolRuntime`) and as
the middleware sees it (the model call's `Runtime` with the run's `config` and
`state` added), so one resolver serves both: each has `.context`, `.config`,
`.state`, `.store`, `.server_info` and `.execution_info`.
"""

_FIELDS = ("account", "user", "agent")
_MISSING = object()
KEPT = "korely_identity"
"""The state key under which the middleware keeps the identity of the thread's latest run."""


class KorelyState(AgentState[Any]):
    """The agent's state, with the identity the run was given (never its memory).

    A run resumed from its checkpoint (`Command(resume=...)` after an interrupt,
    `invoke(None, config)` after a failure) is given no context unless the
    application passes it again; it finds the identity here. Private: not an
    input of the agent, not in what `invoke` returns.
    """

    korely_identity: NotRequired[Annotated[dict[str, str | None] | None, PrivateStateAttr]]


def identity_from_context(run: Any) -> Identity:
    """The default resolver: the identity is the run's context.

    The context may be an `Identity`, any object with `account`, `user` and
    `agent` attributes, or a mapping with those keys, as passed with
    `agent.invoke(..., context=...)`. A run given no context that resumes a run
    which had one (`Command(resume=...)` after an interrupt, `invoke(None, config)`
    after a failure) has that run's identity, kept in the thread's state by
    `KorelyMiddleware`.

    Raises:
        InvalidRequest: The context holds no identity (`field` is `context`).
    """
    context = getattr(run, "context", None)
    if context is None:
        kept = kept_identity(getattr(run, "state", None))
        if kept is not None:
            return kept
    return _identity_in(context)


def kept_identity(state: Any) -> Identity | None:
    """The identity `KorelyMiddleware` kept in a graph state, if any."""
    found = state.get(KEPT) if isinstance(state, Mapping) else getattr(state, KEPT, None)
    if not isinstance(found, Mapping) or set(found) != set(_FIELDS):
        return None
    return Identity(found["account"], found["user"], found["agent"])


def identity_to_keep(state: Any, context: Any) -> dict[str, Any] | None:
    """The state update that keeps the identity of a run given `context` (None: no change).

    A run given no identity clears the one kept: only a run resumed, which does
    not start over, uses the identity of the run before it.
    """
    kept = kept_identity(state)
    try:
        who = _identity_in(context)
    except InvalidRequest:  # the model call says why, or the resolver is not the default
        return {KEPT: None} if kept is not None else None
    if who == kept:
        return None
    return {KEPT: {"account": who.account, "user": who.user, "agent": who.agent}}


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
