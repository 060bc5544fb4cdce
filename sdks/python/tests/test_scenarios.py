"""The SDK scenarios of docs/sdk-scenarios.md, against the real running stack: registry,
dispatcher WebSocket, ingress, router, tracker, through Kafka. Each test carries its scenario id
(``@pytest.mark.scenario``); the TypeScript SDK's tests carry the same ids in their titles."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx
import pytest
import pytest_asyncio
import websockets

from agent_reach import AgentNode, AgentReplacedError, HandlerContext, Message, NonRetryableError, ReachClient, ReachError
from agent_reach.testing import LocalStack, unique_capability, unique_name, wait_until_routable
from agent_reach.token_expiry import token_lifetime
from chaos_proxy import ChaosProxy
from conftest import PYTHON, REPO, child_env, eventually, read_line, until

scenario = pytest.mark.scenario


async def final(client: ReachClient, message_id: str, timeout: float = 20.0) -> dict[str, Any]:
    return await client.wait(message_id, timeout=timeout, with_result=True)


async def reached(client: ReachClient, message_id: str, state: str, timeout: float = 20.0) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        try:
            s = await client.status(message_id)
        except ReachError:
            return None
        return s if s.get("status") == state else None

    return await eventually(f"{message_id} {state}", probe, timeout)


@scenario("deliver-ack")
async def test_deliver_ack(start_agent: Any, reach_client: ReachClient) -> None:
    """A capability served by a handler: the message is delivered, answered, acked, DELIVERED."""
    cap = unique_capability("double")

    async def double(msg: Message) -> dict[str, int]:
        return {"doubled": msg.payload["n"] * 2}

    agent = await start_agent(handlers={cap: double})
    listed = await reach_client.agents(capability=cap)
    assert [(a["agent_id"], a["status"]) for a in listed] == [(agent.agent_id, "ONLINE")]

    out = await reach_client.submit({"capability": cap, "payload": {"n": 21}}, wait_ms=15_000)
    assert out["status"] == "DELIVERED"
    assert out["result"] == {"status": "ok", "payload": {"doubled": 42}}
    assert [m.message_id for m in agent.received] == [out["message_id"]]
    status = await final(reach_client, out["message_id"])
    assert (status["status"], status["agent_id"], status["attempt"]) == ("DELIVERED", agent.agent_id, 0)
    events = await reach_client.events(out["message_id"])
    assert [e["state"] for e in events if e["service"] == "dispatcher"][:1] == ["DELIVERING"]
    assert [e for e in events if e["code"] is not None] == []


@scenario("request-result")
async def test_request_result(start_agent: Any) -> None:
    """request() between two agents returns the handler's result and the updated context fragments."""
    cap = unique_capability("plan")

    async def plan(msg: Message, ctx: HandlerContext) -> dict[str, Any]:
        user = ctx.session.get_json("user") or {}
        ctx.session.set_json("plan", {"steps": [f"greet {user.get('name', '?')}", msg.payload["goal"]]})
        return {"ok": True, "session": ctx.session.id}

    await start_agent(handlers={cap: plan})
    caller = await start_agent()
    reply = await caller.node.request_reply(cap, {"goal": "ship"}, timeout=20, context={"user": '{"name":"Ada"}'}, session_id="sess-1")
    assert reply.payload == {"ok": True, "session": "sess-1"}
    assert reply.updated == {"plan": '{"steps":["greet Ada","ship"]}'}
    assert reply.context == {"user": '{"name":"Ada"}', "plan": '{"steps":["greet Ada","ship"]}'}
    assert (reply.message.message_type, reply.message.target_agent_id) == ("task_result", caller.agent_id)
    assert caller.received == []  # the reply went to the requester's node, never to a handler

    with pytest.raises(ReachError) as nobody:
        await caller.node.request(unique_capability("nobody"), {}, timeout=20)
    assert (nobody.value.code, nobody.value.retryable) == (2001, False)  # pre-flight: nobody offers it


