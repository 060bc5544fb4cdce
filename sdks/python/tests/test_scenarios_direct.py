"""The SDK scenarios of scenario_list.py in direct mode: a local control plane (agent_reach.direct),
no Kafka, PostgreSQL, Redis or services — the same test code as test_scenarios_env_queued.py."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agent_reach import Backoff, HandlerContext, Message
from agent_reach.testing import TestEnvironment, unique_name
from conftest import until
from scenario_list import SCENARIOS

scenario = pytest.mark.scenario
pytestmark = pytest.mark.parametrize("reach_env", ["direct"], indirect=True)


@scenario("deliver-ack")
async def test_deliver_ack(reach_env: TestEnvironment) -> None:
    await SCENARIOS["deliver-ack"](reach_env)


@scenario("request-result")
async def test_request_result(reach_env: TestEnvironment) -> None:
    await SCENARIOS["request-result"](reach_env)


@scenario("reject-retryable")
async def test_reject_retryable(reach_env: TestEnvironment) -> None:
    await SCENARIOS["reject-retryable"](reach_env)


@scenario("reject-non-retryable")
async def test_reject_non_retryable(reach_env: TestEnvironment) -> None:
    await SCENARIOS["reject-non-retryable"](reach_env)


@scenario("no-route")
async def test_no_route(reach_env: TestEnvironment) -> None:
    await SCENARIOS["no-route"](reach_env)


@scenario("sticky-session")
async def test_sticky_session(reach_env: TestEnvironment) -> None:
    await SCENARIOS["sticky-session"](reach_env)


@scenario("publish-fanout")
async def test_publish_fanout(reach_env: TestEnvironment) -> None:
    await SCENARIOS["publish-fanout"](reach_env)


@scenario("publish-no-subscriber")
async def test_publish_no_subscriber(reach_env: TestEnvironment) -> None:
    await SCENARIOS["publish-no-subscriber"](reach_env)


@scenario("ack-timeout-retry")
async def test_ack_timeout_retry(reach_env: TestEnvironment) -> None:
    await SCENARIOS["ack-timeout-retry"](reach_env)


@scenario("redelivery-deduped")
async def test_redelivery_deduped(reach_env: TestEnvironment) -> None:
    await SCENARIOS["redelivery-deduped"](reach_env)


@scenario("long-handler-progress")
async def test_long_handler_progress(reach_env: TestEnvironment) -> None:
    await SCENARIOS["long-handler-progress"](reach_env)


@scenario("refusal-keeps-health")
async def test_refusal_keeps_health(reach_env: TestEnvironment) -> None:
    await SCENARIOS["refusal-keeps-health"](reach_env)


@scenario("duplicate-4001")
async def test_duplicate_4001(reach_env: TestEnvironment) -> None:
    await SCENARIOS["duplicate-4001"](reach_env)


@scenario("preflight-local")
async def test_preflight_local(reach_env: TestEnvironment) -> None:
    await SCENARIOS["preflight-local"](reach_env)


# Scenarios whose queued runs need the stack's own tools (test_scenarios.py: a chaos proxy between
# node and dispatcher): in direct mode the local control plane injects the same faults.


@scenario("dedupe-redelivery")
async def test_dedupe_redelivery(reach_env: TestEnvironment) -> None:
    """The answer is lost: the redelivery is answered from the earlier result, the handler runs once."""
    assert reach_env.local is not None
    cap = reach_env.unique_capability("charge")
    runs: list[str] = []

    async def charge(msg: Message) -> dict[str, int]:
        runs.append(msg.message_id)
        return {"run": len(runs)}

    agent = await reach_env.start_agent(handlers={cap: charge})
    await reach_env.local.lose_answers(agent.agent_id, 1)
    key = unique_name("key")
    sent = await reach_env.submit({"capability": cap, "payload": {}, "timeout_ms": 1000}, idempotency_key=key)
    await until("the first run", lambda: len(runs) == 1)
    await reach_env.skip_time(1000)  # the ack deadline passes: attempt 0 failed (3002)
    await reach_env.skip_time(1000)  # past the backoff: delivered again, to the only agent
    row = await reach_env.wait_for(sent["message_id"])
    assert (row["status"], row["attempt"], row["agent_id"]) == ("DELIVERED", 1, agent.agent_id)
    assert row["result"] == {"status": "ok", "payload": {"run": 1}}
    assert runs == [sent["message_id"]]
    again = await reach_env.submit({"capability": cap, "payload": {}}, idempotency_key=key, wait_ms=5000)
    assert (again["message_id"], again["result"]) == (sent["message_id"], {"status": "ok", "payload": {"run": 1}})


@scenario("reconnect-replay")
async def test_reconnect_replay(reach_env: TestEnvironment) -> None:
    """The connection dies with deliveries on the way: the node reconnects, nothing is lost, seqs have no gap."""
    assert reach_env.local is not None
    cap = reach_env.unique_capability("count")
    gate = asyncio.Event()
    seen: list[tuple[int, int]] = []

    async def count(msg: Message, ctx: HandlerContext) -> int:
        seen.append((ctx.seq, msg.payload["i"]))
        await gate.wait()
        return int(msg.payload["i"])

    agent = await reach_env.start_agent(
        handlers={cap: count}, descriptor={"metadata": {"max_concurrency": 1}}, reconnect=Backoff(base=0.05, max=0.2)
    )
    connected: list[Any] = []
    disconnects: list[Any] = []
    agent.node.on("connected", connected.append)
    agent.node.on("disconnected", disconnects.append)
    ids = [(await reach_env.submit({"capability": cap, "payload": {"i": i}}))["message_id"] for i in (0, 1)]
    for mid in ids:
        await reach_env.wait_for(mid, lambda r: r["status"] == "DELIVERING")
    await reach_env.local.drop_connection(agent.agent_id)
    ids += [(await reach_env.submit({"capability": cap, "payload": {"i": i}}))["message_id"] for i in (2, 3)]
    await until("reconnected", lambda: len(connected) == 1)
    gate.set()
    for mid in ids:
        row = await reach_env.wait_for(mid)
        assert (row["status"], row["attempt"], row["agent_id"]) == ("DELIVERED", 0, agent.agent_id)
    assert [i for _, i in seen] == [0, 1, 2, 3]
    assert [s for s, _ in seen] == [1, 2, 3, 4]
    assert [d["code"] for d in disconnects] == [1006]


@scenario("blocking-sync-handler")
async def test_blocking_sync_handler(reach_env: TestEnvironment) -> None:
    """A synchronous handler that blocks for 4 s runs in a worker thread: meanwhile the node
    heartbeats (its 2 s lease is renewed again and again) and progress keeps the 1.5 s ack window open."""
    cap = reach_env.unique_capability("crunch")
    threads: list[str] = []
    started = threading.Event()

    def crunch(msg: Message) -> dict[str, bool]:
        threads.append(threading.current_thread().name)
        started.set()
        time.sleep(4)
        return {"done": True}

    agent = await reach_env.start_agent(handlers={cap: crunch}, descriptor={"ttl_s": 2, "metadata": {"max_concurrency": 1}})
    sent = await reach_env.submit({"capability": cap, "payload": {}, "timeout_ms": 1500})
    await until("the handler started", started.is_set)
    leases: set[str] = set()
    while (await reach_env.status(sent["message_id"]) or {}).get("status") != "DELIVERED":
        (view,) = [a for a in await reach_env.agents(capability=cap) if a["agent_id"] == agent.agent_id]
        leases.add(view["lease_expires_at"])
        await asyncio.sleep(0.25)
    row = await reach_env.wait_for(sent["message_id"])
    assert (row["status"], row["attempt"], row["result"]) == ("DELIVERED", 0, {"status": "ok", "payload": {"done": True}})
    assert len(threads) == 1 and threads[0].startswith("agent-reach-handler")
    assert len(leases) >= 3
