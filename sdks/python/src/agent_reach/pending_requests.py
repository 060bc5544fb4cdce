"""Requests waiting for their answer, keyed by the request's message id, which the answer carries
as ``correlation_id``: a ``task_result`` resolves it, a ``reach.receipt`` (the request was
rejected or died) raises the receipt's code, the timer 3002."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from .errors import ReachError, error_for_code
from .message import Message, Receipt
from .session import context_from_headers

#: Header the dispatcher puts on a task_result: the handler's ``ok`` or ``error``.
RESULT_STATUS_HEADER = "reach-result-status"


@dataclass(frozen=True, slots=True)
class Reply:
    """A request's answer with its context fragments."""

    payload: Any
    #: The fragments sent, overlaid with those the handler updated.
    context: dict[str, str]
    #: Only the fragments the handler set.
    updated: dict[str, str]
    message: Message


@dataclass(slots=True)
class _Pending:
    capability: str
    context: dict[str, str]
    future: asyncio.Future[Reply]
    timer: asyncio.TimerHandle | None = field(default=None)


class PendingRequests:
    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    def wait(self, message_id: str, capability: str, context: dict[str, str], timeout: float) -> asyncio.Future[Reply]:
        """Starts waiting; the timer runs from now, so it bounds sending and answering together."""
        loop = asyncio.get_running_loop()
        p = _Pending(capability, context, loop.create_future())
        p.timer = loop.call_later(timeout, self._time_out, message_id, timeout)
        self._pending[message_id] = p
        return p.future

    def has(self, message_id: str) -> bool:
        return message_id in self._pending

    def forget(self, message_id: str) -> None:
        """Stops waiting without settling (the request could not be sent; the caller has the error)."""
        p = self._take(message_id)
        if p is not None:
            p.future.cancel()

    def settle_result(self, m: Message) -> bool:
        p = self._take(m.correlation_id) if m.correlation_id else None
        if p is None:
            return False
        if m.headers.get(RESULT_STATUS_HEADER) == "error":
            p.future.set_exception(ReachError("AGENT_REJECTED", f"{p.capability} answered with an error", details={"message_id": m.correlation_id, "payload": m.payload}))
            return True
        updated = context_from_headers(m.headers)
        # A binary result (a handler that returned bytes) comes as payload_b64: it resolves as bytes.
        payload = m.payload_bytes if m.payload_b64 is not None else m.payload
        p.future.set_result(Reply(payload=payload, context={**p.context, **updated}, updated=updated, message=m))
        return True

    def settle_receipt(self, receipt: Receipt) -> None:
        p = self._take(receipt.message_id)
        if p is not None:
            message = f"{p.capability}: {receipt.status} {receipt.name} {receipt.reason}".strip()
            p.future.set_exception(error_for_code(receipt.code, message, {"message_id": receipt.message_id, "status": receipt.status}))

    def fail_all(self, err: ReachError) -> None:
        for message_id in list(self._pending):
            p = self._take(message_id)
            if p is not None:
                p.future.set_exception(err)

    def _time_out(self, message_id: str, timeout: float) -> None:
        p = self._take(message_id)
        if p is not None:
            p.future.set_exception(
                ReachError("ACK_TIMEOUT", f"no result for {message_id} ({p.capability}) within {timeout} s", details={"message_id": message_id, "capability": p.capability})
            )

    def _take(self, message_id: str) -> _Pending | None:
        p = self._pending.pop(message_id, None)
        if p is not None and p.timer is not None:
            p.timer.cancel()
        if p is not None and p.future.done():
            return None  # the caller gave up (cancelled its await)
        return p