@scenario("reject-retryable")
async def test_reject_retryable(start_agent: Any, reach_client: ReachClient) -> None:
    """A handler that raises rejects the delivery with its code; a retryable one is attempted again."""
    cap = unique_capability("flaky")
    calls: list[int] = []

    async def flaky(msg: Message) -> dict[str, int]:
        calls.append(len(calls))
        if len(calls) == 1:
            raise ReachError("DEPENDENCY_UNAVAILABLE", "upstream is down")  # 5002, retryable
        if len(calls) == 2:
            raise RuntimeError("something broke")  # 3003, retryable
        return {"ok": len(calls)}

    agent = await start_agent(handlers={cap: flaky})
    sent = await reach_client.submit({"capability": cap, "payload": {}})
    status = await final(reach_client, sent["message_id"])
    assert (status["status"], status["attempt"]) == ("DELIVERED", 2)
    assert status["result"] == {"status": "ok", "payload": {"ok": 3}}
    assert len([m for m in agent.received if m.message_id == sent["message_id"]]) == 3
    events = await reach_client.events(sent["message_id"])
    codes = [(e["detail"] or {}).get("agent_code") for e in events if e["code"] is not None]
    assert codes[:2] == [5002, 3003]


@scenario("reject-non-retryable")
async def test_reject_non_retryable(start_agent: Any, reach_client: ReachClient) -> None:
    """A NonRetryableError rejects the message once, for good; the requester gets the failure receipt."""
    cap = unique_capability("validate")
    runs: list[str] = []

    async def strict(msg: Message) -> None:
        runs.append(msg.message_id)
        raise NonRetryableError("INVALID_ENVELOPE", "field total is missing")

    await start_agent(handlers={cap: strict})
    caller = await start_agent()
    receipts: list[Any] = []
    caller.node.on("receipt", receipts.append)
    with pytest.raises(ReachError) as refused:
        await caller.node.request(cap, {"x": 1}, timeout=20)
    assert refused.value.retryable is False and refused.value.code != 3002
    assert len(runs) == 1
    assert [r.message_id for r in receipts] == runs
    status = await reached(reach_client, runs[0], "REJECTED")
    assert status["code"] == 3003
    rejected = [e for e in await reach_client.events(runs[0]) if e["state"] == "REJECTED"]
    assert rejected[0]["detail"]["agent_code"] == 4101
    assert rejected[0]["detail"]["agent_reason"] == "field total is missing"


@scenario("refusal-keeps-health")
async def test_refusal_keeps_health(start_agent: Any, reach_client: ReachClient) -> None:
    """The README's agent refuses bad input with a NonRetryableError: that is the agent working
    correctly, so the health its heartbeats report stays 1 and it stays ONLINE and routable (it
    went to health 0, COOLDOWN, and 2001 for its senders)."""
    cap = unique_capability("parse")

    async def parse(msg: Message) -> dict[str, int]:
        if not msg.payload:
            raise NonRetryableError("INVALID_ENVELOPE", "payload is empty")
        return {"pages": 3}

    agent = await start_agent(handlers={cap: parse}, descriptor={"ttl_s": 2})  # a heartbeat every second
    for _ in range(3):
        with pytest.raises(ReachError) as refused:
            await reach_client.submit({"capability": cap, "payload": None}, wait_ms=15_000)
        assert refused.value.code == 3003
    assert len(agent.received) == 3

    async def lease() -> Any:
        listed = await reach_client.agents(capability=cap)
        return listed[0]["lease_expires_at"] if listed else None

    # Two heartbeats later the registry has one that was sent after the refusals.
    before = await lease()

    async def first_beat() -> Any:
        now = await lease()
        return now if now != before else None

    first = await eventually("a heartbeat", first_beat)

    async def second_beat() -> bool:
        return (await lease()) != first

    await eventually("a second heartbeat", second_beat)
    [listed] = await reach_client.agents(capability=cap)
    assert (listed["agent_id"], listed["status"], listed["load"]["health"]) == (agent.agent_id, "ONLINE", 1)
    ok = await reach_client.submit({"capability": cap, "payload": {"doc": 1}}, wait_ms=15_000)
    assert (ok["status"], ok["result"]) == ("DELIVERED", {"status": "ok", "payload": {"pages": 3}})


