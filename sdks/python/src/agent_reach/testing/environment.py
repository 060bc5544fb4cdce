"""One way to test agents in both modes (issue 28): the same test code starts agents, sends
messages and reads their timelines against direct mode's local control plane (no Kafka,
PostgreSQL or Redis; its time can be skipped) or against the real stack (queued).

    async with create_test_environment("direct") as env:
        agent = await env.start_agent(handlers={cap: handler})
        out = await env.submit({"capability": cap, "payload": {}}, wait_ms=10_000)
        assert [e["state"] for e in await env.events(out["message_id"])] == ["PENDING", "ROUTED", "DELIVERING", "DELIVERED"]

As a pytest fixture: ``reach_env`` (the mode from ``@pytest.mark.parametrize("reach_env", ["direct"],
indirect=True)``, else AGENT_REACH_MODE, else direct).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from ..direct import LocalReachProcess
from ..errors import ReachError
from ..mode import ReachMode, mode_of
from ..node import AgentNode
from ..reach_client import ReachClient
from .agents import Served, StartedAgent, admin_client, start_test_agent, unique_capability
from .stack import LocalStack, local_stack

TERMINAL = frozenset({"DELIVERED", "REJECTED", "DEAD"})


def _terminal(row: Mapping[str, Any]) -> bool:
    return row.get("status") in TERMINAL


def _served_of(options: Mapping[str, Any]) -> Served:
    """The names a test agent serves, from start_agent's options: handlers and declared
    capabilities (mode handle), subscriptions (mode subscribe)."""
    declared = [{"name": c, "mode": "handle"} if isinstance(c, str) else dict(c) for c in (options.get("descriptor") or {}).get("capabilities") or []]
    return Served(
        capabilities=tuple([*(options.get("handlers") or {}), *(c["name"] for c in declared if c.get("mode", "handle") != "subscribe")]),
        topics=tuple([*(options.get("subscriptions") or {}), *(c["name"] for c in declared if c.get("mode") == "subscribe")]),
    )


class TestEnvironment:
    """Agents, messages and timelines in one mode. ``local`` is direct mode's control plane
    (``skip_time``, ``lose_answers``, ``drop_connection``); None when queued."""

    __test__ = False  # not a pytest test class

    def __init__(self, mode: ReachMode, stack: LocalStack, client: ReachClient, local: LocalReachProcess | None, owns_local: bool) -> None:
        self.mode = mode
        self.stack = stack
        self.client = client
        self.local = local
        self._owns_local = owns_local
        self._agents: list[StartedAgent] = []
        self._nodes: list[AgentNode] = []
        #: By agent id: the names each started agent serves.
        self._served: dict[str, Served] = {}

    async def start_agent(self, **options: Any) -> StartedAgent:
        """``start_test_agent`` in this environment (handlers=, subscriptions=, descriptor=, node
        options). It returns once routing and the pre-flight views of this environment's agents
        agree on it and on them (queued: the router; direct: the local control plane)."""
        queued = self.mode == "queued"
        agent = await start_test_agent(stack=self.stack, routable=queued, started=list(self._agents) if queued else (), **options)
        self._agents.append(agent)
        self._served[agent.agent_id] = _served_of(options)
        if self.local is not None:
            await self._until_views_follow(self.local)
        return agent

    async def _until_views_follow(self, local: LocalReachProcess, timeout: float = 5.0) -> None:
        """Direct mode: the connected nodes' pre-flight views agree with the local control plane on
        every name this environment's agents serve that it routes or refuses by domain — a view
        arrives a moment after the agent it is about, and a request made before must not be
        refused from it."""
        deadline = time.monotonic() + timeout
        while True:
            behind: list[str] = []
            for viewer in self._agents:
                node = viewer.node
                if node.routes_view == "off" or not node.connected:
                    continue
                truth = await local.routes_for(viewer.agent_id)
                if truth is None:
                    continue
                for served in self._served.values():
                    for kind, names, table in (("capability", served.capabilities, truth["capabilities"]), ("topic", served.topics, truth["topics"])):
                        for name in names:
                            expected = table.get(name)
                            if expected is None or expected == 2001:
                                continue  # nothing a stale view could refuse wrongly
                            seen = node.route_verdict(name, kind)  # type: ignore[arg-type]
                            if seen != expected:
                                behind.append(f"{viewer.agent_id}: {kind} {name}={seen}, local control plane {expected}")
            if not behind:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the pre-flight views do not follow the local control plane ({'; '.join(behind)})")
            await asyncio.sleep(0.005)

    def node(self, descriptor: Mapping[str, Any], **options: Any) -> AgentNode:
        """An AgentNode with this environment's endpoints, stopped with it."""
        n = AgentNode(
            descriptor,
            registry_url=self.stack.registry_url,
            dispatcher_url=self.stack.dispatcher_url,
            ingress_url=self.stack.ingress_url,
            token=self.stack.admin_token,
            handle_signals=False,
            **options,
        )
        self._nodes.append(n)
        return n

    async def submit(self, fields: Mapping[str, Any], *, wait_ms: int | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
        return await self.client.submit(fields, wait_ms=wait_ms, idempotency_key=idempotency_key)

    async def status(self, message_id: str) -> dict[str, Any] | None:
        try:
            return await self.client.status(message_id)
        except ReachError as err:
            if err.details.get("http_status") == 404:
                return None  # not in the read model (yet)
            raise

    async def events(self, message_id: str) -> list[dict[str, Any]]:
        return await self.client.events(message_id)

    async def wait_for(self, message_id: str, until: Callable[[Mapping[str, Any]], bool] = _terminal, timeout: float = 20.0) -> dict[str, Any]:
        """The message's row once ``until(row)`` holds (default: a terminal state)."""
        deadline = time.monotonic() + timeout
        while True:
            row = await self.status(message_id)
            if row is not None and until(row):
                return row
            if time.monotonic() > deadline:
                raise AssertionError(f"message {message_id} is {row and row.get('status')} after {timeout} s")
            await asyncio.sleep(0.03)

    async def agents(self, capability: str | None = None) -> list[dict[str, Any]]:
        return await self.client.agents(capability=capability)

    async def skip_time(self, ms: float) -> None:
        """Lets ``ms`` of control-plane time pass: at once in direct mode, by waiting in queued mode."""
        if self.local is not None:
            await self.local.skip_time(ms)
        else:
            await asyncio.sleep(ms / 1000)

    @staticmethod
    def unique_capability(verb: str) -> str:
        return unique_capability(verb)

    async def stop(self, drain_timeout: float = 2.0) -> None:
        await asyncio.gather(*(a.stop(drain_timeout) for a in self._agents), *(n.stop(drain_timeout) for n in self._nodes), return_exceptions=True)
        self._agents.clear()
        self._nodes.clear()
        self._served.clear()
        await self.client.aclose()
        if self.local is not None and self._owns_local:
            self.local.close()

    async def __aenter__(self) -> "TestEnvironment":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def create_test_environment(
    mode: str | None = None,
    *,
    local: LocalReachProcess | None = None,
    time_scale: float = 1.0,
    reach_env: Mapping[str, str] | None = None,
    stack: LocalStack | None = None,
) -> TestEnvironment:
    """``direct`` (default unless AGENT_REACH_MODE says otherwise): a local control plane of its
    own (or ``local``, shared), configured by ``reach_env`` (REACH_* options) and ``time_scale``.
    ``queued``: the stack of ``reach up`` (or ``stack``)."""
    chosen = mode_of(mode) if mode is not None else (mode_of() if os.environ.get("AGENT_REACH_MODE") else "direct")
    if chosen == "queued":
        s = stack or local_stack()
        return TestEnvironment("queued", s, admin_client(s), None, False)
    owns = local is None
    plane = local or await asyncio.to_thread(LocalReachProcess.start, time_scale=time_scale, reach_env=reach_env)
    s = LocalStack(
        registry_url=plane.registry_url,
        dispatcher_url=plane.dispatcher_url,
        ingress_url=plane.ingress_url,
        router_url=plane.url,
        admin_token=None,
        home=Path.cwd(),
    )
    return TestEnvironment("direct", s, ReachClient(plane.ingress_url, registry_url=plane.registry_url), plane, owns)
