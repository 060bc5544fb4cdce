"""The node's real load for heartbeats: handler outcomes of the last five minutes, bounded to the
newest ``max_samples``, plus what runs and waits right now."""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

from .message import LoadReport


# Health is judged as if the agent had already succeeded this many times: one failure is not
# evidence that an agent is broken. As the raw ratio, the first transient failure of a fresh agent
# read health 0, the registry put it in COOLDOWN and its senders got 2001 until the next
# heartbeat. With ten, one failure of one reads 0.909; an agent failing everything falls under the
# default COOLDOWN threshold after about twenty failures (the TypeScript SDK's load.ts, the same).
HEALTH_PRIOR_SUCCESSES = 10


class LoadTracker:
    def __init__(self, window: float = 300.0, max_samples: int = 1000, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window
        self._clock = clock
        self._samples: deque[tuple[float, bool, float]] = deque(maxlen=max_samples)

    def record(self, ok: bool, duration_ms: float) -> None:
        self._samples.append((self._clock(), ok, duration_ms))

    def snapshot(self, running: int, queued: int) -> LoadReport:
        since = self._clock() - self._window
        while self._samples and self._samples[0][0] < since:
            self._samples.popleft()
        n = len(self._samples)
        ok = sum(1 for _, good, _ in self._samples if good)
        total = sum(d for _, _, d in self._samples)
        return {
            "current_load": running,
            "queue_length": queued,
            "avg_latency_ms": round(total / n, 1) if n else 0.0,
            # No recent work is no evidence of trouble: a fresh agent reports full health.
            "health": round((ok + HEALTH_PRIOR_SUCCESSES) / (n + HEALTH_PRIOR_SUCCESSES), 3),
        }