async def test_crash_counts_against_health(start_agent: Any, reach_client: ReachClient) -> None:
    """A crash still lowers the health the node reports (only a final refusal does not)."""
    cap = unique_capability("crash")

    async def crash(msg: Message) -> None:
        raise RuntimeError("bug")

    agent = await start_agent(handlers={cap: crash})
    assert agent.node.load()["health"] == 1
    await reach_client.submit({"capability": cap, "payload": {}, "retryable": False})
    await until("the failure is counted", lambda: agent.node.load()["health"] < 1)


@scenario("publish-fanout")
async def test_publish_fanout(start_agent: Any, reach_client: ReachClient) -> None:
    """A publish ends DELIVERED once the router fanned it out; each subscriber's copy ends
    DELIVERED on its own id; the publisher gets no receipt. A waiting sender is answered with the
    copies. (The parent stayed ROUTED until the stuck sweep declared it DEAD 3005.)"""
    topic = unique_capability("orders")

    async def noted(msg: Message) -> None:
        return None

    a = await start_agent(subscriptions={topic: noted})
    b = await start_agent(subscriptions={topic: noted})
    publisher = await start_agent()
    receipts: list[Any] = []
    publisher.node.on("receipt", receipts.append)

    parent = await publisher.node.publish(topic, {"order": 7})
    await until("both subscribers got the event", lambda: len(a.received) == 1 and len(b.received) == 1)
    status = await reached(reach_client, parent, "DELIVERED")
    assert (status["topic"], status["agent_id"], status["code"]) == (topic, None, None)
    assert [e["state"] for e in await reach_client.events(parent)] == ["PENDING", "ROUTED", "DELIVERED"]
    for sub in (a, b):
        copy = sub.received[0].message_id
        assert copy != parent
        s = await reached(reach_client, copy, "DELIVERED")
        assert (s["agent_id"], s["parent_message_id"], s["code"]) == (sub.agent_id, parent, None)

    waited = await reach_client.submit({"topic": topic, "message_type": "event", "payload": {"order": 8}}, wait_ms=15_000)
    assert (waited["status"], waited["copies_total"], waited["http_status"]) == ("DELIVERED", 2, 200)
    assert sorted(c["agent_id"] for c in waited["copies"]) == sorted([a.agent_id, b.agent_id])
    assert receipts == []  # nothing failed, and a terminal parent cannot die later


@scenario("publish-no-subscriber")
async def test_publish_no_subscriber(start_agent: Any, reach_client: ReachClient) -> None:
    """A publish nobody subscribes to ends REJECTED 2001, and the publisher gets that receipt."""
    topic = unique_capability("nobody")
    publisher = await start_agent()
    receipts: list[Any] = []
    publisher.node.on("receipt", receipts.append)
    parent = await publisher.node.publish(topic, {"order": 1})
    await until("the receipt", lambda: len(receipts) == 1)
    assert (receipts[0].message_id, receipts[0].status, receipts[0].code) == (parent, "REJECTED", 2001)
    status = await reached(reach_client, parent, "REJECTED")
    assert status["code"] == 2001
    with pytest.raises(ReachError) as nobody:
        await reach_client.submit({"topic": topic, "message_type": "event", "payload": {}}, wait_ms=15_000)
    assert nobody.value.code == 2001


@pytest_asyncio.fixture
async def proxy(reach_stack: LocalStack) -> AsyncIterator[ChaosProxy]:
    p = await ChaosProxy(reach_stack.dispatcher_url).start()
    yield p
    await p.close()


