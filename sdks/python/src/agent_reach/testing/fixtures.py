"""pytest fixtures for agents against a local stack (load with ``pytest_plugins = ["agent_reach.testing"]``).

- ``reach_stack`` (session): the running local stack, or one started with ``reach up --detach``
  (and stopped at the end) when none answers and the ``reach`` CLI is at hand.
- ``reach_client``: a ReachClient of that stack with the admin token.
- ``start_agent``: ``await start_agent(handlers={cap: fn})`` starts an agent that is routable
  when it returns; every agent a test started is stopped (and deregistered) after it.
- ``reach_env``: a TestEnvironment (environment.py) in the mode the test is parametrized with
  (``@pytest.mark.parametrize("reach_env", ["direct", "queued"], indirect=True)``), else
  AGENT_REACH_MODE, else direct. Direct environments share one local control plane per session
  (``reach_local``), so each starts in milliseconds.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, TypeVar, cast

import pytest
import pytest_asyncio  # type: ignore[import]  # 0.20 (Debian bookworm) ships no type information

from ..direct import LocalReachProcess
from ..mode import mode_of
from ..reach_client import ReachClient
from .agents import StartedAgent, admin_client, start_test_agent
from .environment import TestEnvironment, create_test_environment
from .stack import LocalStack, is_ready, local_stack, reach_cli, start_stack, stop_stack

StartAgent = Callable[..., Awaitable[StartedAgent]]
F = TypeVar("F", bound=Callable[..., Any])
#: pytest-asyncio's fixture decorator (needed in its strict mode, where plain fixtures are not awaited).
async_fixture = cast(Callable[[F], F], pytest_asyncio.fixture)


@pytest.fixture(scope="session")
def reach_stack() -> Iterator[LocalStack]:
    stack = local_stack()
    started: list[str] | None = None
    if not is_ready(stack):
        cli = reach_cli()
        if cli is None:
            pytest.fail(f"no Agent-Reach stack answers at {stack.registry_url} and no reach CLI was found to start one: run `reach up`, or set REACH_CLI")
        start_stack(cli)
        started = cli
        stack = local_stack()  # the admin token exists now
        if not is_ready(stack, timeout=10):
            pytest.fail(f"`reach up` returned but the stack does not answer at {stack.registry_url}")
    if not stack.admin_token:
        pytest.fail("the stack's admin token was not found: set REACH_ADMIN_TOKEN or REACH_HOME")
    yield stack
    if started is not None:
        stop_stack(started)


@async_fixture
async def reach_client(reach_stack: LocalStack) -> AsyncIterator[ReachClient]:
    async with admin_client(reach_stack) as client:
        yield client


@async_fixture
async def start_agent(reach_stack: LocalStack) -> AsyncIterator[StartAgent]:
    started: list[StartedAgent] = []

    async def start(**options: Any) -> StartedAgent:
        agent = await start_test_agent(stack=reach_stack, started=list(started), **options)
        started.append(agent)
        return agent

    yield start
    await asyncio.gather(*(a.stop() for a in started), return_exceptions=True)


@pytest.fixture(scope="session")
def reach_local() -> Iterator[LocalReachProcess]:
    """Direct mode's local control plane, one per test session."""
    plane = LocalReachProcess.start()
    yield plane
    plane.close()


@async_fixture
async def reach_env(request: pytest.FixtureRequest) -> AsyncIterator[TestEnvironment]:
    mode = getattr(request, "param", None) or os.environ.get("AGENT_REACH_MODE") or "direct"
    if mode_of(mode) == "direct":
        env = await create_test_environment("direct", local=request.getfixturevalue("reach_local"))
    else:
        env = await create_test_environment("queued", stack=request.getfixturevalue("reach_stack"))
    yield env
    await env.stop()
