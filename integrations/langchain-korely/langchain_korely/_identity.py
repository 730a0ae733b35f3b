"""Where a run's identity comes from: the runtime, never the model."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from korely_memory import Identity

IdentityResolver = Callable[[Any], Identity]
"""Turns a run's runtime into the `Identity` whose memory it reads and writes.

It is called with the langgraph `Runtime` (in the middleware) or the
`ToolRuntime` (in the tools); both carry `.context`, `.store` and `.server_info`.
"""

_FIELDS = ("account", "user", "agent")
_MISSING = object()


def identity_from_context(runtime: Any) -> Identity:
    """The default resolver: the identity is the run's context.

    The context may be an `Identity`, any object with `account`, `user` and
    `agent` attributes, or a mapping with those keys, as passed with
    `agent.invoke(..., context=...)`.
    """
    context = getattr(runtime, "context", None)
    if isinstance(context, Identity):
        return context
    if isinstance(context, Mapping):
        values = [context.get(name, _MISSING) for name in _FIELDS]
    else:
        values = [getattr(context, name, _MISSING) for name in _FIELDS]
    if context is None or any(value is _MISSING for value in values):
        raise ValueError(
            "korely-memory needs the run's identity: invoke the agent with "
            "context=Identity(account=..., user=..., agent=...), or pass identity_from= "
            f"to say where it comes from (the run's context was {type(context).__name__})."
        )
    account, user, agent = values
    return Identity(account=account, user=user, agent=agent)
