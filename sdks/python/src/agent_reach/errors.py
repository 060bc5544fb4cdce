"""The Agent-Reach error codes and the one exception type that carries them.

Every failure the system reports (HTTP error bodies, WebSocket ``error`` frames, rejects,
receipts) carries one of these codes. The table mirrors ``packages/core/src/errors.ts``; a unit
test of the repository fails when the two differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True, slots=True)
class ErrorCodeInfo:
    code: int
    name: str
    #: May the same work succeed if tried again later?
    retryable: bool
    #: The HTTP status the public API answers with.
    http_status: int
    description: str


ERROR_CODES: tuple[ErrorCodeInfo, ...] = (
    ErrorCodeInfo(1001, "CONNECT_TIMEOUT", True, 504, "Connecting to an agent or dependency timed out."),
    ErrorCodeInfo(1002, "CONNECTION_CLOSED", True, 502, "The connection to the agent closed before the delivery was acknowledged."),
    ErrorCodeInfo(1003, "AUTH_FAILED", False, 401, "Missing, invalid, expired or revoked token, or a producer that is not the token's agent."),
    ErrorCodeInfo(1004, "HEARTBEAT_TIMEOUT", True, 504, "The agent stopped answering pings / heartbeats."),
    ErrorCodeInfo(2001, "NO_ROUTE", False, 404, "No live agent offers the requested capability, topic or agent id."),
    ErrorCodeInfo(2002, "SATURATED", True, 503, "Every candidate is above the saturation threshold and the sender asked for QUEUE_REQUEST."),
    ErrorCodeInfo(2003, "DOMAIN_DENIED", False, 403, "Delivery across security domains without a grant."),
    ErrorCodeInfo(3001, "CIRCUIT_OPEN", True, 503, "The target agent's circuit breaker is open."),
    ErrorCodeInfo(3002, "ACK_TIMEOUT", True, 504, "The agent did not acknowledge the delivery before its deadline."),
    ErrorCodeInfo(3003, "AGENT_REJECTED", False, 422, "The agent rejected the message."),
    ErrorCodeInfo(3004, "RETRIES_EXHAUSTED", False, 502, "Every allowed attempt failed."),
    ErrorCodeInfo(3005, "BUDGET_EXCEEDED", False, 504, "The message's end-to-end time budget ran out."),
    ErrorCodeInfo(3006, "EXPIRED", False, 410, "The message passed its expire_at."),
    ErrorCodeInfo(3007, "CANCELED", False, 409, "The sender canceled the message before it was delivered (A2A CancelTask); it ends DEAD with this code."),
    ErrorCodeInfo(4101, "INVALID_ENVELOPE", False, 400, "The envelope could not be decoded or breaks a rule (fields, exactly one target, types)."),
    ErrorCodeInfo(4102, "PAYLOAD_TOO_LARGE", False, 413, "The payload exceeds the limit (256 KiB by default); send large data by reference."),
    ErrorCodeInfo(4103, "UNKNOWN_SCHEMA", False, 400, "The record names a schema id the registry does not know."),
    ErrorCodeInfo(4104, "INVALID_REGISTRATION", False, 400, "The agent descriptor is invalid; the message names the field."),
    ErrorCodeInfo(4129, "RATE_LIMITED", True, 429, "The producer is over its quota."),
    ErrorCodeInfo(5001, "INTERNAL", True, 500, "An unexpected internal error."),
    ErrorCodeInfo(5002, "DEPENDENCY_UNAVAILABLE", True, 503, "A dependency (Kafka, Redis, PostgreSQL, schema registry) is unavailable."),
)

_BY_NAME = {e.name: e for e in ERROR_CODES}
_BY_CODE = {e.code: e for e in ERROR_CODES}


def error_info(name_or_code: str | int) -> ErrorCodeInfo:
    """The table entry of a code (``3003``) or a name (``"AGENT_REJECTED"``); KeyError if unknown."""
    info = _BY_CODE.get(name_or_code) if isinstance(name_or_code, int) else _BY_NAME.get(name_or_code)
    if info is None:
        raise KeyError(f"unknown error code {name_or_code!r}")
    return info


def is_known_code(code: int) -> bool:
    return code in _BY_CODE


class ReachError(Exception):
    """A failure with an Agent-Reach code.

    Raised by the SDK for every failure it reports, and raised by handlers to reject a delivery
    with a code: ``raise ReachError("RATE_LIMITED", "upstream quota")`` rejects with 4129 and,
    since that code is retryable, asks for another attempt. ``retryable`` overrides the table.
    """

    code: int
    name: str
    retryable: bool
    http_status: int
    details: dict[str, Any]

    def __init__(self, name: str, message: str, *, retryable: bool | None = None, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        info = error_info(name)
        self.code = info.code
        self.name = info.name
        self.retryable = info.retryable if retryable is None else retryable
        self.http_status = info.http_status
        self.details = dict(details or {})

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __repr__(self) -> str:
        return f"ReachError({self.code} {self.name}: {self.message!r})"

    def __str__(self) -> str:
        return f"{self.code} {self.name}: {self.message}"


class NonRetryableError(ReachError):
    """Raised by a handler for a failure that must never be retried (the message is REJECTED)."""

    def __init__(self, name: str, message: str, *, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, message, retryable=False, details=details)


class AgentReplacedError(ReachError):
    """Another connection of the same agent took over (close code 4001); this node stopped."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(
            "CONNECTION_CLOSED",
            f"agent {agent_id} was taken over by a newer connection (close 4001); this node stopped without deregistering",
            details={"agent_id": agent_id},
        )


def error_for_code(code: int, message: str, details: Mapping[str, Any] | None = None) -> ReachError:
    """The ReachError for a code from the wire; a code outside the table becomes INTERNAL."""
    if is_known_code(code):
        return ReachError(error_info(code).name, message, details=details)
    return ReachError("INTERNAL", message, details={**(details or {}), "server_code": code})


def error_from_body(status: int, body: Any, retry_after: str | None = None) -> ReachError:
    """The ReachError an HTTP error body ``{"error": {code, name, message, details}}`` (or a bare status) stands for."""
    err = body.get("error") if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else {}
    details: dict[str, Any] = {"http_status": status}
    if retry_after:
        details["retry_after"] = retry_after
    if isinstance(err.get("details"), dict):
        details.update(err["details"])
    code = err.get("code")
    given = err.get("message")
    message = given if isinstance(given, str) else f"HTTP {status}"
    if isinstance(code, int) and is_known_code(code):
        return ReachError(error_info(code).name, message, details=details)
    # A code outside the table is kept as the service said it, next to the nearest known code.
    if isinstance(code, int):
        details["server_code"] = code
    if isinstance(err.get("name"), str):
        details["server_name"] = err["name"]
    by_status = {401: "AUTH_FAILED", 403: "AUTH_FAILED", 413: "PAYLOAD_TOO_LARGE", 429: "RATE_LIMITED", 400: "INVALID_ENVELOPE", 503: "DEPENDENCY_UNAVAILABLE"}
    return ReachError(by_status.get(status, "INTERNAL"), message, details=details)
