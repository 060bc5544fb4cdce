"""Running agents against the local stack in tests: unique names so tests never see each other's
agents, a wait until routing can see an agent, and cleanup that deregisters what a test started."""

from __future__ import annotations

import asyncio
import inspect
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

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


async def wait_until_routable(agent_id: str, stack: LocalStack | None = None, timeout: float = 10.0) -> None:
    """Routers route from views fed by Kafka, a few milliseconds behind the registry and the
    dispatcher: a test that sends right after start() could race them and see 2001. Waits until
    the router's view has the agent ONLINE and connected (needs the admin token)."""
    s = stack or local_stack()
    if not s.admin_token:
        raise RuntimeError("wait_until_routable needs the stack's admin token (REACH_ADMIN_TOKEN or REACH_HOME/admin-token)")
    deadline = time.monotonic() + timeout
    last = "unreachable"
    async with httpx.AsyncClient(timeout=5) as http:
        while True:
            try:
                res = await http.get(f"{s.router_url}/v1/view/agents/{agent_id}", headers={"authorization": f"Bearer {s.admin_token}"})
                last = str(res.status_code)
                if res.is_success:
                    view = res.json()
                    if view.get("status") == "ONLINE" and (view.get("presence") or {}).get("connected"):
                        return
            except httpx.HTTPError as err:
                last = str(err)
            if time.monotonic() > deadline:
                raise TimeoutError(f"agent {agent_id} is not routable after {timeout} s (router view: {last})")
            await asyncio.sleep(0.025)


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
    **node_options: Any,
) -> StartedAgent:
    """Registers and connects an agent with the given handlers (a unique agent type), waits until
    it is routable, and records what its handlers were given. Synchronous handlers stay
    synchronous (they run in the node's thread pool)."""
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
    if routable:
        await wait_until_routable(node.agent_id, s)
    return StartedAgent(node, node.agent_id, received)
