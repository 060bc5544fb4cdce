"""A full agent with the default lease gets the task held for it as soon as its only slot frees.

Routers know an agent's load only from its heartbeats, which come every half lease (30 s with the
default 60 s lease). A task for an agent whose only slot is busy is held by the router (PENDING
2002) until the router sees the slot free; before, that took the next regular heartbeat (up to
30 s). The node now beats as soon as its load crosses the busy line (``agent_reach.early_beat``),
as the TypeScript SDK does (test/integration/sdk/busy-heartbeat.test.ts). The windows are a third
of the regular heartbeat's interval: only an early heartbeat fits in them. Queued mode only:
direct mode has no heartbeats (its control plane sees the node's load itself)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from agent_reach import Message
from agent_reach.testing import TestEnvironment
from conftest import eventually

pytestmark = pytest.mark.parametrize("reach_env", ["queued"], indirect=True)

EARLY_WITHIN_S = 10.0


async def test_the_task_held_for_a_full_agent_goes_out_when_its_slot_frees(reach_env: TestEnvironment) -> None:
    capability = reach_env.unique_capability("busy")
    slot = asyncio.Event()

    async def handler(msg: Message) -> str:
        if msg.payload == "first":
            await slot.wait()
        return "done"

    agent = await reach_env.start_agent(handlers={capability: handler}, descriptor={"metadata": {"max_concurrency": 1}})
    stack = reach_env.stack

    async def load_rate() -> float | None:
        async with httpx.AsyncClient() as http:
            res = await http.get(f"{stack.router_url}/v1/view/agents/{agent.agent_id}", headers={"authorization": f"Bearer {stack.admin_token}"})
        return float(res.json().get("load_rate", -1)) if res.status_code == 200 else None

    first = await reach_env.submit({"capability": capability, "payload": "first"})
    await eventually("the handler to hold the only slot", lambda: _true_or_none(any(m.message_id == first["message_id"] for m in agent.received)))
    await eventually("the router to see the slot busy", lambda: _is_full(load_rate), timeout=EARLY_WITHIN_S)

    held = await reach_env.submit({"capability": capability, "payload": "held"})

    async def held_2002() -> bool | None:
        return True if any(e["state"] == "PENDING" and e.get("code") == 2002 for e in await reach_env.events(held["message_id"])) else None

    await eventually("the task held for the busy agent (PENDING 2002)", held_2002)
    slot.set()
    row = await reach_env.wait_for(held["message_id"], lambda r: r["status"] == "DELIVERED", timeout=EARLY_WITHIN_S)
    assert row["agent_id"] == agent.agent_id
    assert [m.payload for m in agent.received] == ["first", "held"]


async def _true_or_none(v: bool) -> bool | None:
    return True if v else None


async def _is_full(load_rate) -> bool | None:  # type: ignore[no-untyped-def]
    return True if await load_rate() == 1 else None
