"""Running agents against the local stack in tests: unique names so tests never see each other's
agents, a wait until routing can see an agent, and cleanup that deregisters what a test started."""

from __future__ import annotations

import asyncio
import inspect
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import httpx

from ..handler_context import Handler
from ..message import Message
from ..node import AgentNode
from ..reach_client import ReachClient
from .stack import LocalStack, local_stack


def unique_name(prefix: str) -> str:
    """``<prefix>-<time>-<random>``: a name (agent type, session) no other test uses."""
    return f"{prefix}-{int(time.time() * 1000):x}-{secrets.token_hex(3)}"


def unique_capability(verb: str) -> str:
    """A capability name no other test uses, in the registry's grammar (lower-case ``verb_object``)."""
    return f"{verb}_t{int(time.time() * 1000):x}{secrets.token_hex(3)}"


def admin_client(stack: LocalStack | None = None, token: str | None = None) -> ReachClient:
    """A ReachClient of the local stack with the admin token (or the given one)."""
    s = stack or local_stack()
    return ReachClient(s.ingress_url, registry_url=s.registry_url, token=token or s.admin_token)


@dataclass(frozen=True)
class Served:
    """The names an agent serves: capabilities (mode handle) and topics (mode subscribe)."""

    capabilities: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()


def views_behind(nodes: Iterable[AgentNode], agent_id: str, served: Served) -> list[str]:
    """Which of ``nodes`` do not yet see ``served`` (the names of agent ``agent_id``) as reachable in
    their local routes view — held, and not 2001 — as ``node: name=verdict``; empty once they all
    agree with a router that routes to the agent. Nodes with pre-flight off, and nodes not
    connected now, have no view to wait for."""
    behind: list[str] = []
    for node in nodes:
        if node.agent_id == agent_id or node.routes_view == "off" or not node.connected:
            continue
        for kind, names in (("capability", served.capabilities), ("topic", served.topics)):
            for name in names:
                verdict = node.route_verdict(name, kind)  # type: ignore[arg-type]
                if verdict is None or verdict == 2001:
                    behind.append(f"{node.agent_id}: {kind} {name}={verdict}")
    return behind


async def wait_until_routable(
    agent_id: str,
    stack: LocalStack | None = None,
    timeout: float = 10.0,
    *,
    views: Sequence[AgentNode] = (),
    if_routable: bool = False,
) -> None:
    """Routers route from views fed by Kafka, a few milliseconds behind the registry and the
    dispatcher: a test that sends right after start() could race them and see 2001. Waits until
    the router's view has the agent ONLINE and connected (needs the admin token) — and, with
    ``views``, until those nodes' own pre-flight views (their dispatcher's ``routes`` frames) agree:
    every name the agent serves is held and not 2001 (0, or 2003/3001 when a domain or a circuit
    refuses that node, as the router would), so a request they make is not refused from a view a
    moment older than the router's. ``if_routable``: return at once when the router does not route
    to the agent now (it stopped or is away) instead of waiting for it."""
    s = stack or local_stack()
    if not s.admin_token:
        raise RuntimeError("wait_until_routable needs the stack's admin token (REACH_ADMIN_TOKEN or REACH_HOME/admin-token)")
    deadline = time.monotonic() + timeout
    last = "unreachable"
    async with httpx.AsyncClient(timeout=5) as http:
        while True:
            try:
                res = await http.get(f"{s.router_url}/v1/view/agents/{agent_id}", headers={"authorization": f"Bearer {s.admin_token}"})
                last = f"router view: {res.status_code}"
                if res.is_success:
                    view = res.json()
                    if view.get("status") == "ONLINE" and (view.get("presence") or {}).get("connected"):
                        caps = view.get("capabilities") or []
                        served = Served(
                            capabilities=tuple(c["name"] for c in caps if c.get("mode") != "subscribe"),
                            topics=tuple(c["name"] for c in caps if c.get("mode") == "subscribe"),
                        )
                        behind = views_behind(views, agent_id, served)
                        if not behind:
                            return
                        last = f"routable for the router; not yet in the pre-flight views ({'; '.join(behind)})"
                    elif if_routable:
                        return
                elif if_routable and res.status_code == 404:
                    return
            except httpx.HTTPError as err:
                last = str(err)
            if time.monotonic() > deadline:
                raise TimeoutError(f"agent {agent_id} is not routable after {timeout} s ({last})")
            await asyncio.sleep(0.025)


