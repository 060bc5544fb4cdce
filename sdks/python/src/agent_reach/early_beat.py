"""A heartbeat as soon as the load crosses the busy line (the TypeScript SDK's EarlyBeat).

Routers know an agent's load only from its heartbeats, which come every half lease (30 s by
default). A router that saw a node full holds the work meant for it (PENDING 2002) until it sees
a slot free again: without an early heartbeat, a task held for an agent whose only slot had just
freed waited up to 30 s for the next one. ``EarlyBeat`` asks for a heartbeat as soon as the load
crosses the busy line (half of max_concurrency) in either direction since the last report: up,
so routers stop choosing a full node; down, so they send it the held work. At most one early
heartbeat every ``min_gap`` seconds: a node hovering around the line costs the registry a
heartbeat every two seconds, not one per handler.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

EARLY_BEAT_GAP_S = 2.0
#: The share of max_concurrency at or above which a node counts as busy.
BUSY_SHARE = 0.5


class EarlyBeat:
    def __init__(
        self,
        *,
        max_concurrency: int,
        running: Callable[[], int],
        beat: Callable[[], bool],
        min_gap: float = EARLY_BEAT_GAP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``beat`` sends a heartbeat now and returns False when one is already on its way
        (then it is tried again after the gap)."""
        self._max = max_concurrency
        self._running = running
        self._beat = beat
        self._gap = min_gap
        self._clock = clock
        self._last_at = float("-inf")
        self._reported_busy = False
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = False

    def _busy(self, running: int) -> bool:
        return running > 0 and running >= self._max * BUSY_SHARE

    def sent(self, running: int) -> None:
        """A heartbeat (early or regular) reported ``running`` handlers."""
        self._last_at = self._clock()
        self._reported_busy = self._busy(running)

    def changed(self) -> None:
        """A handler started or ended (call from the event loop)."""
        if self._stopped or self._timer is not None or self._busy(self._running()) == self._reported_busy:
            return
        delay = max(0.0, self._last_at + self._gap - self._clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        # crossed back meanwhile: the last report is right again
        if self._stopped or self._busy(self._running()) == self._reported_busy:
            return
        if not self._beat():
            self._timer = asyncio.get_running_loop().call_later(self._gap, self._fire)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
