"""A plain HTTP client of the message API for senders that are not agents (scripts, services,
tests): submit messages (optionally waiting for the handler's result), ask for a message's
status and timeline, a trace, and the registry's agents.

    async with ReachClient(ingress_url, token=token) as client:
        sent = await client.submit({"capability": "parse_pdf", "payload": {...}}, wait_ms=10_000)
        sent["result"]  # {"status": "ok", "payload": ...}
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any, Mapping
from urllib.parse import quote

from .errors import ReachError, error_info, is_known_code
from .http import JsonHttp, join_url, list_of
from .payload import envelope_fields
from .registry_client import RegistryClient

#: States after which a message changes no more (for this attempt history).
FINAL_STATES = frozenset({"DELIVERED", "REJECTED", "DEAD"})


class ReachClient:
    def __init__(
        self,
        ingress_url: str,
        *,
        registry_url: str | None = None,
        token: str | None = None,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``token``: an agent token (the producer of what is submitted) or the admin token.
        ``ssl_context``: a private CA (and client certificate) for https URLs."""
        self.ingress_url = ingress_url
        self.token = token
        self._http = JsonHttp(timeout, ssl_context)
        self._registry = RegistryClient(registry_url, self._http) if registry_url else None

    async def __aenter__(self) -> "ReachClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def _message_url(self, message_id: str, suffix: str = "") -> str:
        return join_url(self.ingress_url, f"/v1/messages/{quote(message_id, safe='')}{suffix}")

    async def submit(self, envelope: Mapping[str, Any], *, idempotency_key: str | None = None, wait_ms: int | None = None) -> dict[str, Any]:
        """``POST /v1/messages``: ``{message_id, status, http_status[, result]}``.

        ``wait_ms`` waits for the handler's result (``?wait_ms=``); a wait that runs out raises
        3002, a message that failed raises its own code. ``idempotency_key`` is sent as the
        ``Idempotency-Key`` header: a resubmission answers the first message's id (HTTP 200).
        """
        qs = f"?wait_ms={max(0, int(wait_ms))}" if wait_ms is not None else ""
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        res = await self._http.request(
            "POST",
            join_url(self.ingress_url, f"/v1/messages{qs}"),
            token=self.token,
            headers=headers,
            body=envelope_fields(envelope),
            timeout=self._http.timeout + (wait_ms or 0) / 1000,
        )
        body = res.body if isinstance(res.body, dict) else {}
        if not isinstance(body.get("message_id"), str):
            raise ReachError("INTERNAL", f"ingress answered {res.status} without a message_id")
        return {**body, "status": body.get("status", "PENDING"), "http_status": res.status}

    async def status(self, message_id: str) -> dict[str, Any]:
        """``GET /v1/messages/{id}``: state, attempt, agent, code, result."""
        res = await self._http.request("GET", self._message_url(message_id), token=self.token)
        return res.body if isinstance(res.body, dict) else {}

    async def events(self, message_id: str) -> list[dict[str, Any]]:
        """``GET /v1/messages/{id}/events``: the timeline, oldest first."""
        res = await self._http.request("GET", self._message_url(message_id, "/events"), token=self.token)
        return [e for e in list_of(res.body, "events", "timeline") if isinstance(e, dict)]

    async def trace(self, trace_id: str) -> dict[str, Any]:
        """``GET /v1/traces/{trace_id}``: every message of the trace with its timeline."""
        res = await self._http.request("GET", join_url(self.ingress_url, f"/v1/traces/{quote(trace_id, safe='')}"), token=self.token)
        return {"trace_id": trace_id, "messages": res.body} if isinstance(res.body, list) else dict(res.body or {})

    async def agents(self, *, capability: str | None = None, status: str | None = None, domain: str | None = None) -> list[dict[str, Any]]:
        """``GET /v1/agents`` on the registry (needs ``registry_url``)."""
        if self._registry is None:
            raise ReachError("INTERNAL", "ReachClient needs registry_url to list agents")
        return await self._registry.list(capability=capability, status=status, domain=domain, token=self.token)

    async def wait(self, message_id: str, *, timeout: float = 30.0, poll: float = 0.2, with_result: bool = False) -> dict[str, Any]:
        """Polls the message's status until it is final (DELIVERED, REJECTED, DEAD) and returns it.

        ``with_result``: a DELIVERED message counts only once its handler's result is recorded.
        Raises 3002 ACK_TIMEOUT when that does not happen within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while True:
            try:
                last = await self.status(message_id)
            except ReachError as err:
                # The read model is written asynchronously: right after a submit it may not know
                # the message yet (404). A retryable failure (its database away) is waited out too.
                if err.details.get("http_status") != 404 and not err.retryable:
                    raise
            state = last.get("status")
            if state in FINAL_STATES and not (with_result and state == "DELIVERED" and "result" not in last):
                return last
            if time.monotonic() >= deadline:
                raise ReachError("ACK_TIMEOUT", f"message {message_id} is not final within {timeout} s (status {state})", details={"message_id": message_id, "status": state})
            await asyncio.sleep(poll)

    async def result(self, message_id: str, *, timeout: float = 30.0) -> Any:
        """The handler's result payload of a message; raises the message's own code when it failed."""
        final = await self.wait(message_id, timeout=timeout, with_result=True)
        if final.get("status") == "DELIVERED":
            result = final.get("result") or {}
            if result.get("status") == "error":
                raise ReachError("AGENT_REJECTED", f"the handler of {message_id} answered with an error", details={"message_id": message_id, "payload": result.get("payload")})
            return result.get("payload")
        code = final.get("code")
        name = error_info(code).name if isinstance(code, int) and is_known_code(code) else "INTERNAL"
        raise ReachError(name, str(final.get("reason") or final.get("status")), details={"message_id": message_id, "status": final.get("status")})