async def until_views_agree(agent: "StartedAgent", others: Iterable["StartedAgent"], stack: LocalStack | None = None) -> None:
    """A started test agent and the router agree, both ways, with the test agents started before
    it: the router routes to the new agent and their pre-flight views say so; its own view says so
    of each of them the router routes to."""
    before = [a for a in others if a is not agent]
    # The first subscription starts a dispatcher's feeds (a Kafka group join): more time than the router alone needs.
    await wait_until_routable(agent.agent_id, stack, 20.0, views=[a.node for a in before])
    for other in before:
        await wait_until_routable(other.agent_id, stack, 20.0, views=[agent.node], if_routable=True)


@dataclass
class StartedAgent:
    node: AgentNode
    agent_id: str
    #: Every message a handler of this agent was given, in order.
    received: list[Message] = field(default_factory=list)

    async def stop(self, drain_timeout: float = 2.0) -> None:
        await self.node.stop(drain_timeout)


def _recording(fn: Handler, received: list[Message], takes_ctx: bool) -> Any:
    if inspect.iscoroutinefunction(fn):

        async def async_recorder(msg: Message, ctx: Any) -> Any:
            received.append(msg)
            return await (fn(msg, ctx) if takes_ctx else fn(msg))  # type: ignore[call-arg]

        return async_recorder

    def sync_recorder(msg: Message, ctx: Any) -> Any:
        received.append(msg)
        return fn(msg, ctx) if takes_ctx else fn(msg)  # type: ignore[call-arg]

    return sync_recorder


def _takes_ctx(fn: Handler) -> bool:
    try:
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return True
    return len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


async def start_test_agent(
    *,
    handlers: Mapping[str, Handler] | None = None,
    subscriptions: Mapping[str, Handler] | None = None,
    direct: Handler | None = None,
    descriptor: Mapping[str, Any] | None = None,
    stack: LocalStack | None = None,
    routable: bool = True,
    started: Iterable[StartedAgent] = (),
    **node_options: Any,
) -> StartedAgent:
    """Registers and connects an agent with the given handlers (a unique agent type), waits until
    it is routable, and records what its handlers were given. Synchronous handlers stay
    synchronous (they run in the node's thread pool). ``started``: test agents started before it;
    it also waits until their pre-flight views and its own agree with the router
    (``until_views_agree``)."""
    s = stack or local_stack()
    received: list[Message] = []
    # The stack's endpoints and admin token unless the test gives its own (e.g. a proxy in between).
    options: dict[str, Any] = {
        "registry_url": s.registry_url,
        "dispatcher_url": s.dispatcher_url,
        "ingress_url": s.ingress_url,
        "token": s.admin_token,
        "handle_signals": False,
        **node_options,
    }
    described: dict[str, Any] = {"agent_type": unique_name("py-test-agent"), **(descriptor or {})}
    node = AgentNode(described, **options)
    for cap, fn in (handlers or {}).items():
        node.handle(cap, _recording(fn, received, _takes_ctx(fn)))
    for topic, fn in (subscriptions or {}).items():
        node.subscribe(topic, _recording(fn, received, _takes_ctx(fn)))
    if direct is not None:
        node.on_direct(_recording(direct, received, _takes_ctx(direct)))
    await node.start()
    assert node.agent_id is not None
    agent = StartedAgent(node, node.agent_id, received)
    if routable:
        try:
            await until_views_agree(agent, started, s)
        except BaseException:
            await node.stop(0)  # not left running, registered, by a failed start
            raise
    return agent
