"""The node's real load for heartbeats: handler outcomes of the last five minutes, bounded to the
newest ``max_samples``, plus what runs and waits right now."""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

from .message import LoadReport


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
            "health": round(ok / n, 3) if n else 1.0,
        }
