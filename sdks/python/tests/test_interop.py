"""A Python agent and a TypeScript agent talk to each other through Agent-Reach, both ways, in one
exchange: the Python agent asks the TypeScript agent's capability; that handler asks the Python
agent's capability in turn; each answer travels back, with the session context fragments."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from agent_reach import HandlerContext, Message
from agent_reach.testing import LocalStack, unique_capability, wait_until_routable
from conftest import REPO, child_env, read_line

TS_AGENT = Path(__file__).parent / "agents" / "ts_agent.mjs"


async def test_a_python_and_a_typescript_agent_request_each_other(reach_stack: LocalStack, start_agent: Any) -> None:
    py_cap, ts_cap = unique_capability("answer_py"), unique_capability("answer_ts")

    async def answer(msg: Message, ctx: HandlerContext) -> dict[str, Any]:
        ctx.session.set("seen_by_python", "yes")
        return {"by": "python", "echo": msg.payload, "user": ctx.session.get_json("user"), "typescript_saw": ctx.session.get_json("seen_by_typescript")}

    python = await start_agent(handlers={py_cap: answer})
    # The TypeScript SDK as the workspace builds it (packages/sdk/dist), found from the checkout.
    proc = await asyncio.create_subprocess_exec("node", str(TS_AGENT), cwd=REPO, env=child_env(reach_stack, TS_CAPABILITY=ts_cap), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        ts_id = (await read_line(proc.stdout, "TypeScript agent")).split()[-1]
        # Until the router routes to it AND the Python node's own pre-flight view (its dispatcher's
        # `routes` frames, a few milliseconds behind or ahead of the router) says so too.
        await wait_until_routable(ts_id, reach_stack, views=[python.node])

        reply = await python.node.request_reply(ts_cap, {"ask": py_cap, "n": 1}, context={"user": '{"name":"Ada"}'}, timeout=30)
        assert reply.payload == {
            "by": "typescript",
            "echo": {"ask": py_cap, "n": 1},
            # Python → TypeScript → Python: the inner request carried the context the TypeScript handler passed on.
            "python": {"by": "python", "echo": {"from": "typescript"}, "user": {"name": "Ada"}, "typescript_saw": {"user": "Ada"}},
        }
        assert reply.updated == {"seen_by_typescript": '{"user":"Ada"}'}
        assert reply.message.producer == ts_id
        assert [(m.capability, m.producer) for m in python.received] == [(py_cap, ts_id)]
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)  # the TypeScript node drains and deregisters
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()

