"""Where an agent finds Agent-Reach, from its environment.

The SDK's variables are named ``AGENT_REACH_*``, never ``REACH_*``: those are the services'
options, and a service refuses to start with a ``REACH_*`` name it does not know. The defaults
are the local stack of ``reach up``.

    AGENT_REACH_REGISTRY_URL    http://127.0.0.1:7411
    AGENT_REACH_DISPATCHER_URL  ws://127.0.0.1:7412/v1/connect
    AGENT_REACH_INGRESS_URL     http://127.0.0.1:7410
    AGENT_REACH_TOKEN           enrollment (or admin) token for registration, when needed
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    registry_url: str
    dispatcher_url: str
    ingress_url: str
    token: str | None = None


def connection_from_env(env: Mapping[str, str] | None = None) -> ConnectionSettings:
    e = os.environ if env is None else env
    return ConnectionSettings(
        registry_url=e.get("AGENT_REACH_REGISTRY_URL") or "http://127.0.0.1:7411",
        dispatcher_url=e.get("AGENT_REACH_DISPATCHER_URL") or "ws://127.0.0.1:7412/v1/connect",
        ingress_url=e.get("AGENT_REACH_INGRESS_URL") or "http://127.0.0.1:7410",
        token=e.get("AGENT_REACH_TOKEN") or None,
    )
