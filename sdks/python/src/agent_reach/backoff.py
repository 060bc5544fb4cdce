"""Reconnect backoff: 1 s doubling to 32 s, plus up to 20 % jitter, so a fleet of agents that lost
the same dispatcher does not reconnect in lockstep (the TypeScript SDK's backoff.ts, in seconds)."""

from __future__ import annotations

import random as _random
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True, slots=True)
class Backoff:
    #: First delay, seconds.
    base: float = 1.0
    #: Largest delay before jitter, seconds.
    max: float = 32.0
    #: Extra random fraction added on top: 0 … jitter.
    jitter: float = 0.2


RECONNECT_BACKOFF = Backoff()


def reconnect_delay(attempt: int, random: Callable[[], float] = _random.random, backoff: Backoff = RECONNECT_BACKOFF) -> float:
    """Seconds to wait before reconnect attempt ``attempt`` (0 = the first retry after a drop)."""
    # 2 ** 30 already dwarfs any sane maximum; capping the exponent keeps the number finite.
    plain = min(backoff.base * 2.0 ** min(max(attempt, 0), 30), backoff.max)
    return plain * (1 + random() * backoff.jitter)
