"""What the middleware checks at a model call, since `create_agent` offers no hook at build time."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from korely_memory import InvalidRequest
from langchain_korely._events import Watch
from langchain_korely._placement import PLACEMENTS

_NAME = re.compile(r"[A-Za-z0-9_-]{1,100}")


def check_options(
    placement: Any,
    on_error: Any,
    read_only: Any,
    cache_marker: Any,
    identity_from: Any,
    name: Any,
    tool_prefix: str,
) -> str:
    """The middleware's name, once its options are checked.

    Raises:
        InvalidRequest: `field` names the option that is not one the middleware takes.
    """
    if placement not in PLACEMENTS:
        raise InvalidRequest(
            "placement", f"must be 'system', 'context' or 'notes', not {placement!r:.40}"
        )
    if on_error not in ("raise", "continue"):
        raise InvalidRequest("on_error", f"must be 'raise' or 'continue', not {on_error!r:.40}")
    if not isinstance(read_only, bool):
        raise InvalidRequest("read_only", "must be True or False")
    if cache_marker is not None and not isinstance(cache_marker, Mapping):
        raise InvalidRequest("cache_marker", "must be a mapping of content block keys")
    if identity_from is not None and not callable(identity_from):
        raise InvalidRequest("identity_from", "must be a function of the run")
    name = (
        name if name is not None else "KorelyMiddleware" + (f"_{tool_prefix}" * bool(tool_prefix))
    )
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidRequest("name", "must be 1 to 100 letters, digits, '_' or '-'")
    return name


def check_capture_from(capture_from: Any, capture: Any) -> None:
    """Raises `InvalidRequest` naming `capture_from`: not a function, or nothing to capture with."""
    if capture_from is None:
        return
    if not callable(capture_from):
        raise InvalidRequest(
            "capture_from", "must be a function (message, identity) -> bool, or None"
        )
    if capture is None:
        raise InvalidRequest("capture_from", "needs capture=, the extractor to capture with")


def check_reached(watch: Watch, answer: Sequence[Any], middleware: str) -> bool:
    """Whether a model call with the block answered, within one call of the middleware.

    Raises:
        InvalidRequest: The answer came from a model call without the block (`field` is
            `middleware`): a middleware inside this one replaced the prompt.
    """
    if watch.missed and not watch.reached and watch.answered_without_block(answer):
        raise InvalidRequest(
            "middleware",
            f"the memory block of {middleware} did not reach the model: a middleware listed "
            f"after {middleware} replaced the prompt it was put in (a @dynamic_prompt, or any "
            "middleware that sets the system message). List KorelyMiddleware after every "
            "middleware that sets the system prompt, e.g. "
            "create_agent(model, middleware=[my_prompt, KorelyMiddleware(engine)]).",
        )
    return watch.reached > 0


def check_tool_names(ours: Sequence[Any], offered: Sequence[Any], middleware: str) -> None:
    """Refuse a model call whose tools include another tool under one of our tools' names.

    LangChain keeps one tool per name without a word; ours is then missing and
    the other answers to the model's calls meant for memory.

    Raises:
        InvalidRequest: `field` is `tool_prefix`.
    """
    by_name = {tool.name: tool for tool in ours}
    for tool in offered:
        name = tool.get("name") if isinstance(tool, dict) else tool.name
        if name in by_name and tool is not by_name[name]:
            raise InvalidRequest(
                "tool_prefix",
                f"the agent has another tool named {name!r}, which hides the memory tool of "
                f"{middleware}. Give the memory tools a prefix, e.g. "
                "KorelyMiddleware(engine, tool_prefix='memory_'), or rename the other tool.",
            )
