"""examples/python/echo_agent.py, unchanged, run as its own process in direct mode
(AGENT_REACH_MODE=direct): it joins the test's local control plane — no stack."""

from __future__ import annotations

import asyncio
import os

from agent_reach.testing import TestEnvironment
from conftest import PYTHON, REPO, SRC, read_line

ECHO = REPO / "examples" / "python" / "echo_agent.py"


async def test_the_echo_example_answers_in_direct_mode(reach_env: TestEnvironment) -> None:
    cap = reach_env.unique_capability("echo")
    env = {
        **os.environ,
        "AGENT_REACH_MODE": "direct",
        "AGENT_REACH_REGISTRY_URL": reach_env.stack.registry_url,
        "AGENT_REACH_DISPATCHER_URL": reach_env.stack.dispatcher_url,
        "AGENT_REACH_INGRESS_URL": reach_env.stack.ingress_url,
        "ECHO_CAPABILITY": cap,
        "PYTHONPATH": str(SRC),
        "PYTHONUNBUFFERED": "1",
    }
    proc = await asyncio.create_subprocess_exec(PYTHON, str(ECHO), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        line = await read_line(proc.stdout, "echo example")
        agent_id = line.split()[2]
        out = await reach_env.submit({"capability": cap, "payload": {"hello": "world"}}, wait_ms=10_000)
        assert (out["status"], out["result"]) == ("DELIVERED", {"status": "ok", "payload": {"echo": {"hello": "world"}, "by": agent_id}})
        assert [e["state"] for e in await reach_env.events(out["message_id"])] == ["PENDING", "ROUTED", "DELIVERING", "DELIVERED"]
    finally:
        proc.terminate()
        await proc.wait()
