"""Testing kit for agents: run them against a local Agent-Reach stack.

Both modes with one test (``create_test_environment(mode)``, fixture ``reach_env``): direct
mode needs no stack (a local control plane, agent_reach.direct); queued mode is the stack.

As a pytest plugin (fixtures ``reach_stack``, ``reach_client``, ``start_agent``, ``reach_env``)::

    # conftest.py
    pytest_plugins = ["agent_reach.testing"]

    # test_mine.py
    async def test_parses(start_agent, reach_client):
        cap = unique_capability("parse")
        agent = await start_agent(handlers={cap: my_handler})
        out = await reach_client.submit({"capability": cap, "payload": {}}, wait_ms=10_000)
        assert out["result"] == {"status": "ok", "payload": {"pages": 3}}

or without pytest: ``local_stack()``, ``start_test_agent(...)``, ``wait_until_routable(agent_id,
views=[caller.node])`` (until the router and the callers' own pre-flight views agree).
"""

from .agents import Served, StartedAgent, admin_client, start_test_agent, unique_capability, unique_name, until_views_agree, views_behind, wait_until_routable
from .environment import TestEnvironment, create_test_environment
from .stack import LocalStack, is_ready, local_stack, reach_cli

try:  # the fixtures need pytest and pytest-asyncio; the helpers above do not
    from .fixtures import reach_client, reach_env, reach_local, reach_stack, start_agent
except ImportError:  # pragma: no cover
    pass

__all__ = [
    "LocalStack",
    "Served",
    "StartedAgent",
    "TestEnvironment",
    "create_test_environment",
    "admin_client",
    "is_ready",
    "local_stack",
    "reach_cli",
    "start_test_agent",
    "unique_capability",
    "unique_name",
    "until_views_agree",
    "views_behind",
    "wait_until_routable",
]
