"""Session context fragments.

A delegated task carries pieces of its caller's context in envelope headers named
``reach-context-<name>`` (string values; JSON by convention). A handler reads them from
``ctx.session``, may set new or updated fragments, and exactly those travel back with its result
(in the ``result`` frame's ``headers``, which the dispatcher copies onto the ``task_result``).
Agent-Reach never reads them: they are opaque, like the payload.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

CONTEXT_HEADER_PREFIX = "reach-context-"

_FRAGMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def _check_name(name: str) -> None:
    if not _FRAGMENT_NAME.match(name):
        raise ValueError(f"context fragment name {name!r} must be letters, digits, _ . - (at most 100)")


def context_from_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The fragments carried in a headers map, by fragment name."""
    n = len(CONTEXT_HEADER_PREFIX)
    return {k[n:]: v for k, v in headers.items() if k.startswith(CONTEXT_HEADER_PREFIX)}


def context_to_headers(fragments: Mapping[str, str]) -> dict[str, str]:
    """Headers carrying the given fragments."""
    out: dict[str, str] = {}
    for name, value in fragments.items():
        _check_name(name)
        out[CONTEXT_HEADER_PREFIX + name] = value
    return out


class SessionContext:
    """The fragments a handler was given, and the ones it sets to send back."""

    def __init__(self, headers: Mapping[str, str], session_id: str | None = None) -> None:
        #: The envelope's session_id, if any.
        self.id = session_id
        self._received = context_from_headers(headers)
        self._updated: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        return self._updated.get(name, self._received.get(name))

    def get_json(self, name: str) -> Any:
        """A fragment parsed as JSON; None when absent or not JSON."""
        value = self.get(name)
        if value is None:
            return None
        try:
            return json.loads(value)
        except ValueError:
            return None

    def set(self, name: str, value: str) -> None:
        _check_name(name)
        self._updated[name] = value

    def set_json(self, name: str, value: Any) -> None:
        self.set(name, json.dumps(value, separators=(",", ":")))

    def all(self) -> dict[str, str]:
        """Every fragment as the handler sees it now: pass it on when delegating."""
        return {**self._received, **self._updated}

    def changes(self) -> dict[str, str]:
        """Only the fragments this handler set: what travels back with its result."""
        return dict(self._updated)
