"""Testing kit for agents: run them against a local Agent-Reach stack.

As a pytest plugin (fixtures ``reach_stack``, ``reach_client``, ``start_agent``)::

    # conftest.py
    pytest_plugins = ["agent_reach.testing"]

    # test_mine.py
    async def test_parses(start_agent, reach_client):
        cap = unique_capability("parse")
        agent = await start_agent(handlers={cap: my_handler})
        out = await reach_client.submit({"capability": cap, "payload": {}}, wait_ms=10_000)
        assert out["result"] == {"status": "ok", "payload": {"pages": 3}}

or without pytest: ``local_stack()``, ``start_test_agent(...)``, ``wait_until_routable(agent_id)``.
"""

from .agents import StartedAgent, admin_client, start_test_agent, unique_capability, unique_name, wait_until_routable
from .stack import LocalStack, is_ready, local_stack, reach_cli

try:  # the fixtures need pytest and pytest-asyncio; the helpers above do not
    from .fixtures import reach_client, reach_stack, start_agent
except ImportError:  # pragma: no cover
    pass

__all__ = [
    "LocalStack",
    "StartedAgent",
    "admin_client",
    "is_ready",
    "local_stack",
    "reach_cli",
    "start_test_agent",
    "unique_capability",
    "unique_name",
    "wait_until_routable",
]
