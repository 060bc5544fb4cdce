"""Finding (or starting) the local Agent-Reach stack a test runs against.

The stack of ``reach up`` is found the way the services and the TypeScript testing kit find it:
REACH_HTTP_HOST and the REACH_*_PORT variables (defaults 7410…7416, docs/design.md §3), the
admin token from REACH_ADMIN_TOKEN, ``$REACH_HOME/admin-token`` or ``.reach/admin-token`` above
the working directory. With none of them set that is the default stack; set them to point tests at another.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import httpx


@dataclass(frozen=True, slots=True)
class LocalStack:
    registry_url: str
    dispatcher_url: str
    ingress_url: str
    #: A router's admin view (``GET /v1/view/agents/{id}``), to wait until routing can see an agent.
    router_url: str
    #: The stack's admin token (also accepted for registration); None when none was found.
    admin_token: str | None
    #: The stack's REACH_HOME (its state, logs, generated secrets).
    home: Path

    def secret(self, name: str) -> str | None:
        """A generated secret of the stack (``token-secret``, ``admin-token``), if it is there."""
        f = self.home / name
        return f.read_text().strip() if f.is_file() else None

    def endpoint(self, component: str) -> str | None:
        """An endpoint ``reach up`` recorded in ``state.json`` (``kafka``, ``schema-registry``, …)."""
        try:
            state = json.loads((self.home / "state.json").read_text())
        except (OSError, ValueError):
            return None
        value = state.get("endpoints", {}).get(component) if isinstance(state, dict) else None
        return value if isinstance(value, str) else None

    @property
    def kafka_brokers(self) -> str:
        """REACH_KAFKA_BROKERS, else the stack's own Kafka as `reach up` recorded it, else 127.0.0.1:9092."""
        return os.environ.get("REACH_KAFKA_BROKERS") or self.endpoint("kafka") or "127.0.0.1:9092"

    @property
    def schema_registry_url(self) -> str:
        """REACH_SCHEMA_REGISTRY_URL, else the stack's schema registry as `reach up` recorded it, else :8081."""
        return os.environ.get("REACH_SCHEMA_REGISTRY_URL") or self.endpoint("schema-registry") or "http://127.0.0.1:8081"


def _find_upwards(relative: str, start: Path) -> Path | None:
    for d in (start, *start.parents):
        if (d / relative).exists():
            return d / relative
    return None


def _home(env: Mapping[str, str]) -> Path:
    if env.get("REACH_HOME"):
        return Path(env["REACH_HOME"]).resolve()
    found = _find_upwards(".reach", Path.cwd())
    return found if found is not None else Path.cwd() / ".reach"


def local_stack(env: Mapping[str, str] | None = None) -> LocalStack:
    """The local stack's endpoints: REACH_HTTP_HOST and the REACH_*_PORT variables, else the defaults."""
    e = os.environ if env is None else env
    host = e.get("REACH_HTTP_HOST") or "127.0.0.1"
    host = "127.0.0.1" if host == "0.0.0.0" else host

    def port(name: str, default: int) -> int:
        return int(e.get(name) or default)

    home = _home(e)
    admin = e.get("REACH_ADMIN_TOKEN") or None
    if admin is None and (home / "admin-token").is_file():
        admin = (home / "admin-token").read_text().strip()
    return LocalStack(
        registry_url=f"http://{host}:{port('REACH_REGISTRY_PORT', 7411)}",
        dispatcher_url=f"ws://{host}:{port('REACH_DISPATCHER_PORT', 7412)}/v1/connect",
        ingress_url=f"http://{host}:{port('REACH_INGRESS_PORT', 7410)}",
        router_url=f"http://{host}:{port('REACH_ROUTER_PORT', 7415)}",
        admin_token=admin,
        home=home,
    )


def is_ready(stack: LocalStack, timeout: float = 2.0) -> bool:
    """Do the registry, dispatcher, ingress and router answer ``/readyz``?"""
    urls = [stack.registry_url, stack.dispatcher_url.replace("ws://", "http://").removesuffix("/v1/connect"), stack.ingress_url, stack.router_url]
    try:
        return all(httpx.get(f"{u}/readyz", timeout=timeout).is_success for u in urls)
    except httpx.HTTPError:
        return False


def reach_cli(env: Mapping[str, str] | None = None) -> list[str] | None:
    """How to run the ``reach`` CLI: REACH_CLI (a command line), the checkout's
    ``packages/cli/dist/bin.js`` above the working directory, or ``reach`` on PATH."""
    e = os.environ if env is None else env
    if e.get("REACH_CLI"):
        return e["REACH_CLI"].split()
    bin_js = _find_upwards("packages/cli/dist/bin.js", Path.cwd())
    node = shutil.which("node")
    if bin_js is not None and node is not None:
        return [node, str(bin_js)]
    found = shutil.which("reach")
    return [found] if found else None


def start_stack(cli: list[str], env: Mapping[str, str] | None = None, timeout: float = 300.0) -> None:
    """``reach up --detach``: starts the stack in the background (the first run fetches Kafka)."""
    subprocess.run([*cli, "up", "--detach"], env=dict(os.environ if env is None else env), check=True, timeout=timeout)


def stop_stack(cli: list[str], env: Mapping[str, str] | None = None, timeout: float = 180.0) -> None:
    subprocess.run([*cli, "down"], env=dict(os.environ if env is None else env), check=False, timeout=timeout)
