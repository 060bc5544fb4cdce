"""One list of SDK scenarios, written once against ``TestEnvironment`` and run in both modes:
direct (test_scenarios_direct.py, no infrastructure) and queued (test_scenarios_env_queued.py,
the real stack) — the Python half of docs/sdk-scenarios.md's four runs, the same scenarios as
test/helpers/sdk-scenarios.ts. The same assertions hold in both modes: where direct mode
differed from the pipeline, one of these fails."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest

from agent_reach import AgentReplacedError, HandlerContext, Message, NonRetryableError, ReachError
from agent_reach.testing import TestEnvironment, unique_name
from conftest import until

Scenario = Callable[[TestEnvironment], Awaitable[None]]


async def states(env: TestEnvironment, message_id: str) -> list[str]:
    """The states of a timeline, in order, as ``state[:code]@attempt``."""
    return [f"{e['state']}{'' if e['code'] is None else ':' + str(e['code'])}@{e['attempt']}" for e in await env.events(message_id)]


async def deliver_ack(env: TestEnvironment) -> None:
    cap = env.unique_capability("double")

    async def double(msg: Message) -> dict[str, int]:
        return {"doubled": msg.payload["n"] * 2}

    agent = await env.start_agent(handlers={cap: double})
    out = await env.submit({"capability": cap, "payload": {"n": 21}}, wait_ms=15_000)
    assert (out["status"], out["result"]) == ("DELIVERED", {"status": "ok", "payload": {"doubled": 42}})
    assert [m.message_id for m in agent.received] == [out["message_id"]]
    row = await env.wait_for(out["message_id"])
    assert (row["status"], row["attempt"], row["agent_id"]) == ("DELIVERED", 0, agent.agent_id)
    assert await states(env, out["message_id"]) == ["PENDING@0", "ROUTED@0", "DELIVERING@0", "DELIVERED@0"]


async def request_result(env: TestEnvironment) -> None:
    cap = env.unique_capability("plan")

    async def plan(msg: Message, ctx: HandlerContext) -> dict[str, Any]:
        user = ctx.session.get_json("user") or {}
        ctx.session.set_json("plan", [f"greet {user.get('name', '?')}", msg.payload["goal"]])
        return {"ok": True, "session": ctx.session.id}

    await env.start_agent(handlers={cap: plan})
    caller = await env.start_agent()
    reply = await caller.node.request_reply(cap, {"goal": "rome"}, timeout=15, context={"user": '{"name":"ada"}'}, session_id="s-1")
    assert reply.payload == {"ok": True, "session": "s-1"}
    assert list(reply.updated) == ["plan"]
    assert reply.message.message_type == "task_result"


async def reject_retryable(env: TestEnvironment) -> None:
    cap = env.unique_capability("flaky")
    calls: list[int] = []

    async def flaky(msg: Message) -> dict[str, int]:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError(f"transient failure {len(calls)}")
        return {"calls": len(calls)}

    agent = await env.start_agent(handlers={cap: flaky})
    sent = await env.submit({"capability": cap, "payload": {}})
    row = await env.wait_for(sent["message_id"])
    assert (row["status"], row["attempt"], row["agent_id"]) == ("DELIVERED", 2, agent.agent_id)
    assert len(calls) == 3
    timeline = await states(env, sent["message_id"])
    assert [s for s in timeline if s.startswith("PENDING:3003")] == ["PENDING:3003@1", "PENDING:3003@2"]
    assert timeline[-1] == "DELIVERED@2"


async def reject_non_retryable(env: TestEnvironment) -> None:
    cap = env.unique_capability("validate")
    calls: list[int] = []

    async def strict(msg: Message) -> None:
        calls.append(1)
        raise NonRetryableError("INVALID_ENVELOPE", "field x is missing")

    await env.start_agent(handlers={cap: strict})
    caller = await env.start_agent()
    receipts: list[Any] = []
    caller.node.on("receipt", receipts.append)
    with pytest.raises(ReachError) as refused:
        await caller.node.request(cap, {}, timeout=15)
    assert refused.value.code == 3003 and "field x is missing" in str(refused.value)
    assert len(calls) == 1
    assert [(r.status, r.code) for r in receipts] == [("REJECTED", 3003)]
    row = await env.wait_for(receipts[0].message_id)
    assert (row["status"], row["code"], row["attempt"]) == ("REJECTED", 3003, 0)


async def no_route(env: TestEnvironment) -> None:
    cap = env.unique_capability("nobody")
    caller = await env.start_agent()
    with pytest.raises(ReachError) as preflight:
        await caller.node.request(cap, {})
    assert preflight.value.code == 2001
    with pytest.raises(ReachError) as sent_anyway:
        await caller.node.request(cap, {}, preflight=False, timeout=15)
    assert sent_anyway.value.code == 2001
    sent = await env.submit({"capability": cap, "payload": {}})
    row = await env.wait_for(sent["message_id"])
    assert (row["status"], row["code"]) == ("REJECTED", 2001)
    assert await states(env, sent["message_id"]) == ["PENDING@0", "REJECTED:2001@0"]


async def sticky_session(env: TestEnvironment) -> None:
    cap = env.unique_capability("chat")
    a = await env.start_agent(handlers={cap: lambda msg: "a"})
    b = await env.start_agent(handlers={cap: lambda msg: "b"})
    answers = []
    for i in range(6):
        out = await env.submit({"capability": cap, "payload": {"i": i}, "session_id": "conversation-1"}, wait_ms=15_000)
        answers.append(out["result"]["payload"])
    assert len(set(answers)) == 1
    assert len(a.received) + len(b.received) == 6


async def publish_fanout(env: TestEnvironment) -> None:
    topic = env.unique_capability("changed")

    async def noted(msg: Message) -> None:
        return None

    one = await env.start_agent(subscriptions={topic: noted})
    two = await env.start_agent(subscriptions={topic: noted})
    publisher = await env.start_agent()
    receipts: list[Any] = []
    publisher.node.on("receipt", receipts.append)
    parent = await publisher.node.publish(topic, {"v": 1})
    assert (await env.wait_for(parent))["status"] == "DELIVERED"
    await until("both copies", lambda: len(one.received) == 1 and len(two.received) == 1)
    for sub in (one, two):
        copy = sub.received[0]
        assert copy.message_id != parent and copy.payload == {"v": 1}
        row = await env.wait_for(copy.message_id)
        assert (row["status"], row["parent_message_id"]) == ("DELIVERED", parent)
    assert receipts == []


async def publish_no_subscriber(env: TestEnvironment) -> None:
    topic = env.unique_capability("unheard")
    publisher = await env.start_agent()
    receipts: list[Any] = []
    publisher.node.on("receipt", receipts.append)
    parent = await publisher.node.publish(topic, {"v": 1})
    row = await env.wait_for(parent)
    assert (row["status"], row["code"]) == ("REJECTED", 2001)
    await until("the receipt", lambda: len(receipts) == 1)
    assert (receipts[0].message_id, receipts[0].status, receipts[0].code) == (parent, "REJECTED", 2001)


async def ack_timeout_retry(env: TestEnvironment) -> None:
    cap = env.unique_capability("slow")

    async def late(msg: Message) -> str:
        await asyncio.sleep(3)
        return "late"

    stuck = await env.start_agent(handlers={cap: late}, report_progress=False)
    spare = await env.start_agent(handlers={cap: lambda msg: "spare"})
    sent = await env.submit({"capability": cap, "payload": {}, "timeout_ms": 600, "headers": {"reach-preferred-agent": stuck.agent_id}})
    row = await env.wait_for(sent["message_id"])
    assert (row["status"], row["attempt"], row["agent_id"]) == ("DELIVERED", 1, spare.agent_id)
    failed = [e for e in await env.events(sent["message_id"]) if e["state"] == "PENDING" and e["code"] == 3002]
    assert [(e["attempt"], e["agent_id"]) for e in failed] == [(1, stuck.agent_id)]
    assert (len(stuck.received), len(spare.received)) == (1, 1)


async def redelivery_deduped(env: TestEnvironment) -> None:
    cap = env.unique_capability("think")
    runs: list[int] = []

    async def think(msg: Message) -> dict[str, int]:
        runs.append(1)
        await asyncio.sleep(1.0)
        return {"runs": len(runs)}

    agent = await env.start_agent(handlers={cap: think}, report_progress=False)
    sent = await env.submit({"capability": cap, "payload": {}, "timeout_ms": 600})
    row = await env.wait_for(sent["message_id"])
    assert (row["status"], row["attempt"], row["agent_id"]) == ("DELIVERED", 1, agent.agent_id)
    assert len(runs) == 1 and len(agent.received) == 1
    assert "PENDING:3002@1" in await states(env, sent["message_id"])


async def long_handler_progress(env: TestEnvironment) -> None:
    cap = env.unique_capability("summarize")
    runs: list[int] = []

    async def summarize(msg: Message) -> str:
        runs.append(1)
        await asyncio.sleep(3)
        return "done"

    one = await env.start_agent(handlers={cap: summarize})
    two = await env.start_agent(handlers={cap: summarize})
    sent = await env.submit({"capability": cap, "payload": {}, "timeout_ms": 1_000})
    row = await env.wait_for(sent["message_id"])
    assert (row["status"], row["attempt"]) == ("DELIVERED", 0)
    assert len(runs) == 1 and len(one.received) + len(two.received) == 1


async def refusal_keeps_health(env: TestEnvironment) -> None:
    cap = env.unique_capability("check")

    async def refuse(msg: Message) -> None:
        raise NonRetryableError("INVALID_ENVELOPE", "bad input")

    agent = await env.start_agent(handlers={cap: refuse})
    for i in range(2):
        # A waited-for message that failed answers with its own code (ingress's ``?wait_ms=``).
        with pytest.raises(ReachError) as refused:
            await env.submit({"capability": cap, "payload": {"i": i}}, wait_ms=15_000)
        assert refused.value.code == 3003
    assert agent.node.load()["health"] == 1
    listed = await env.agents(capability=cap)
    assert [(a["agent_id"], a["status"]) for a in listed] == [(agent.agent_id, "ONLINE")]


async def duplicate_4001(env: TestEnvironment) -> None:
    cap = env.unique_capability("own")
    first = await env.start_agent(handlers={cap: lambda msg: "first"})
    ended = asyncio.ensure_future(first.node.run())
    second = env.node({"agent_type": "dup", "agent_id": first.agent_id})
    second.handle(cap, lambda msg: "second")
    await second.start()
    with pytest.raises(AgentReplacedError):
        await asyncio.wait_for(ended, 15)
    out = await env.submit({"capability": cap, "payload": {}}, wait_ms=15_000)
    assert (out["status"], out["result"]["payload"]) == ("DELIVERED", "second")


async def preflight_local(env: TestEnvironment) -> None:
    """Pre-flight from the node's local routes view (R-G6): request(), send() and publish()
    refuse what the router would refuse (here 2003, a domain no grant opens) without sending; what
    is routable goes and is delivered; sent anyway, the router refuses with the same code."""
    ledger, news, echo = env.unique_capability("read"), env.unique_capability("news"), env.unique_capability("echo")

    async def same(msg: Message) -> Any:
        return msg.payload

    await env.start_agent(handlers={ledger: lambda msg: "ledger"}, subscriptions={news: lambda msg: None}, descriptor={"metadata": {"domain": unique_name("finance")}})
    await env.start_agent(handlers={echo: same})
    caller = await env.start_agent()
    # start_agent returned once routing and the caller's own view agreed on the agents before it.
    assert [caller.node.route_verdict(echo), caller.node.route_verdict(ledger), caller.node.route_verdict(news, "topic")] == [0, 2003, 2003]
    for refused in (
        caller.node.request(ledger, {}),
        caller.node.send({"capability": ledger, "payload": {}}, preflight=True),
        caller.node.publish(news, {}, preflight=True),
    ):
        with pytest.raises(ReachError) as denied:
            await refused
        assert (denied.value.code, denied.value.details.get("preflight")) == (2003, "local")
    assert await caller.node.request(echo, "asked", timeout=15) == "asked"
    sent = await caller.node.send({"capability": echo, "payload": "sent"}, preflight=True)
    assert (await env.wait_for(sent))["status"] == "DELIVERED"
    with pytest.raises(ReachError) as routed:
        await caller.node.request(ledger, {}, preflight=False, timeout=15)
    assert (routed.value.code, routed.value.details.get("status")) == (2003, "REJECTED")


SCENARIOS: dict[str, Scenario] = {
    "deliver-ack": deliver_ack,
    "request-result": request_result,
    "reject-retryable": reject_retryable,
    "reject-non-retryable": reject_non_retryable,
    "no-route": no_route,
    "sticky-session": sticky_session,
    "publish-fanout": publish_fanout,
    "publish-no-subscriber": publish_no_subscriber,
    "ack-timeout-retry": ack_timeout_retry,
    "redelivery-deduped": redelivery_deduped,
    "long-handler-progress": long_handler_progress,
    "refusal-keeps-health": refusal_keeps_health,
    "duplicate-4001": duplicate_4001,
    "preflight-local": preflight_local,
}
