"""Tests of the Python SDK against the real local stack (the one `reach up` runs, or the one the
REACH_* variables point at). Every test names its own capabilities and agents, so one stack
serves the whole suite, next to the TypeScript tests."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

pytest_plugins = ["agent_reach.testing"]

#: The repository checkout (sdks/python/tests → the root).
REPO = Path(__file__).resolve().parents[3]
SRC = Path(__file__).resolve().parents[1] / "src"

T = TypeVar("T")


async def eventually(what: str, probe: Callable[[], Awaitable[T | None]], timeout: float = 20.0, every: float = 0.1) -> T:
    """Polls ``probe`` until it returns something truthy; fails naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(every)


async def until(what: str, condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Waits until ``condition()`` holds (checked every 50 ms); fails naming ``what`` after ``timeout`` s."""

    async def probe() -> bool:
        return condition()

    await eventually(what, probe, timeout, every=0.05)


def child_env(stack: Any, **extra: str) -> dict[str, str]:
    """The environment of an agent process run by a test: the SDK's AGENT_REACH_* variables
    pointing at the stack, and this checkout's sources importable."""
    env = {k: v for k, v in os.environ.items()}
    env.update(
        AGENT_REACH_REGISTRY_URL=stack.registry_url,
        AGENT_REACH_DISPATCHER_URL=stack.dispatcher_url,
        AGENT_REACH_INGRESS_URL=stack.ingress_url,
        AGENT_REACH_TOKEN=stack.admin_token or "",
        PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


async def read_line(stream: asyncio.StreamReader, what: str, timeout: float = 20.0) -> str:
    try:
        line = await asyncio.wait_for(stream.readline(), timeout)
    except TimeoutError:
        raise AssertionError(f"no line from the {what} within {timeout} s") from None
    if not line:
        raise AssertionError(f"the {what} ended its output without the expected line")
    return line.decode().strip()


PYTHON = sys.executable

