"""examples/python/echo_agent.py, run as its own process the way a user runs it: it registers,
serves requests, and on SIGTERM finishes and deregisters."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from agent_reach import ReachClient
from agent_reach.testing import LocalStack, unique_capability, wait_until_routable
from conftest import PYTHON, REPO, child_env, read_line

ECHO = REPO / "examples" / "python" / "echo_agent.py"


def test_the_echo_example_is_a_whole_agent_in_at_most_30_lines() -> None:
    assert len(ECHO.read_text().rstrip().splitlines()) <= 30


async def test_the_echo_example_serves_requests_and_deregisters_on_sigterm(reach_stack: LocalStack, reach_client: ReachClient, start_agent: Any) -> None:
    cap = unique_capability("echo")
    proc = await asyncio.create_subprocess_exec(PYTHON, str(ECHO), env=child_env(reach_stack, ECHO_CAPABILITY=cap), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        line = await read_line(proc.stdout, "echo example")
        assert line.startswith("echo agent ") and line.endswith(f" serves {cap}")
        agent_id = line.split()[2]
        assert [a["agent_id"] for a in await reach_client.agents(capability=cap)] == [agent_id]
        await wait_until_routable(agent_id, reach_stack)

        caller = await start_agent()
        assert await caller.node.request(cap, {"hello": "world"}, timeout=20) == {"echo": {"hello": "world"}, "by": agent_id}

        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        assert [a for a in await reach_client.agents(capability=cap) if a["status"] == "ONLINE"] == []
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
