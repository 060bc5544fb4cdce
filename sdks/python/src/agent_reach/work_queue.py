"""Runs at most ``limit`` jobs at once (the agent's max_concurrency); the rest wait in a FIFO.
``running`` and ``queued`` are what heartbeats report as current_load and queue_length."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Awaitable, Callable, Generic, TypeVar

T = TypeVar("T")

_log = logging.getLogger("agent_reach")


class WorkQueue(Generic[T]):
    def __init__(self, limit: int, run: Callable[[T], Awaitable[None]], on_running_changed: Callable[[], None] | None = None) -> None:
        """``on_running_changed`` is called after jobs started or one ended (``running`` changed)."""
        if limit < 1:
            raise ValueError(f"concurrency limit must be a positive integer, got {limit}")
        self._limit = limit
        self._run = run
        self._on_running_changed = on_running_changed
        self._waiting: deque[T] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def running(self) -> int:
        return len(self._tasks)

    @property
    def queued(self) -> int:
        return len(self._waiting)

    def push(self, item: T) -> None:
        before = len(self._tasks)
        self._waiting.append(item)
        self._idle.clear()
        self._pump()
        self._report(before)

    def _report(self, before: int) -> None:
        if len(self._tasks) != before and self._on_running_changed is not None:
            self._on_running_changed()

    def take_queued(self) -> list[T]:
        """Removes and returns every job that has not started yet."""
        items = list(self._waiting)
        self._waiting.clear()
        self._check_idle()
        return items

    async def idle(self) -> None:
        """Returns when no job runs and none waits."""
        await self._idle.wait()

    def _pump(self) -> None:
        while len(self._tasks) < self._limit and self._waiting:
            task = asyncio.create_task(self._run_one(self._waiting.popleft()))
            self._tasks.add(task)

    async def _run_one(self, item: T) -> None:
        try:
            await self._run(item)
        except Exception:
            # `run` owns its errors; this only keeps a bug there from stalling the queue.
            _log.exception("a job of the work queue failed")
        finally:
            before = len(self._tasks)
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]
            self._pump()  # the next waiting job takes the freed slot: then ``running`` did not change
            self._report(before)
            self._check_idle()

    def _check_idle(self) -> None:
        if not self._tasks and not self._waiting:
            self._idle.set()
