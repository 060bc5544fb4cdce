"""Where an agent finds Agent-Reach, from its environment.

The SDK's variables are named ``AGENT_REACH_*``, never ``REACH_*``: those are the services'
options, and a service refuses to start with a ``REACH_*`` name it does not know. The defaults
are the local stack of ``reach up``.

    AGENT_REACH_MODE            queued (default) or direct: no infrastructure, a local control plane (agent_reach.direct)
    AGENT_REACH_REGISTRY_URL    http://127.0.0.1:7411
    AGENT_REACH_DISPATCHER_URL  ws://127.0.0.1:7412/v1/connect
    AGENT_REACH_INGRESS_URL     http://127.0.0.1:7410
    AGENT_REACH_TOKEN           enrollment (or admin) token for registration, when needed
    AGENT_REACH_CA_FILE         PEM of a private CA for https/wss URLs (docs/transport-security.md)
    AGENT_REACH_CLIENT_CERT     client certificate (PEM) for mutual TLS, with AGENT_REACH_CLIENT_KEY
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from typing import Mapping

from .mode import mode_of


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    registry_url: str
    dispatcher_url: str
    ingress_url: str
    token: str | None = None
    #: AGENT_REACH_MODE: ``queued`` (default) or ``direct``.
    mode: str = "queued"
    #: The registry or dispatcher URL was set (not the defaults): a direct-mode node joins that
    #: control plane (e.g. a test's) instead of starting its own.
    explicit_endpoints: bool = False
    #: TLS settings for https/wss with a private CA (None: the system trust store).
    ssl_context: ssl.SSLContext | None = None


def ssl_context_from_files(ca_file: str | None, cert_file: str | None = None, key_file: str | None = None) -> ssl.SSLContext | None:
    """An SSLContext that verifies servers against ``ca_file`` (the system store when not given) and
    presents ``cert_file``/``key_file`` for mutual TLS; None when nothing is given."""
    if not ca_file and not cert_file:
        return None
    if bool(cert_file) != bool(key_file):
        raise ValueError("AGENT_REACH_CLIENT_CERT and AGENT_REACH_CLIENT_KEY must be set together")
    ctx = ssl.create_default_context(cafile=ca_file or None)
    if cert_file and key_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def connection_from_env(env: Mapping[str, str] | None = None) -> ConnectionSettings:
    e = os.environ if env is None else env
    return ConnectionSettings(
        registry_url=e.get("AGENT_REACH_REGISTRY_URL") or "http://127.0.0.1:7411",
        dispatcher_url=e.get("AGENT_REACH_DISPATCHER_URL") or "ws://127.0.0.1:7412/v1/connect",
        ingress_url=e.get("AGENT_REACH_INGRESS_URL") or "http://127.0.0.1:7410",
        token=e.get("AGENT_REACH_TOKEN") or None,
        mode=mode_of(None, e),
        explicit_endpoints=bool(e.get("AGENT_REACH_REGISTRY_URL") or e.get("AGENT_REACH_DISPATCHER_URL")),
        ssl_context=ssl_context_from_files(e.get("AGENT_REACH_CA_FILE"), e.get("AGENT_REACH_CLIENT_CERT"), e.get("AGENT_REACH_CLIENT_KEY")),
    )
