"""An agent process for the SIGTERM test: one capability whose handler takes SLOW_SECONDS.
Endpoints and token come from the AGENT_REACH_* variables, as in any deployment."""

import asyncio
import logging
import os
import sys

from agent_reach import AgentNode, Message

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
seconds = float(os.environ.get("SLOW_SECONDS", "3"))
node = AgentNode({"agent_type": "py-drain-test", "ttl_s": 10}, drain_timeout=seconds * 3)


@node.handle(os.environ["SLOW_CAPABILITY"])
async def slow(msg: Message) -> dict[str, float]:
    print(f"started {msg.message_id}", flush=True)
    await asyncio.sleep(seconds)
    return {"slept": seconds}


async def main() -> None:
    await node.start()
    print(f"serving {node.agent_id}", flush=True)
    await node.run()


asyncio.run(main())
