"""A delivered envelope as handlers see it, and the shapes of registration and load.

The envelope travels in its JSON form (snake_case field names): ``payload`` is the parsed
JSON when ``content_type`` is JSON, otherwise the bytes come base64-encoded in ``payload_b64``.
Parsing is a tolerant reader: missing fields get the schema's defaults, unknown ones are kept
in ``raw`` only, so a newer dispatcher never breaks an older SDK.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Mapping, TypedDict

Priority = Literal["HIGH", "NORMAL", "LOW"]


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _time(v: Any) -> str | None:
    """An RFC 3339 string as given, or epoch milliseconds turned into one."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return datetime.fromtimestamp(v / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    return _str(v)


class PayloadBytes(bytes):
    """``Message.payload_bytes``: plain bytes, except that calling them like a method (a common
    slip: ``msg.payload_bytes()``) says what to write instead of "'bytes' object is not callable"."""

    __slots__ = ()

    def __call__(self) -> bytes:
        raise TypeError("Message.payload_bytes is a property, not a method: write msg.payload_bytes (bytes, or None for a JSON payload)")


@dataclass(frozen=True, slots=True)
class Message:
    message_id: str
    message_type: str
    capability: str | None
    topic: str | None
    target_agent_id: str | None
    producer: str
    trace_id: str
    request_id: str | None
    idempotency_key: str | None
    session_id: str | None
    correlation_id: str | None
    reply_to: str | None
    priority: Priority
    tags: tuple[str, ...]
    retryable: bool
    timeout_ms: int | None
    created_at: str
    expire_at: str | None
    schema_version: int
    content_type: str
    headers: Mapping[str, str]
    #: The parsed JSON payload (None when the payload came as bytes, or was JSON null).
    payload: Any = None
    #: The payload bytes, base64-encoded, when the content type is not JSON.
    payload_b64: str | None = None
    #: The envelope exactly as it arrived.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def payload_bytes(self) -> bytes | None:
        """The payload as bytes when it came as ``payload_b64`` (a property: ``msg.payload_bytes``)."""
        return PayloadBytes(base64.b64decode(self.payload_b64)) if self.payload_b64 is not None else None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> "Message | None":
        """Normalises the envelope JSON of a ``deliver`` frame; None without a message_id."""
        message_id = _str(raw.get("message_id"))
        if not message_id:
            return None
        headers_in = raw.get("headers")
        headers = {k: v for k, v in headers_in.items() if isinstance(v, str)} if isinstance(headers_in, dict) else {}
        priority = raw.get("priority")
        timeout = raw.get("timeout_ms")
        version = raw.get("schema_version")
        tags = raw.get("tags")
        retryable = raw.get("retryable")
        return cls(
            message_id=message_id,
            message_type=_str(raw.get("message_type")) or "task_request",
            capability=_str(raw.get("capability")),
            topic=_str(raw.get("topic")),
            target_agent_id=_str(raw.get("target_agent_id")),
            producer=_str(raw.get("producer")) or "",
            trace_id=_str(raw.get("trace_id")) or "",
            request_id=_str(raw.get("request_id")),
            idempotency_key=_str(raw.get("idempotency_key")),
            session_id=_str(raw.get("session_id")),
            correlation_id=_str(raw.get("correlation_id")),
            reply_to=_str(raw.get("reply_to")),
            priority=priority if priority in ("HIGH", "LOW") else "NORMAL",
            tags=tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
            retryable=retryable if isinstance(retryable, bool) else True,
            timeout_ms=timeout if isinstance(timeout, int) and not isinstance(timeout, bool) else None,
            created_at=_time(raw.get("created_at")) or "",
            expire_at=_time(raw.get("expire_at")),
            schema_version=version if isinstance(version, int) and not isinstance(version, bool) else 1,
            content_type=_str(raw.get("content_type")) or "application/json",
            headers=headers,
            payload=raw.get("payload"),
            payload_b64=_str(raw.get("payload_b64")),
            raw=dict(raw),
        )


class CapabilitySpec(TypedDict, total=False):
    """One capability an agent offers. A bare string in a descriptor means ``{"name": ..., "mode": "handle"}``."""

    name: str
    mode: Literal["handle", "subscribe"]
    version: str
    tags: list[str]
    consumption: Literal["single", "aggregate", "stream", "batch"]
    scope: dict[str, Any]
    constraints: dict[str, Any]
    # what the capability does, and example inputs: the skill on the A2A Agent Card (kept in scope)
    description: str
    examples: list[str]


class AgentDescriptor(TypedDict, total=False):
    """What ``POST /v1/agents`` takes. ``agent_type`` is required; capabilities of handlers are added."""

    agent_id: str
    agent_type: str
    capabilities: list[str | CapabilitySpec]
    #: ``max_concurrency`` (default 10), ``region``, ``domain``, ``weight``, ...
    metadata: dict[str, Any]
    #: Lease TTL in seconds (registry default 60); heartbeats are due every TTL/2.
    ttl_s: int
    endpoints: dict[str, str]


@dataclass(frozen=True, slots=True)
class Registration:
    """The registry's answer to ``POST /v1/agents``."""

    agent_id: str
    lease_id: str
    token: str
    ttl_s: float
    heartbeat_interval_ms: float
    warnings: tuple[Mapping[str, Any], ...] = ()


class LoadReport(TypedDict):
    """The body of a heartbeat: the agent's real load."""

    #: Handlers running right now.
    current_load: int
    #: Deliveries waiting in the node's local queue.
    queue_length: int
    avg_latency_ms: float
    #: Recent (5 min) success ratio, 0…1.
    health: float


@dataclass(frozen=True, slots=True)
class Receipt:
    """A ``reach.receipt``: why a message this agent sent was rejected or died."""

    message_id: str
    status: str
    code: int
    name: str
    reason: str
    receipt_message_id: str

    @classmethod
    def of(cls, m: Message) -> "Receipt":
        body = m.payload if isinstance(m.payload, dict) else {}
        code = body.get("code")
        return cls(
            message_id=m.correlation_id or _str(body.get("message_id")) or "",
            status=_str(body.get("status")) or "REJECTED",
            code=code if isinstance(code, int) else 5001,
            name=_str(body.get("name")) or "",
            reason=_str(body.get("reason")) or "",
            receipt_message_id=m.message_id,
        )