@scenario("reconnect-replay")
async def test_reconnect_replay(start_agent: Any, reach_client: ReachClient, proxy: ChaosProxy) -> None:
    """The connection dies while deliveries are on their way: the node reconnects with backoff
    and last_seq, and the dispatcher replays what it never got, in order, without a gap."""
    cap = unique_capability("count")
    seen: list[tuple[int, int]] = []

    async def count(msg: Message, ctx: HandlerContext) -> int:
        seen.append((ctx.seq, msg.payload["i"]))
        return int(msg.payload["i"])

    agent = await start_agent(handlers={cap: count}, dispatcher_url=proxy.url)
    connections: list[dict[str, Any]] = []
    disconnects: list[dict[str, Any]] = []
    agent.node.on("connected", connections.append)
    agent.node.on("disconnected", disconnects.append)

    # One at a time: messages without a session_id are keyed by their own id, so two sent
    # back to back may be routed in either order. Each is dispatched before the next is sent.
    for i in range(3):
        await final(reach_client, (await reach_client.submit({"capability": cap, "payload": {"i": i}}))["message_id"])

    # The network swallows everything the dispatcher sends from now on...
    proxy.drop_downstream = True
    lost: list[str] = []
    for i in range(3, 6):
        lost.append((await reach_client.submit({"capability": cap, "payload": {"i": i}}))["message_id"])
        await reached(reach_client, lost[-1], "DELIVERING")  # sent to the agent, never received
    await until("the deliveries swallowed", lambda: proxy.dropped_downstream > 0)
    # ...and then the connection dies.
    proxy.cut()

    for mid in lost:
        status = await final(reach_client, mid)
        assert (status["status"], status["attempt"], status["agent_id"]) == ("DELIVERED", 0, agent.agent_id)
    assert [i for _, i in seen] == [0, 1, 2, 3, 4, 5]  # every message once, in order
    assert [s for s, _ in seen] == list(range(seen[0][0], seen[0][0] + 6))  # no gap in the seqs
    assert [d["code"] for d in disconnects] == [1006]
    assert len(connections) == 1 and connections[0]["resume_from"] == seen[2][0]  # resumed after the last one received
    assert proxy.accepted == 2


@scenario("duplicate-4001")
async def test_duplicate_4001(start_agent: Any, reach_client: ReachClient, reach_stack: LocalStack) -> None:
    """A second connection of the same agent takes over: the node's connection is closed with
    4001, and the node stops rather than take the agent back (the two would take turns)."""
    cap = unique_capability("hold")
    agent = await start_agent(handlers={cap: lambda msg: "from the node"})
    node = agent.node
    disconnects: list[dict[str, Any]] = []
    node.on("disconnected", disconnects.append)
    token = node.token
    assert token is not None

    second = await websockets.connect(reach_stack.dispatcher_url, ping_interval=None)  # type: ignore[attr-defined]  # resolved lazily
    try:
        await second.send(json.dumps({"type": "hello", "agent_id": agent.agent_id, "token": token, "last_seq": 0}))
        assert json.loads(await second.recv())["type"] == "welcome"
        await until("the node stopped", lambda: node.status == "stopped")
        assert [d["code"] for d in disconnects] == [4001]
        assert node.replaced
        with pytest.raises(AgentReplacedError):
            await node.run()

        # The agent is the second connection's now: its deliveries go there, and it stays open.
        sent = await reach_client.submit({"capability": cap, "payload": {"to": "second"}})
        while True:
            frame = json.loads(await asyncio.wait_for(second.recv(), 20))
            if frame["type"] == "deliver":
                break
        assert frame["message"]["message_id"] == sent["message_id"]
        await second.send(json.dumps({"type": "ack", "seq": frame["seq"], "message_id": sent["message_id"]}))
        await reached(reach_client, sent["message_id"], "DELIVERED")
        assert second.close_code is None
        assert agent.received == []
    finally:
        await second.close()
        # The node did not deregister (the agent was not its any more): clean up as admin.
        async with httpx.AsyncClient() as http:
            await http.delete(f"{reach_stack.registry_url}/v1/agents/{agent.agent_id}", headers={"authorization": f"Bearer {reach_stack.admin_token}"})


@scenario("duplicate-4001")
async def test_two_nodes_with_one_agent_id(start_agent: Any, reach_client: ReachClient) -> None:
    """Two nodes run with one agent id: the newer connection wins, the older node stops with
    AgentReplacedError and does not reconnect, so the two never take turns."""
    cap = unique_capability("twin")
    agent_id = unique_name("py-twin")
    first = await start_agent(handlers={cap: lambda msg: "first"}, descriptor={"agent_id": agent_id})
    first_run = asyncio.ensure_future(first.node.run())
    second = await start_agent(handlers={cap: lambda msg: "second"}, descriptor={"agent_id": agent_id})
    second_disconnects: list[dict[str, Any]] = []
    second.node.on("disconnected", second_disconnects.append)
    with pytest.raises(AgentReplacedError, match="taken over by a newer connection"):
        await asyncio.wait_for(first_run, 20)
    # Past the older node's first reconnect (1 s + up to 20 % jitter) it would have taken the
    # agent back; it does not: the newer node serves every message and is never disconnected.
    await asyncio.sleep(2.5)
    for i in range(3):
        out = await reach_client.submit({"capability": cap, "payload": {"i": i}}, wait_ms=10_000)
        assert out["result"] == {"status": "ok", "payload": "second"}
    assert first.node.status == "stopped"
    assert first.received == []
    assert second_disconnects == []
    assert second.node.connected


