"""A handler's result comes back to its sender exactly as the handler returned it, or the message
ends with a clear refusal at once — never a silent loss (issue 25, items 6–8). Agents written as
the Python SDK README shows, against the real running stack; senders over HTTP (``wait_ms``) and
``request()``."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from agent_reach import Message, ReachClient, ReachError
from agent_reach.testing import unique_capability

LIMIT = 256 * 1024


def bytes_of(size: int, seed: int) -> bytes:
    return bytes((i * 31 + seed) & 0xFF for i in range(size))


async def test_binary_results_up_to_256_kib_come_back_byte_for_byte(start_agent: Any, reach_client: ReachClient) -> None:
    cap = unique_capability("bin")

    async def handler(msg: Message) -> bytes:
        return bytes_of(msg.payload["size"], 5)

    await start_agent(handlers={cap: handler})
    for size in (246_000, 250_000, LIMIT):
        out = await reach_client.submit({"capability": cap, "payload": {"size": size}}, wait_ms=15_000)
        assert out["status"] == "DELIVERED", size
        assert base64.b64decode(out["result"]["payload_b64"]) == bytes_of(size, 5), size
    caller = await start_agent()
    reply = await caller.node.request(cap, {"size": 250_000}, timeout=20)
    assert isinstance(reply, bytes) and reply == bytes_of(250_000, 5)


async def test_a_result_one_byte_over_is_refused_at_once_with_3003_naming_4102(start_agent: Any, reach_client: ReachClient) -> None:
    cap = unique_capability("bigbin")

    async def handler(msg: Message) -> bytes:
        return b"\x01" * (LIMIT + 1)

    await start_agent(handlers={cap: handler})
    with pytest.raises(ReachError) as raised:
        await reach_client.submit({"capability": cap, "payload": {}}, wait_ms=15_000)
    assert raised.value.code == 3003
    assert "4102 PAYLOAD_TOO_LARGE" in raised.value.message
    assert f"{LIMIT + 1} bytes" in raised.value.message
    status = await reach_client.status(raised.value.details["message_id"])
    assert (status["status"], status["code"]) == ("REJECTED", 3003)


async def test_nul_in_a_result_comes_back_as_sent(start_agent: Any, reach_client: ReachClient) -> None:
    answer = {"text": "a\u0000b", "k\u0000": ["\u0000", {"deep": "x\u0000\u0000y"}], "plain": "é😀"}
    cap = unique_capability("nul")

    async def handler(msg: Message) -> dict[str, Any]:
        return answer

    await start_agent(handlers={cap: handler})
    out = await reach_client.submit({"capability": cap, "payload": {"q": 1}}, wait_ms=15_000)
    assert out["result"] == {"status": "ok", "payload": answer}
    again = await reach_client.status(out["message_id"])
    assert again["result"] == {"status": "ok", "payload": answer}
    caller = await start_agent()
    assert await caller.node.request(cap, {"q": 2}, timeout=20) == answer


async def test_a_binary_payload_is_read_with_the_payload_bytes_property(start_agent: Any, reach_client: ReachClient) -> None:
    """As the README shows: ``msg.payload_bytes`` (a property); calling it says so clearly."""
    cap = unique_capability("readbin")
    seen: list[Any] = []

    async def handler(msg: Message) -> dict[str, int]:
        data = msg.payload_bytes
        seen.append(data)
        try:
            msg.payload_bytes()  # type: ignore[misc]
        except TypeError as err:
            seen.append(str(err))
        return {"length": len(data or b"")}

    await start_agent(handlers={cap: handler})
    sent = {"capability": cap, "payload_b64": base64.b64encode(b"\x00\xffhi").decode(), "content_type": "application/octet-stream"}
    out = await reach_client.submit(sent, wait_ms=15_000)
    assert out["result"]["payload"] == {"length": 4}
    assert seen[0] == b"\x00\xffhi"
    assert "payload_bytes is a property" in seen[1]
