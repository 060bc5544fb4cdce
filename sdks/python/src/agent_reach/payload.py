"""Payload encoding for frames and HTTP bodies.

Any JSON value travels as ``payload``. Bytes travel as ``payload_b64`` with a non-JSON content
type, because the envelope's payload is opaque bytes and JSON cannot carry raw bytes.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Mapping

OCTET_STREAM = "application/octet-stream"


def encode_payload(value: Any, content_type: str | None = None) -> dict[str, Any]:
    """``{"payload": value}`` for JSON values, ``{"payload_b64", "content_type"}`` for bytes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"payload_b64": base64.b64encode(bytes(value)).decode("ascii"), "content_type": content_type or OCTET_STREAM}
    out: dict[str, Any] = {"payload": value}
    if content_type:
        out["content_type"] = content_type
    return out


def json_size(value: Any) -> int:
    """Bytes of the value as compact JSON; raises TypeError/ValueError when it is not JSON."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8"))


def envelope_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON envelope fields of a send: the payload encoded, bytes labelled, None values left out."""
    out = {k: v for k, v in fields.items() if v is not None and k != "payload"}
    if "payload_b64" not in out:
        out.update(encode_payload(fields.get("payload"), out.get("content_type")))
    return out
