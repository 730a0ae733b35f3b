"""Where a run's identity comes from: the run, never the model."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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


def identity_from_context(run: Any) -> Identity:
    """The default resolver: the identity is the run's context.

    The context may be an `Identity`, any object with `account`, `user` and
    `agent` attributes, or a mapping with those keys, as passed with
    `agent.invoke(..., context=...)`.

    Raises:
        InvalidRequest: The context holds no identity (`field` is `context`).
    """
    context = getattr(run, "context", None)
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
