"""R-G5: ``AGENT_REACH_MODE=direct|queued``.

``queued`` (the default) is the real thing: every message goes through Agent-Reach's services.
``direct`` runs the same agent code with no infrastructure: nodes talk to a local control plane
(``agent_reach.direct``) that routes with Agent-Reach's own routing, agents and rules packages
and keeps the asynchronous delivery semantics (acks, rejects, retries with backoff, ack
deadlines, redeliveries, a timeline per message).
"""

from __future__ import annotations

import os
from typing import Literal, Mapping

ReachMode = Literal["direct", "queued"]
REACH_MODES: tuple[ReachMode, ...] = ("direct", "queued")


def mode_of(option: str | None = None, env: Mapping[str, str] | None = None) -> ReachMode:
    """The mode to run in: the option when given, else AGENT_REACH_MODE, else ``queued``."""
    e = os.environ if env is None else env
    raw = (option if option is not None else (e.get("AGENT_REACH_MODE") or "").strip().lower()) or "queued"
    if raw not in REACH_MODES:
        raise ValueError(f"AGENT_REACH_MODE must be direct or queued (got {raw!r})")
    return raw  # type: ignore[return-value]
