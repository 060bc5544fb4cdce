"""What a handler gets besides the message, and the sending API it can use.

A handler is ``(msg)`` or ``(msg, ctx)``, a coroutine function or a plain function; its return
value is the result. Plain (synchronous) functions run in a thread pool, so a handler that
blocks never stalls the event loop that heartbeats, pings and answers for the node.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine, Mapping, Protocol, TypeVar, Union

from .message import Message
from .pending_requests import Reply
from .session import SessionContext

T = TypeVar("T")

Handler = Union[Callable[[Message], Any], Callable[[Message, "HandlerContext"], Any]]


class AgentApi(Protocol):
    """What a handler may do with its node: talk to other agents (see AgentNode for each method)."""

    @property
    def agent_id(self) -> str | None: ...

    async def send(self, fields: Mapping[str, Any] | None = None, /, *, preflight: bool = False, **more: Any) -> str: ...

    async def publish(
        self,
        topic: str,
        payload: Any,
        *,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = False,
    ) -> str: ...

    async def request(
        self,
        capability: str,
        payload: Any,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = True,
    ) -> Any: ...

    async def request_reply(
        self,
        capability: str,
        payload: Any,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = True,
    ) -> Reply: ...


# eq=False: contexts are compared (and hashed) by identity, one per running delivery.
@dataclass(frozen=True, eq=False)
class HandlerContext:
    #: The delivery's sequence number on this agent's stream.
    seq: int
    #: 0 on the first attempt, +1 on each retry.
    attempt: int
    #: Epoch seconds by which the dispatcher expects the answer (moved on by progress frames).
    deadline: float | None
    #: The delivery's W3C traceparent; what is sent through ``node`` continues this trace.
    traceparent: str | None
    #: Context fragments passed with the task; fragments set here go back with the result.
    session: SessionContext
    #: A logger that names the message (message_id, trace_id in ``extra``).
    log: logging.LoggerAdapter[logging.Logger]
    #: The node, to send, publish or request (delegate) from inside a handler.
    node: AgentApi
    #: Set when the node gives up waiting for this handler (stop() past its drain timeout):
    #: a synchronous handler should check it and return; an async one is also cancelled.
    cancelled: threading.Event = field(default_factory=threading.Event)
    loop: asyncio.AbstractEventLoop | None = None

    def run_coroutine(self, awaitable: Coroutine[Any, Any, T]) -> T:
        """For synchronous handlers (which run in a thread): runs a coroutine of ``node`` on the
        node's event loop and waits for its result, e.g. ``ctx.run_coroutine(ctx.node.publish(...))``."""
        if self.loop is None:
            raise RuntimeError("no event loop to run on")
        return asyncio.run_coroutine_threadsafe(awaitable, self.loop).result()


class ContinuingApi:
    """The node as a handler sees it: what it sends continues the delivery's trace (its
    traceparent when the dispatcher sent one, else its trace_id), unless the caller gives its own."""

    def __init__(self, api: AgentApi, traceparent: str | None, trace_id: str | None) -> None:
        self._api = api
        self._traceparent = traceparent
        self._trace_id = trace_id

    @property
    def agent_id(self) -> str | None:
        return self._api.agent_id

    def _trace(self, traceparent: str | None, trace_id: str | None) -> tuple[str | None, str | None]:
        if traceparent or trace_id:
            return traceparent, trace_id
        return (self._traceparent, None) if self._traceparent else (None, self._trace_id)

    async def send(self, fields: Mapping[str, Any] | None = None, /, *, preflight: bool = False, **more: Any) -> str:
        merged = {**(fields or {}), **more}
        traceparent, trace_id = self._trace(merged.get("traceparent"), merged.get("trace_id"))
        return await self._api.send({**merged, "traceparent": traceparent, "trace_id": trace_id}, preflight=preflight)

    async def publish(
        self,
        topic: str,
        payload: Any,
        *,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = False,
    ) -> str:
        traceparent, trace_id = self._trace(traceparent, trace_id)
        return await self._api.publish(
            topic,
            payload,
            session_id=session_id,
            headers=headers,
            priority=priority,
            idempotency_key=idempotency_key,
            trace_id=trace_id,
            traceparent=traceparent,
            tags=tags,
            preflight=preflight,
        )

    async def request(
        self,
        capability: str,
        payload: Any,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = True,
    ) -> Any:
        reply = await self.request_reply(
            capability,
            payload,
            timeout=timeout,
            context=context,
            session_id=session_id,
            headers=headers,
            priority=priority,
            idempotency_key=idempotency_key,
            trace_id=trace_id,
            traceparent=traceparent,
            tags=tags,
            preflight=preflight,
        )
        return reply.payload

    async def request_reply(
        self,
        capability: str,
        payload: Any,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = True,
    ) -> Reply:
        traceparent, trace_id = self._trace(traceparent, trace_id)
        return await self._api.request_reply(
            capability,
            payload,
            timeout=timeout,
            context=context,
            session_id=session_id,
            headers=headers,
            priority=priority,
            idempotency_key=idempotency_key,
            trace_id=trace_id,
            traceparent=traceparent,
            tags=tags,
            preflight=preflight,
        )
