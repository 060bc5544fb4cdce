"""The WebSocket frames of the agent protocol (docs/protocol.md): one JSON object per text frame,
told apart by ``type``.

Frames from the dispatcher are parsed into small dataclasses; unknown frame types and unknown
fields are ignored, so a newer dispatcher never breaks this SDK. Frames to the dispatcher are
plain dicts built by the functions below (one per frame type), so what goes on the wire is
visible in one place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Union

from .message import Message

# Frames the dispatcher sends.


@dataclass(frozen=True, slots=True)
class Welcome:
    connection_id: str
    #: The dispatcher's ping interval; both ends treat silence longer than twice this as dead.
    heartbeat_ms: float | None
    #: The seq the replay starts after (the hello's last_seq, or 0 when the dispatcher's counter is behind it).
    resume_from: int | None


@dataclass(frozen=True, slots=True)
class Deliver:
    seq: int
    attempt: int
    #: The ack deadline as epoch seconds, when the dispatcher gave one.
    deadline: float | None
    #: W3C trace context of the delivery; answers and what a handler sends carry it on.
    traceparent: str | None
    message: Message


@dataclass(frozen=True, slots=True)
class Accepted:
    client_ref: str
    message_id: str


@dataclass(frozen=True, slots=True)
class ErrorFrame:
    code: int
    name: str
    message: str
    #: Set when the error answers a ``send`` frame.
    client_ref: str | None


@dataclass(frozen=True, slots=True)
class Ping:
    ts: float


@dataclass(frozen=True, slots=True)
class Pong:
    ts: float


@dataclass(frozen=True, slots=True)
class TokenRefreshed:
    expires_at: str


@dataclass(frozen=True, slots=True)
class Routes:
    """The pre-flight view (``routes``, after ``subscribe_routes``): by capability and topic, 0 or
    the code a message would be refused with; ``full`` replaces the view, else None removes a name."""

    full: bool
    capabilities: dict[str, int | None]
    topics: dict[str, int | None]


ServerFrame = Union[Welcome, Deliver, Accepted, ErrorFrame, Ping, Pong, TokenRefreshed, Routes]

_TRACEPARENT = re.compile(r"^[\da-f]{2}-([\da-f]{32})-([\da-f]{16})-[\da-f]{2}$")


def parse_traceparent(v: Any) -> str | None:
    """A W3C traceparent when well formed (lower-case hex, ids not all zero), else None."""
    m = _TRACEPARENT.match(v) if isinstance(v, str) else None
    if not m or v.startswith("ff-") or set(m.group(1)) == {"0"} or set(m.group(2)) == {"0"}:
        return None
    return str(v)


def parse_deadline(v: Any) -> float | None:
    """An RFC 3339 deadline (or epoch milliseconds) as epoch seconds."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v / 1000
    if isinstance(v, str):
        if v.isdigit():
            return int(v) / 1000
        try:
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def parse_server_frame(text: str, now_ms: float) -> ServerFrame | None:
    """Parses one inbound text frame; None for frames this SDK does not understand."""
    try:
        f = json.loads(text)
    except ValueError:
        return None
    if not isinstance(f, dict):
        return None
    kind = f.get("type")
    if kind == "welcome":
        return Welcome(connection_id=_str(f.get("connection_id")) or "", heartbeat_ms=_num(f.get("heartbeat_ms")), resume_from=_int(f.get("resume_from")))
    if kind == "deliver":
        seq = _int(f.get("seq"))
        raw = f.get("message")
        message = Message.from_json(raw) if isinstance(raw, dict) else None
        if seq is None or message is None:
            return None
        return Deliver(
            seq=seq,
            attempt=_int(f.get("attempt")) or 0,
            deadline=parse_deadline(f.get("deadline")),
            traceparent=parse_traceparent(f.get("traceparent")),
            message=message,
        )
    if kind == "accepted":
        ref, mid = _str(f.get("client_ref")), _str(f.get("message_id"))
        return Accepted(ref, mid) if ref and mid else None
    if kind == "error":
        return ErrorFrame(
            code=_int(f.get("code")) or 5001,
            name=_str(f.get("name")) or "INTERNAL",
            message=_str(f.get("message")) or "",
            client_ref=_str(f.get("client_ref")),
        )
    if kind == "ping":
        return Ping(_num(f.get("ts")) or now_ms)
    if kind == "pong":
        return Pong(_num(f.get("ts")) or now_ms)
    if kind == "token_refreshed":
        return TokenRefreshed(_str(f.get("expires_at")) or "")
    if kind == "routes":
        return Routes(full=f.get("full") is True, capabilities=_codes(f.get("capabilities")), topics=_codes(f.get("topics")))
    return None


def _codes(v: Any) -> dict[str, int | None]:
    if not isinstance(v, dict):
        return {}
    return {str(k): c for k, c in v.items() if c is None or (isinstance(c, int) and not isinstance(c, bool))}


# Frames an agent sends. Optional fields are left out rather than sent as null.

AgentFrame = dict[str, Any]


def _with_trace(frame: AgentFrame, traceparent: str | None) -> AgentFrame:
    if traceparent:
        frame["traceparent"] = traceparent
    return frame


def hello(agent_id: str, token: str, last_seq: int) -> AgentFrame:
    return {"type": "hello", "agent_id": agent_id, "token": token, "last_seq": last_seq}


def ack(d: Deliver) -> AgentFrame:
    return _with_trace({"type": "ack", "seq": d.seq, "message_id": d.message.message_id}, d.traceparent)


def progress(d: Deliver) -> AgentFrame:
    return {"type": "progress", "seq": d.seq, "message_id": d.message.message_id}


def reject(d: Deliver, code: int, reason: str, retryable: bool) -> AgentFrame:
    frame = {"type": "reject", "seq": d.seq, "message_id": d.message.message_id, "code": code, "reason": reason[:1000], "retryable": retryable}
    return _with_trace(frame, d.traceparent)


def result(d: Deliver, encoded_payload: dict[str, Any], headers: dict[str, str], status: str = "ok") -> AgentFrame:
    """``encoded_payload`` is ``{"payload": ...}`` or ``{"payload_b64": ..., "content_type": ...}`` (payload.encode_payload)."""
    frame: AgentFrame = {"type": "result", "message_id": d.message.message_id, "seq": d.seq, "status": status, **encoded_payload}
    if headers:
        frame["headers"] = headers
    return _with_trace(frame, d.traceparent)


def send(client_ref: str, envelope: dict[str, Any]) -> AgentFrame:
    return {**envelope, "type": "send", "client_ref": client_ref}


def ping(ts_ms: float) -> AgentFrame:
    return {"type": "ping", "ts": ts_ms}


def pong(ts_ms: float) -> AgentFrame:
    return {"type": "pong", "ts": ts_ms}


def refresh_token(token: str) -> AgentFrame:
    return {"type": "refresh_token", "token": token}
