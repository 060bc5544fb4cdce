"""When to renew an agent token.

Tokens are ``rt1.<base64url claims>.<signature>``, issued by the registry with ``iat``/``exp`` in
epoch seconds. The SDK only reads the claims; it cannot and need not check the signature. A
token it cannot read is assumed to live for the registry's default, one hour.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

DEFAULT_LIFETIME_S = 3600.0


@dataclass(frozen=True, slots=True)
class TokenLifetime:
    issued_at: float
    expires_at: float


def token_lifetime(token: str) -> TokenLifetime | None:
    """Issue and expiry time (epoch seconds) from a token's claims; None when unreadable."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except ValueError:
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if not isinstance(exp, (int, float)):
        return None
    iat = claims.get("iat")
    return TokenLifetime(issued_at=float(iat) if isinstance(iat, (int, float)) else exp - DEFAULT_LIFETIME_S, expires_at=float(exp))


def refresh_delay(token: str, now: float, ratio: float = 0.8) -> float:
    """Seconds from ``now`` until the token should be renewed: at ``ratio`` of its lifetime (at least 1 s)."""
    life = token_lifetime(token) or TokenLifetime(now, now + DEFAULT_LIFETIME_S)
    at = life.issued_at + (life.expires_at - life.issued_at) * ratio
    return max(at - now, 1.0)
