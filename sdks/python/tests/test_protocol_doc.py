"""docs/protocol.md's Kafka producer example, run as written: it produces an envelope it encodes
itself (no Avro library, no SDK) to reach.ingress.v1 with an agent's token, and a Python agent
serving the capability gets it."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from agent_reach import Message, ReachClient
from agent_reach.testing import LocalStack, unique_capability
from conftest import PYTHON, REPO

DOC = REPO / "docs" / "protocol.md"


def producer_example() -> str:
    text = DOC.read_text()
    found = re.search(r"<!-- kafka-producer-example -->\s*```python\n(.*?)```", text, re.S)
    assert found, "docs/protocol.md has no ```python block after <!-- kafka-producer-example -->"
    return found.group(1)


async def test_the_documented_kafka_producer_reaches_an_agent(reach_stack: LocalStack, reach_client: ReachClient, start_agent: Any, tmp_path: Any) -> None:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        pytest.fail("python3-confluent-kafka is not installed (scripts/ensure-python.sh installs it with apt-get)")
    cap = unique_capability("ingest")
    got: list[Message] = []

    async def ingest(msg: Message) -> str:
        got.append(msg)
        return "ok"

    await start_agent(handlers={cap: ingest})
    producer = await start_agent()  # only for its identity: the agent id and token the record carries
    script = tmp_path / "produce.py"
    script.write_text(producer_example())
    env = {
        "KAFKA_BOOTSTRAP": reach_stack.kafka_brokers,
        "SCHEMA_REGISTRY_URL": reach_stack.schema_registry_url,
        "AGENT_ID": producer.agent_id,
        "AGENT_TOKEN": producer.node.token or "",
        "CAPABILITY": cap,
        "PATH": "/usr/bin:/bin",
    }
    proc = await asyncio.create_subprocess_exec(PYTHON, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    message_id = out.decode().strip()
    status = await reach_client.wait(message_id, timeout=20, with_result=True)
    assert (status["status"], status["producer"], status["result"]) == ("DELIVERED", producer.agent_id, {"status": "ok", "payload": "ok"})
    assert [(m.message_id, m.payload, m.producer) for m in got] == [(message_id, {"via": "kafka"}, producer.agent_id)]
