"""``korely://context``: each caller's context block as a resource, and its change notices.

A client reads the resource (`resources/read`) for the block its caller would get from
`korely_get_context` with no query, and subscribes to it to be told when it changes: with
``resources/subscribe`` on a connection of the handshake protocol (2025), with a
``subscriptions/listen`` stream naming the resource on one of the 2026-07-28 protocol.
Either way the notice is ``notifications/resources/updated``.

The server sends it after a memory tool of this process changed what an identity keeps, to
every subscriber reading that identity's memory, the writer included (its block reads
differently too); korely-server sends it too after a write through its REST API
(`KorelyTools.subscribers`). A write by another process (another server, the `korely` command,
an application on the engine) sends nothing: the next read tells it, as it always does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import anyio
from mcp import types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ResourceUpdated,
    event_to_notification,
)

from korely_memory import PermissionDenied

from .tools import Caller, KorelyTools

CONTEXT_URI = "korely://context"
RESOURCE_NOT_FOUND = -32002  # the error code the protocol gives an unknown resource

CONTEXT_RESOURCE = types.Resource(
    uri=CONTEXT_URI,
    name="context",
    title="What is kept about the person",
    description="The context block of the person this client works for: the standing facts, "
    "the ones that changed since this client last read them, and recent memories. Subscribe "
    "to it to be told when a write through this server changes it.",
    mime_type="text/markdown",
    annotations=types.Annotations(audience=["assistant"]),
)


def _connection(ctx: ServerRequestContext) -> Any:
    # The handler's session is made for each request; the connection it belongs to is what a
    # subscription lasts with, and its own channel carries notices outside any request. The
    # SDK (2.x) keeps no public name for it on the context.
    connection = getattr(ctx.session, "_connection", None)
    return connection if hasattr(connection, "send_resource_updated") else ctx.session


def handlers(tools: KorelyTools, caller_of: Callable[[], Caller]) -> dict[str, Any]:
    """The server's resource handlers, as `mcp.server.Server` takes them."""

    def caller() -> Caller:
        try:
            return caller_of()
        except PermissionDenied as error:
            raise MCPError(types.INVALID_REQUEST, str(error)) from None

    def check(uri: str) -> None:
        if uri != CONTEXT_URI:
            raise MCPError(
                RESOURCE_NOT_FOUND, f"No resource {uri}; the one resource is {CONTEXT_URI}."
            )

    async def list_resources(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[CONTEXT_RESOURCE])

    async def read_resource(
        ctx: ServerRequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        check(str(params.uri))
        reply = await tools.read_context(caller())
        if not reply.ok:
            raise MCPError(types.INTERNAL_ERROR, reply.text)
        # The block is this caller's alone, and stale as soon as a fact changes: no shared
        # cache may keep it, and no cache at all should serve it again.
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=CONTEXT_URI, mime_type="text/markdown", text=reply.text
                )
            ],
            ttl_ms=0,
            cache_scope="private",
        )

    async def subscribe(
        ctx: ServerRequestContext, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        check(str(params.uri))
        connection = _connection(ctx)

        async def send() -> None:
            await connection.send_resource_updated(CONTEXT_URI)

        tools.subscribers.add(caller().who, connection, send)
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        check(str(params.uri))
        tools.subscribers.remove(_connection(ctx))
        return types.EmptyResult()

    async def listen(
        ctx: ServerRequestContext, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        # One stream per call; it ends when the client leaves (the handler is cancelled).
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        who = caller().who
        asked = params.notifications
        # Every kind asked for is honoured, as the protocol has it; only this one ever fires.
        honored = types.SubscriptionFilter(
            tools_list_changed=True if asked.tools_list_changed else None,
            prompts_list_changed=True if asked.prompts_list_changed else None,
            resources_list_changed=True if asked.resources_list_changed else None,
            resource_subscriptions=list(asked.resource_subscriptions or ()) or None,
        )
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        # One notice waiting is as good as several: the client reads the resource once.
        waiting, wake = anyio.create_memory_object_stream[None](1)
        key = object()

        async def send() -> None:
            with contextlib.suppress(anyio.WouldBlock):
                waiting.send_nowait(None)

        if CONTEXT_URI in (asked.resource_subscriptions or ()):
            tools.subscribers.add(who, key, send)
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=ctx.request_id,
            )
            async for _ in wake:
                await ctx.session.send_notification(
                    event_to_notification(ResourceUpdated(uri=CONTEXT_URI), meta),
                    related_request_id=ctx.request_id,
                )
        finally:
            tools.subscribers.remove(key)
            waiting.close()
            wake.close()
        return types.SubscriptionsListenResult(_meta=meta)

    return {
        "on_list_resources": list_resources,
        "on_read_resource": read_resource,
        "on_subscribe_resource": subscribe,
        "on_unsubscribe_resource": unsubscribe,
        "on_subscriptions_listen": listen,
    }
