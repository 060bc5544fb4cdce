"""Pre-flight (R-G6) and circuits, against the real stack: an agent that fails most of its
work gets an open circuit (the stack's breaker: above 50 % failures over 60 s, at least 10
outcomes), the dispatcher pushes 3001 into the caller's view, and request() fails fast with it.
Queued mode only: direct mode has no circuit breakers (docs/direct-mode.md)."""

from __future__ import annotations

import asyncio

import pytest

from agent_reach import Message, ReachError
from agent_reach.testing import TestEnvironment
from conftest import eventually, until

pytestmark = pytest.mark.parametrize("reach_env", ["queued"], indirect=True)


async def test_3001_when_the_only_agent_has_an_open_circuit(reach_env: TestEnvironment) -> None:
    flaky = reach_env.unique_capability("flaky")

    async def broken(msg: Message) -> None:
        raise RuntimeError("down")  # a transient failure: it counts against the agent

    agent = await reach_env.start_agent(handlers={flaky: broken})
    caller = await reach_env.start_agent()
    assert caller.node.route_verdict(flaky) == 0
    for i in range(12):
        await reach_env.submit({"capability": flaky, "payload": {"i": i}})
    await until("the circuit open in the caller's view", lambda: caller.node.route_verdict(flaky) == 3001, timeout=30)
    with pytest.raises(ReachError) as refused:
        await caller.node.request(flaky, {})
    assert (refused.value.code, refused.value.details.get("preflight")) == (3001, "local")

    # An agent failing its work may also report itself unhealthy and go COOLDOWN. Its senders are
    # still told the circuit (3001), not "no live agent" (2001): the early heartbeat made that
    # COOLDOWN come within a second of the circuit, and the view said 2001. The node's own health
    # judges a dozen failures too little evidence for COOLDOWN (load.py), so this agent says it
    # outright in its heartbeats, as one whose model provider is down would.
    agent.node.load = lambda: {"current_load": 0, "queue_length": 0, "avg_latency_ms": 0.0, "health": 0.0}  # type: ignore[method-assign]
    async def cooled_down() -> bool | None:
        return True if any(a.get("status") == "COOLDOWN" for a in await reach_env.agents(flaky)) else None

    await eventually("the failing agent in COOLDOWN", cooled_down, timeout=30)
    for _ in range(40):  # 2 s: the COOLDOWN reaches the view within milliseconds
        assert caller.node.route_verdict(flaky) == 3001
        await asyncio.sleep(0.05)
