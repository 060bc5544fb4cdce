"""The registry's agent API: register, heartbeat, deregister, list, show."""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import quote, urlencode

from .errors import ReachError
from .http import JsonHttp, join_url, list_of
from .message import LoadReport, Registration


class RegistryClient:
    def __init__(self, url: str, http: JsonHttp) -> None:
        self.url = url
        self._http = http

    def _agent(self, agent_id: str, suffix: str = "") -> str:
        return join_url(self.url, f"/v1/agents/{quote(agent_id, safe='')}{suffix}")

    async def register(self, descriptor: Mapping[str, Any], token: str | None = None) -> Registration:
        """``POST /v1/agents`` with the enrollment (or admin, or the agent's own) token when one is needed."""
        res = await self._http.request("POST", join_url(self.url, "/v1/agents"), token=token, body=dict(descriptor))
        r: dict[str, Any] = res.body if isinstance(res.body, dict) else {}
        agent_id, token, lease_id = r.get("agent_id"), r.get("token"), r.get("lease_id")
        if not isinstance(agent_id, str) or not isinstance(token, str):
            raise ReachError("INTERNAL", f"registry answered {res.status} without agent_id and token")
        given_ttl, interval, warnings = r.get("ttl_s"), r.get("heartbeat_interval_ms"), r.get("warnings")
        ttl = float(given_ttl) if isinstance(given_ttl, (int, float)) else float(descriptor.get("ttl_s", 60))
        return Registration(
            agent_id=agent_id,
            lease_id=lease_id if isinstance(lease_id, str) else "",
            token=token,
            ttl_s=ttl,
            heartbeat_interval_ms=float(interval) if isinstance(interval, (int, float)) and interval > 0 else ttl * 500,
            warnings=tuple(w for w in warnings if isinstance(w, dict) and isinstance(w.get("message"), str)) if isinstance(warnings, list) else (),
        )

    async def heartbeat(self, agent_id: str, token: str, load: LoadReport) -> None:
        await self._http.request("POST", self._agent(agent_id, "/heartbeat"), token=token, body=dict(load))

    async def deregister(self, agent_id: str, token: str) -> None:
        """``DELETE /v1/agents/{id}``; an agent the registry no longer knows counts as deregistered."""
        await self._http.request("DELETE", self._agent(agent_id), token=token, accept=(404, 410))

    async def list(self, *, capability: str | None = None, status: str | None = None, domain: str | None = None, token: str | None = None) -> list[dict[str, Any]]:
        query = {k: v for k, v in {"capability": capability, "status": status, "domain": domain}.items() if v}
        url = join_url(self.url, "/v1/agents") + (f"?{urlencode(query)}" if query else "")
        res = await self._http.request("GET", url, token=token)
        return [a for a in list_of(res.body, "agents") if isinstance(a, dict)]

    async def get(self, agent_id: str, token: str | None = None) -> dict[str, Any]:
        res = await self._http.request("GET", self._agent(agent_id), token=token)
        body: dict[str, Any] = res.body if isinstance(res.body, dict) else {}
        agent = body.get("agent")
        return agent if isinstance(agent, dict) else body
