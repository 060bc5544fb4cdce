"""Message ids: ``msg_`` + ULID (48-bit millisecond time + 80 random bits, Crockford base32), the
format ingress and the dispatcher require. Sortable by creation time, unique without coordination."""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(now_ms: int | None = None) -> str:
    t = int(time.time() * 1000) if now_ms is None else now_ms
    out = []
    for _ in range(10):
        out.append(_ALPHABET[t % 32])
        t //= 32
    stamp = "".join(reversed(out))
    r = secrets.randbits(80)
    rand = "".join(_ALPHABET[(r >> (5 * (15 - i))) & 31] for i in range(16))
    return stamp + rand


def new_message_id() -> str:
    return f"msg_{ulid()}"


def new_id(prefix: str) -> str:
    return f"{prefix}_{ulid()}"
