"""A whole Agent-Reach agent in Python: it offers `echo_text` and answers with what it got.
    PYTHONPATH=sdks/python/src python3 examples/python/echo_agent.py    (with `reach up` running)
    pnpm reach send --capability echo_text --payload '{"hello":"world"}' --wait
"""
import asyncio
import logging
import os

from agent_reach import AgentNode, Message

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
capability = os.environ.get("ECHO_CAPABILITY", "echo_text")
# Endpoints and token from AGENT_REACH_REGISTRY_URL, _DISPATCHER_URL, _TOKEN; local defaults.
node = AgentNode({"agent_type": "echo", "metadata": {"max_concurrency": 8}, "ttl_s": 30})


@node.handle(capability)
async def echo(msg: Message) -> dict[str, object]:
    # The return value is the result; raising rejects the delivery (retried unless NonRetryableError).
    return {"echo": msg.payload, "by": node.agent_id}


async def main() -> None:
    await node.start()  # registers, starts heartbeats, connects
    print(f"echo agent {node.agent_id} serves {capability}", flush=True)
    await node.run()  # serves until SIGTERM / Ctrl-C, then finishes in-flight work and deregisters


asyncio.run(main())