@pytest_asyncio.fixture
async def short_token_registry(reach_stack: LocalStack) -> AsyncIterator[str]:
    """A registry of our own that issues 5-second tokens. It shares the stack's PostgreSQL,
    Redis, Kafka and token secret, so the stack's router and dispatcher see its agents."""
    env = dict(os.environ)
    secret = env.get("REACH_TOKEN_SECRET") or reach_stack.secret("token-secret")
    assert secret and reach_stack.admin_token, "the stack's token secret and admin token are needed"
    env.update(
        REACH_INSTANCE_ID=unique_name("registry-short-tokens"),
        REACH_REGISTRY_PORT="0",
        REACH_TOKEN_SECRET=secret,
        REACH_ADMIN_TOKEN=reach_stack.admin_token,
        REACH_TOKEN_TTL_S=str(TOKEN_TTL_S),
    )
    # The stack's Kafka and schema registry, as `reach up` gives them to its services.
    env.update(REACH_KAFKA_BROKERS=reach_stack.kafka_brokers, REACH_SCHEMA_REGISTRY_URL=reach_stack.schema_registry_url)
    proc = await asyncio.create_subprocess_exec("node", str(REPO / "services/registry/dist/main.js"), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert proc.stdout is not None
    output: list[str] = []
    try:
        while True:
            line = await read_line(proc.stdout, "short-token registry", timeout=60)
            output.append(line)
            ready = re.search(r'"port":(\d+),"msg":"ready"', line)
            if ready:
                break
        yield f"http://127.0.0.1:{ready.group(1)}"
    finally:
        proc.terminate()
        await proc.wait()


TOKEN_TTL_S = 5


@scenario("token-refresh")
async def test_token_refresh(short_token_registry: str, reach_stack: LocalStack, reach_client: ReachClient) -> None:
    """The node lives through several token lifetimes on one WebSocket, renewing the token on
    that connection (refresh_token → token_refreshed), and keeps receiving and sending."""
    cap = unique_capability("echo")
    node = AgentNode(
        {"agent_type": unique_name("py-short-token-agent")},
        registry_url=short_token_registry,
        dispatcher_url=reach_stack.dispatcher_url,
        ingress_url=reach_stack.ingress_url,
        token=reach_stack.admin_token,
        handle_signals=False,
    )
    received: list[str] = []

    @node.handle(cap)
    async def echo(msg: Message) -> Any:
        received.append(msg.message_id)
        return msg.payload

    connections: list[dict[str, Any]] = []
    disconnects: list[dict[str, Any]] = []
    renewals: list[dict[str, Any]] = []
    node.on("connected", connections.append)
    node.on("disconnected", disconnects.append)
    node.on("token_refreshed", renewals.append)
    await node.start()
    try:
        assert node.agent_id is not None
        await wait_until_routable(node.agent_id, reach_stack)
        first = node.token
        assert first is not None
        first_life = token_lifetime(first)
        assert first_life is not None and first_life.expires_at - time.time() <= TOKEN_TTL_S
        first_expiry = first_life.expires_at

        # Two renewals, and the first token dead for a whole lifetime already.
        await until("two renewals, past two token lifetimes", lambda: len(renewals) >= 2 and time.time() > first_expiry + TOKEN_TTL_S, timeout=40)
        assert len(connections) == 1 and disconnects == []
        assert {r["connection_id"] for r in renewals} == {connections[0]["connection_id"]}
        async with httpx.AsyncClient() as http:
            res = await http.get(f"{reach_stack.ingress_url}/v1/messages/msg_none", headers={"authorization": f"Bearer {first}"})
        assert res.status_code == 401  # the first token has expired: only the renewals keep the agent in

        await wait_until_routable(node.agent_id, reach_stack)
        via_admin = await reach_client.submit({"capability": cap, "payload": {"n": 1}}, wait_ms=15_000)
        assert via_admin["result"] == {"status": "ok", "payload": {"n": 1}}
        async with node.client() as as_agent:  # HTTP with the current token
            via_http = await as_agent.submit({"capability": cap, "payload": {"n": 2}}, wait_ms=15_000)
        assert via_http["result"] == {"status": "ok", "payload": {"n": 2}}
        via_ws = await node.send(capability=cap, payload={"n": 3})  # the WebSocket, with the renewed token
        assert (await final(reach_client, via_ws))["status"] == "DELIVERED"
        assert set(received) >= {via_admin["message_id"], via_http["message_id"], via_ws}
        assert len(connections) == 1 and disconnects == []
    finally:
        await node.stop(2)


async def until_event(client: ReachClient, message_id: str, match: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> None:
    async def probe() -> bool | None:
        return True if any(match(e) for e in await client.events(message_id)) else None

    await eventually(f"an event of {message_id}", probe, timeout)


@scenario("dedupe-redelivery")
async def test_dedupe_redelivery(start_agent: Any, reach_client: ReachClient, proxy: ChaosProxy) -> None:
    """The handler ran and returned but its answer was lost on the way: the redelivery is
    answered from the earlier result (by idempotency key), the handler does not run again."""
    cap = unique_capability("charge")
    runs: list[str] = []

    async def charge(msg: Message, ctx: HandlerContext) -> dict[str, int]:
        runs.append(msg.message_id)
        if len(runs) == 1:
            proxy.drop_upstream = True  # the result and the ack of this first run never arrive
        return {"run": len(runs)}

    agent = await start_agent(handlers={cap: charge}, dispatcher_url=proxy.url)
    key = unique_name("key")
    sent = await reach_client.submit({"capability": cap, "payload": {}, "timeout_ms": 1000}, idempotency_key=key)
    await until("the first answer swallowed", lambda: proxy.dropped_upstream > 0)
    # No ack by the 1 s deadline: the dispatcher delivers it again (attempt 1, to this agent, the
    # only one), and the node answers from the earlier result; that answer is swallowed too.
    await until_event(reach_client, sent["message_id"], lambda e: e["state"] == "DELIVERING" and e["attempt"] >= 1)
    swallowed = proxy.dropped_upstream
    await until("the redelivery's answer swallowed", lambda: proxy.dropped_upstream > swallowed)
    # The connection dies; the node reconnects and writes its recent answers again, and the
    # dispatcher takes the redelivery's. The handler never runs a second time.
    proxy.cut()

    status = await final(reach_client, sent["message_id"])
    assert (status["status"], status["agent_id"]) == ("DELIVERED", agent.agent_id)
    assert status["attempt"] >= 1
    assert status["result"] == {"status": "ok", "payload": {"run": 1}}
    assert runs == [sent["message_id"]]
    # Delivered again (a later attempt), answered from the earlier result without a second run.
    delivering = sorted({e["attempt"] for e in await reach_client.events(sent["message_id"]) if e["state"] == "DELIVERING"})
    assert delivering[0] == 0 and len(delivering) >= 2
    again = await reach_client.submit({"capability": cap, "payload": {}}, idempotency_key=key, wait_ms=5_000)
    assert (again["message_id"], again["result"]) == (sent["message_id"], {"status": "ok", "payload": {"run": 1}})


SLOW_AGENT = Path(__file__).parent / "agents" / "slow_agent.py"


@scenario("sigterm-drain")
async def test_sigterm_drain(reach_stack: LocalStack, reach_client: ReachClient) -> None:
    """SIGTERM while a handler runs: the node takes no new work, lets the handler finish, sends
    its answer, deregisters and exits 0."""
    cap = unique_capability("slow")
    proc = await asyncio.create_subprocess_exec(
        PYTHON, str(SLOW_AGENT), env=child_env(reach_stack, SLOW_CAPABILITY=cap, SLOW_SECONDS="3"), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        serving = await read_line(proc.stdout, "slow agent")
        agent_id = serving.split()[-1]
        await wait_until_routable(agent_id, reach_stack)
        sent = await reach_client.submit({"capability": cap, "payload": {"job": 1}})
        assert await read_line(proc.stdout, "slow agent") == f"started {sent['message_id']}"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        status = await final(reach_client, sent["message_id"])
        assert (status["status"], status["attempt"], status["agent_id"]) == ("DELIVERED", 0, agent_id)
        assert status["result"] == {"status": "ok", "payload": {"slept": 3.0}}
        assert [a for a in await reach_client.agents(capability=cap) if a["status"] == "ONLINE"] == []
        log = (await proc.stderr.read()).decode()
        assert "SIGTERM received" in log and "deregistered" in log
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@scenario("long-handler-progress")
async def test_long_handler_progress(start_agent: Any, reach_client: ReachClient) -> None:
    """A 30 s handler against a 10 s ack window runs once, on one agent: progress frames keep
    moving its deadline, so the other, idle agent never gets the message."""
    cap = unique_capability("summarize")
    runs: list[str] = []

    def slow(who: str) -> Any:
        async def handler(msg: Message) -> dict[str, str]:
            runs.append(who)
            await asyncio.sleep(30)
            return {"done": who}

        return handler

    first = await start_agent(handlers={cap: slow("first")})
    second = await start_agent(handlers={cap: slow("second")})
    # A task_request: its 30 s time budget ends about when the handler does; a message whose
    # agent reports progress is not declared DEAD for its budget.
    sent = await reach_client.submit({"capability": cap, "payload": {}, "headers": {"reach-preferred-agent": first.agent_id}})
    status = await final(reach_client, sent["message_id"], timeout=45)
    assert (status["status"], status["attempt"], status["agent_id"]) == ("DELIVERED", 0, first.agent_id)
    assert status["result"] == {"status": "ok", "payload": {"done": "first"}}
    assert runs == ["first"] and second.received == []
    assert [e for e in await reach_client.events(sent["message_id"]) if e["code"] is not None] == []  # no missed deadline, no retry


@scenario("blocking-sync-handler")
async def test_blocking_sync_handler(start_agent: Any, reach_client: ReachClient, reach_stack: LocalStack) -> None:
    """A synchronous handler that blocks for 8 s runs in a worker thread: meanwhile the node
    heartbeats (the registry renews its 2 s lease over and over, with current_load 1) and
    sends progress (the 1.5 s ack window never runs out)."""
    cap = unique_capability("crunch")
    threads: list[str] = []
    started = threading.Event()

    def crunch(msg: Message) -> dict[str, bool]:  # a plain function: it blocks its thread
        threads.append(threading.current_thread().name)
        started.set()
        time.sleep(8)
        return {"done": True}

    agent = await start_agent(handlers={cap: crunch}, descriptor={"ttl_s": 2, "metadata": {"max_concurrency": 1}})
    sent = await reach_client.submit({"capability": cap, "payload": {}, "timeout_ms": 1500})
    await until("the handler started", lambda: started.is_set())
    leases: set[str] = set()
    loads: set[int] = set()
    statuses: set[str] = set()
    async with httpx.AsyncClient() as http:
        while True:
            # the registry's view of the agent, as the admin sees it (listings need a token: docs/access-control.md)
            view = (await http.get(f"{reach_stack.registry_url}/v1/agents/{agent.agent_id}", headers={"authorization": f"Bearer {reach_stack.admin_token}"})).json()
            leases.add(view["lease_expires_at"])
            loads.add(view["load"]["current_load"])
            statuses.add(view["status"])
            if (await reach_client.status(sent["message_id"]))["status"] == "DELIVERED":
                break
            await asyncio.sleep(0.25)
    status = await final(reach_client, sent["message_id"])
    assert (status["status"], status["attempt"]) == ("DELIVERED", 0)
    assert status["result"] == {"status": "ok", "payload": {"done": True}}
    assert len(threads) == 1 and threads[0].startswith("agent-reach-handler")
    assert len(leases) >= 3  # renewed by heartbeats again and again while the handler blocked
    assert 1 in loads and statuses == {"ONLINE"}
    assert [e for e in await reach_client.events(sent["message_id"]) if e["code"] is not None] == []
