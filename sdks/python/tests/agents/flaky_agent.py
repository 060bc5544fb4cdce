"""An agent process for the circuit tests (test/integration/circuits/agent-outcomes.test.ts),
written as the README shows: one capability whose handler raises a plain exception — a
transient failure, rejected as retryable — when the payload asks for it (`fail`: every
attempt; `fail_first`: the first attempt only), after `sleep_ms` of work if it says so. Endpoints and token come from the
AGENT_REACH_* variables, as in any deployment."""

import asyncio
import logging
import os
import sys

from agent_reach import AgentNode, HandlerContext, Message

logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
node = AgentNode({"agent_type": "py-flaky-test", "metadata": {"max_concurrency": 10}, "ttl_s": 30})


@node.handle(os.environ["FLAKY_CAPABILITY"])
async def flaky(msg: Message, ctx: HandlerContext) -> dict[str, object]:
    payload = msg.payload if isinstance(msg.payload, dict) else {}
    if payload.get("sleep_ms"):
        await asyncio.sleep(payload["sleep_ms"] / 1000)
    if payload.get("fail") or (payload.get("fail_first") and ctx.attempt == 0):
        raise RuntimeError("the model is overloaded")
    return {"i": payload.get("i")}


async def main() -> None:
    await node.start()
    print(f"serving {node.agent_id}", flush=True)
    await node.run()


asyncio.run(main())
