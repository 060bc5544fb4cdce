"""Pre-flight from the local routes view (R-G6), in both modes: the node keeps the
dispatcher's ``routes`` view and refuses what the router would refuse without a round trip."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agent_reach import Message, ReachError
from agent_reach.testing import TestEnvironment, unique_name
from conftest import until

pytestmark = pytest.mark.parametrize("reach_env", ["direct", "queued"], indirect=True)


async def test_refuses_2001_and_2003_from_the_view_and_allows_what_is_routable(reach_env: TestEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    echo = reach_env.unique_capability("echo")
    ledger = reach_env.unique_capability("read")

    async def same(msg: Message) -> Any:
        return msg.payload

    await reach_env.start_agent(handlers={echo: same})
    await reach_env.start_agent(handlers={ledger: same}, descriptor={"metadata": {"domain": unique_name("finance")}})
    caller = await reach_env.start_agent()
    await until("the view", lambda: caller.node.route_verdict(echo) == 0 and caller.node.route_verdict(ledger) == 2003)
    assert await caller.node.request(echo, {"hi": 1}, timeout=15) == {"hi": 1}

    calls: list[str] = []
    registry = caller.node._registry  # the node's registry client: a pre-flight refusal must not use it
    assert registry is not None
    original = registry.list

    async def counting(**kw: Any) -> Any:
        calls.append(str(kw))
        return await original(**kw)

    monkeypatch.setattr(registry, "list", counting)
    with pytest.raises(ReachError) as denied:
        await caller.node.request(ledger, {})
    assert (denied.value.code, denied.value.details.get("preflight")) == (2003, "local")
    assert calls == []
    # A name the view does not hold may be an agent registered a moment ago: the registry is asked.
    nobody = reach_env.unique_capability("nobody")
    assert caller.node.route_verdict(nobody) is None
    with pytest.raises(ReachError) as refused:
        await caller.node.request(nobody, {})
    assert refused.value.code == 2001 and len(calls) == 1


async def test_can_be_turned_off(reach_env: TestEnvironment) -> None:
    caller = await reach_env.start_agent(preflight=False)
    assert (caller.node.routes_view, caller.node.route_verdict("anything")) == ("off", None)


async def test_send_and_publish_check_when_asked_and_a_message_that_may_wait_is_not_refused_for_2001(reach_env: TestEnvironment) -> None:
    echo = reach_env.unique_capability("echo")
    absent = reach_env.unique_capability("absent")
    lonely = reach_env.unique_capability("lonely")

    async def same(msg: Message) -> Any:
        return msg.payload

    await reach_env.start_agent(handlers={echo: same})
    caller = await reach_env.start_agent()
    registry = caller.node._registry
    assert registry is not None
    # Registered, never connected: in the view, not routable (2001); a topic the same.
    reg = await registry.register({"agent_type": "absent", "capabilities": [absent, {"name": lonely, "mode": "subscribe"}]}, reach_env.stack.admin_token)
    try:
        await until("the view", lambda: caller.node.route_verdict(absent) == 2001 and caller.node.route_verdict(lonely, "topic") == 2001)
        for refused in (caller.node.send({"capability": absent, "payload": {}}, preflight=True), caller.node.publish(lonely, {}, preflight=True)):
            with pytest.raises(ReachError) as no_route:
                await refused
            assert (no_route.value.code, no_route.value.details.get("preflight")) == (2001, "local")
        # Without asking, the message goes (the router decides: a publish nobody hears is REJECTED 2001).
        published = await caller.node.publish(lonely, {})
        assert (await reach_env.wait_for(published))["code"] == 2001
        # With expire_at the router parks it for an agent to come: pre-flight lets it go.
        parked = await caller.node.send({"capability": absent, "payload": {}, "expire_at": int(time.time() * 1000) + 60_000}, preflight=True)
        row = await reach_env.wait_for(parked, lambda r: r.get("code") == 2001)
        assert row["status"] == "PENDING"
        sent = await caller.node.send({"capability": echo, "payload": "hi"}, preflight=True)
        assert (await reach_env.wait_for(sent))["status"] == "DELIVERED"
    finally:
        await registry.deregister(reg.agent_id, reg.token)


async def test_the_view_of_a_lost_connection_refuses_nothing_until_the_next_full_view(reach_env: TestEnvironment) -> None:
    ledger = reach_env.unique_capability("read")
    await reach_env.start_agent(handlers={ledger: lambda msg: "ledger"}, descriptor={"metadata": {"domain": unique_name("finance")}})
    caller = await reach_env.start_agent()
    assert (caller.node.routes_view, caller.node.route_verdict(ledger)) == ("ready", 2003)
    lost = asyncio.Event()
    back = asyncio.Event()
    caller.node.on("disconnected", lambda _: lost.set())
    caller.node.on("connected", lambda _: back.set())
    socket = caller.node._socket
    assert socket is not None
    await socket.close(4000, "test: drop the connection")
    await asyncio.wait_for(lost.wait(), 15)
    # The reconnect waits its backoff (1 s and more): the old view is gone meanwhile.
    assert (caller.node.routes_view, caller.node.route_verdict(ledger)) == ("waiting", None)
    await asyncio.wait_for(back.wait(), 15)
    await until("the new connection's view", lambda: caller.node.route_verdict(ledger) == 2003)
    assert caller.node.routes_view == "ready"
