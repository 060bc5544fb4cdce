"""What the node sends and asks (AgentNode's send, request, can_reach): envelopes checked and
built here, pre-flight against the routes view (else the registry), requests waiting for their
task_result in PendingRequests, failure receipts; the frames go out through the connection.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from .connection import DispatcherConnection
from .errors import NonRetryableError, ReachError
from .frames import Deliver
from .ids import new_id, new_message_id
from .lease import AgentLease
from .message import Receipt
from .payload import envelope_fields
from .pending_requests import PendingRequests, Reply
from .routes_view import RouteKind, RoutesView
from .session import context_to_headers

TASK_REQUEST = "task_request"
TASK_RESULT = "task_result"
EVENT = "event"
#: Failure receipts: never handed to handlers.
RECEIPT = "reach.receipt"


class AgentSender:
    def __init__(
        self,
        *,
        connection: DispatcherConnection,
        lease: AgentLease,
        requests: PendingRequests,
        routes: RoutesView,
        preflight: bool,
        send_timeout: float,
        request_timeout: float,
        token: str | None,
        state: Callable[[], str],
        fire: Callable[[str, Any], None],
    ) -> None:
        self._connection = connection
        self._lease = lease
        self._requests = requests
        #: What this agent can reach, from the dispatcher's ``routes`` frames (pre-flight, R-G6).
        self._routes = routes
        self._preflight = preflight
        self._send_timeout = send_timeout
        self._request_timeout = request_timeout
        self._token = token
        self._state = state
        self._fire = fire

    @property
    def _agent_id(self) -> str | None:
        return self._lease.registration.agent_id if self._lease.registration else None

    async def send(self, given: dict[str, Any], preflight: bool) -> str:
        if self._state() in ("stopping", "stopped"):
            raise ReachError("CONNECTION_CLOSED", "the agent node is stopped")
        targets = [t for t in ("capability", "topic", "target_agent_id") if given.get(t)]
        if len(targets) != 1:
            raise NonRetryableError("INVALID_ENVELOPE", f"exactly one of capability, topic, target_agent_id must be set (got {len(targets)})")
        if preflight and self._preflight:
            # A message with expire_at may wait for an agent: the router parks it rather than refuse it.
            may_wait = given.get("expire_at") is not None
            refused = (
                self._routes.refusal("capability", str(given["capability"]), may_wait=may_wait)
                if given.get("capability")
                else self._routes.refusal("topic", str(given["topic"]), may_wait=may_wait)
                if given.get("topic")
                else None
            )
            if refused is not None:
                raise refused
        client_ref = new_id("ref")
        # The id is chosen here so a request can wait for its answer before the send completes.
        envelope = envelope_fields({**given, "message_id": given.get("message_id") or new_message_id()})
        if self._agent_id:
            envelope["producer"] = self._agent_id
        return await self._connection.send(client_ref, envelope, self._send_timeout)

    async def request_reply(
        self,
        capability: str,
        payload: Any,
        *,
        timeout: float | None,
        context: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
        preflight: bool,
        **fields: Any,
    ) -> Reply:
        agent_id = self._agent_id
        if not agent_id:
            raise ReachError("CONNECTION_CLOSED", "request() needs a started node (reply_to is this agent)")
        if preflight and self._preflight:
            # The local view when the dispatcher sent one (no round trip), else the registry.
            refused = self._routes.refusal("capability", capability)
            if refused is not None:
                raise refused
            if self._routes.verdict("capability", capability) is None and not await self._registry_offers(capability):
                raise NonRetryableError("NO_ROUTE", f"no live agent offers {capability}", details={"capability": capability})
        wait = self._request_timeout if timeout is None else timeout
        message_id = new_message_id()
        fragments = dict(context or {})
        reply = self._requests.wait(message_id, capability, fragments, wait)
        try:
            await self.send(
                {
                    "message_id": message_id,
                    "message_type": TASK_REQUEST,
                    "capability": capability,
                    "payload": payload,
                    "reply_to": agent_id,
                    "timeout_ms": int(wait * 1000),
                    "headers": {**(headers or {}), **context_to_headers(fragments)},
                    **fields,
                },
                preflight=False,
            )
        except BaseException:
            self._requests.forget(message_id)
            raise
        return await reply

    def settle(self, d: Deliver, log: logging.LoggerAdapter[logging.Logger]) -> bool:
        """Answers to this node's own sends are settled here and never reach a handler: failure
        receipts, and the task_results of its requests. True when ``d`` was one (the node acks it)."""
        m = d.message
        if m.message_type == RECEIPT:
            receipt = Receipt.of(m)
            log.info("failure receipt about %s: %d %s", receipt.message_id, receipt.code, receipt.status)
            self._requests.settle_receipt(receipt)
            self._fire("receipt", receipt)
            return True
        if m.message_type == TASK_RESULT and m.correlation_id and self._requests.has(m.correlation_id):
            self._requests.settle_result(m)
            return True
        return False

    async def can_reach(self, name: str, kind: RouteKind) -> bool:
        verdict = self._routes.verdict(kind, name)
        if verdict is not None:
            return verdict == 0
        return await self._registry_offers(name) if kind == "capability" else True

    async def _registry_offers(self, capability: str) -> bool:
        registry = self._lease.registry
        assert registry is not None, "can_reach() needs a started node"
        token = self._lease.registration.token if self._lease.registration else None
        agents = await registry.list(capability=capability, token=token or self._token)
        return any((a.get("status") or "ONLINE") == "ONLINE" for a in agents)
