"""Redelivery dedupe: the outcome of each message this node handled, keyed by its producer's
idempotency key (or its message id), so an at-least-once redelivery is answered with the earlier
result instead of running the handler twice.

Bounded by entry count, by an estimate of the bytes it holds, and by age (30 min by default):
the least recently used entries go first.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from .message import Message


@dataclass(frozen=True, slots=True)
class Handled:
    """The handler returned: its result and the context fragments it set."""

    payload: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Refused:
    """The handler refused the message for good (a retryable failure is never remembered)."""

    code: int
    reason: str


Outcome = Union[Handled, Refused]


@dataclass(frozen=True, slots=True)
class DedupeOptions:
    max_entries: int = 10_000
    #: Seconds an outcome is remembered.
    ttl: float = 30 * 60
    #: Bytes of remembered results (their JSON length as the estimate).
    max_bytes: int = 64 * 1024 * 1024


def dedupe_key(m: Message) -> str:
    """Idempotency keys are unique per producer; without one, the message id is the key."""
    return f"key:{m.producer}:{m.idempotency_key}" if m.idempotency_key else f"id:{m.message_id}"


def _size(outcome: Outcome) -> int:
    if isinstance(outcome, Refused):
        return len(outcome.reason) + 64
    try:
        return len(json.dumps(outcome.payload, default=repr)) + 64
    except (TypeError, ValueError):
        return 1024


@dataclass(slots=True)
class _Entry:
    outcome: Outcome
    size: int
    expires_at: float


class DedupeCache:
    def __init__(self, options: DedupeOptions = DedupeOptions(), clock: Callable[[], float] = time.monotonic) -> None:
        self._options = options
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def byte_size(self) -> int:
        return self._bytes

    def get(self, key: str) -> Outcome | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= self._clock():
            self._remove(key)
            return None
        self._entries.move_to_end(key)  # most recently used
        return entry.outcome

    def set(self, key: str, outcome: Outcome) -> None:
        if key in self._entries:
            self._remove(key)
        size = _size(outcome)
        # A single result larger than the whole budget is not remembered at all.
        if size > self._options.max_bytes:
            return
        self._entries[key] = _Entry(outcome, size, self._clock() + self._options.ttl)
        self._bytes += size
        self._evict()

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key)
        self._bytes -= entry.size

    def _evict(self) -> None:
        now = self._clock()
        while self._entries:
            key, oldest = next(iter(self._entries.items()))
            over = len(self._entries) > self._options.max_entries or self._bytes > self._options.max_bytes
            if not over and oldest.expires_at > now:
                return
            self._remove(key)
