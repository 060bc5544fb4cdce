"""The SDK's pure parts, without a stack: backoff, dedupe, token expiry, frames, session context,
payload encoding, message ids, the progress interval, how handlers are called."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import threading
from pathlib import Path

import pytest

from agent_reach import Backoff, DedupeCache, DedupeOptions, Message, NonRetryableError, ReachError, SessionContext, reconnect_delay, refresh_delay, token_lifetime
from agent_reach.dedupe import Handled, Refused, dedupe_key
from agent_reach.delivery_runner import DeliveryRunner, check_result, failure_of, progress_interval
from agent_reach.errors import error_for_code, error_from_body
from agent_reach.frames import Deliver, ErrorFrame, Welcome, parse_server_frame, parse_traceparent
from agent_reach.ids import new_message_id
from agent_reach.load import LoadTracker
from agent_reach.node import _ws_url
from agent_reach.payload import envelope_fields
from agent_reach.session import context_from_headers, context_to_headers
from agent_reach.testing import local_stack


def token_with(claims: dict[str, object]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"rt1.{body}.signature"


def message(**fields: object) -> Message:
    m = Message.from_json({"message_id": new_message_id(), "producer": "p", **fields})
    assert m is not None
    return m


def test_backoff_doubles_from_1_s_to_32_s_plus_up_to_20_percent_jitter() -> None:
    assert [reconnect_delay(a, lambda: 0.0) for a in range(8)] == [1, 2, 4, 8, 16, 32, 32, 32]
    assert reconnect_delay(0, lambda: 1.0) == pytest.approx(1.2)
    assert reconnect_delay(10, lambda: 0.5) == pytest.approx(32 * 1.1)
    assert reconnect_delay(1, lambda: 0.0, Backoff(base=0.5, max=1)) == 1


def test_dedupe_remembers_outcomes_by_producer_and_idempotency_key_with_bounds() -> None:
    now = [0.0]
    cache = DedupeCache(DedupeOptions(max_entries=2, ttl=10, max_bytes=10_000), clock=lambda: now[0])
    a, b = message(idempotency_key="k1"), message(idempotency_key="k1")
    assert dedupe_key(a) == dedupe_key(b) == "key:p:k1"
    assert dedupe_key(message()).startswith("id:msg_")
    cache.set("a", Handled({"n": 1}))
    cache.set("b", Refused(4101, "bad"))
    assert cache.get("a") == Handled({"n": 1})  # a is now the most recently used
    cache.set("c", Handled(3))
    assert cache.get("b") is None and cache.get("a") is not None  # b was the least recently used
    now[0] = 11
    assert cache.get("a") is None and len(cache) == 1  # expired


def test_token_renewal_is_due_at_80_percent_of_its_lifetime() -> None:
    token = token_with({"sub": "a", "iat": 1000, "exp": 1100})
    life = token_lifetime(token)
    assert life is not None and (life.issued_at, life.expires_at) == (1000, 1100)
    assert refresh_delay(token, now=1000) == pytest.approx(80)
    assert refresh_delay(token, now=1090) == 1.0  # overdue: soon, never at once in a loop
    assert token_lifetime("not-a-token") is None
    assert refresh_delay("not-a-token", now=0) == pytest.approx(3600 * 0.8)


def test_server_frames_are_read_tolerantly() -> None:
    assert parse_server_frame('{"type":"welcome","connection_id":"c1","heartbeat_ms":15000,"resume_from":7,"new":1}', 0) == Welcome("c1", 15000.0, 7)
    d = parse_server_frame(
        json.dumps(
            {
                "type": "deliver",
                "seq": 3,
                "attempt": 1,
                "deadline": "2030-01-01T00:00:00.000Z",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "message": {"message_id": "msg_1", "capability": "x", "payload_b64": "AAE=", "content_type": "application/octet-stream"},
            }
        ),
        0,
    )
    assert isinstance(d, Deliver) and (d.seq, d.attempt) == (3, 1)
    assert d.deadline == pytest.approx(1893456000.0)
    assert d.message.payload_bytes == b"\x00\x01" and d.message.priority == "NORMAL" and d.message.retryable is True
    assert parse_server_frame('{"type":"error","code":4129,"name":"RATE_LIMITED","message":"slow down","client_ref":"r1"}', 0) == ErrorFrame(4129, "RATE_LIMITED", "slow down", "r1")
    assert parse_server_frame('{"type":"something_new"}', 0) is None
    assert parse_server_frame("not json", 0) is None
    assert parse_traceparent("00-00000000000000000000000000000000-b7ad6b7169203331-01") is None


def test_session_fragments_travel_as_reach_context_headers() -> None:
    s = SessionContext({"reach-context-user": '{"name":"Ada"}', "other": "x"}, "sess-1")
    assert s.get_json("user") == {"name": "Ada"} and s.id == "sess-1"
    s.set_json("plan", [1, 2])
    assert s.changes() == {"plan": "[1,2]"}
    assert s.all() == {"user": '{"name":"Ada"}', "plan": "[1,2]"}
    assert context_to_headers(s.changes()) == {"reach-context-plan": "[1,2]"}
    assert context_from_headers(context_to_headers({"a": "1"})) == {"a": "1"}
    with pytest.raises(ValueError):
        s.set("no spaces", "x")


def test_payloads_json_values_as_payload_and_bytes_as_payload_b64() -> None:
    assert envelope_fields({"capability": "x", "payload": {"a": 1}, "topic": None}) == {"capability": "x", "payload": {"a": 1}}
    assert envelope_fields({"capability": "x", "payload": b"\x00\xff"}) == {"capability": "x", "payload_b64": "AP8=", "content_type": "application/octet-stream"}
    assert envelope_fields({"capability": "x"}) == {"capability": "x", "payload": None}


def test_message_ids_are_msg_plus_a_ulid() -> None:
    ids = [new_message_id() for _ in range(50)]
    assert all(re.fullmatch(r"msg_[0-9A-HJKMNP-TV-Z]{26}", i) for i in ids)
    assert len(set(ids)) == 50


def test_results_must_fit_a_task_result_and_be_json() -> None:
    assert check_result({"ok": True}) is None
    assert check_result(b"x" * 10) is None
    too_big = check_result("x" * (256 * 1024))
    assert too_big is not None and (too_big.code, too_big.retryable) == (4102, False)
    not_json = check_result({1, 2})
    assert not_json is not None and (not_json.code, not_json.retryable) == (3003, False)


def test_exceptions_map_to_reject_codes() -> None:
    assert failure_of(RuntimeError("boom")) == failure_of(RuntimeError("boom"))
    assert (failure_of(RuntimeError("boom")).code, failure_of(RuntimeError("boom")).retryable) == (3003, True)
    assert (failure_of(NonRetryableError("INVALID_ENVELOPE", "no total")).code, failure_of(NonRetryableError("INVALID_ENVELOPE", "x")).retryable) == (4101, False)
    assert failure_of(ReachError("RATE_LIMITED", "later")).retryable is True
    assert error_for_code(9999, "odd").name == "INTERNAL"
    err = error_from_body(429, {"error": {"code": 4129, "name": "RATE_LIMITED", "message": "slow"}}, "2")
    assert (err.code, err.details["retry_after"], err.details["http_status"]) == (4129, "2", 429)


def test_progress_is_reported_every_third_of_the_ack_window_between_half_a_second_and_10_s() -> None:
    def at(window: float | None) -> float:
        d = Deliver(seq=1, attempt=0, deadline=None if window is None else 1000 + window, traceparent=None, message=message(capability="x"))
        return progress_interval(d, now=1000)

    assert (at(None), at(9), at(0.6), at(60)) == (3.0, 3.0, 0.5, 10.0)


def test_load_reports_running_queued_latency_and_health() -> None:
    now = [0.0]
    load = LoadTracker(window=300, clock=lambda: now[0])
    assert load.snapshot(0, 0) == {"current_load": 0, "queue_length": 0, "avg_latency_ms": 0.0, "health": 1.0}
    load.record(True, 10)
    load.record(False, 30)
    # one success and one failure, weighed with ten successes' worth of trust: 11 / 12
    assert load.snapshot(2, 1) == {"current_load": 2, "queue_length": 1, "avg_latency_ms": 20.0, "health": 0.917}
    now[0] = 301
    assert load.snapshot(0, 0)["health"] == 1.0


def test_one_failure_is_not_enough_to_look_broken() -> None:
    """A fresh agent's first transient failure read health 0: COOLDOWN and 2001 for its senders."""
    fresh = LoadTracker()
    fresh.record(False, 5)
    assert fresh.snapshot(0, 0)["health"] == 0.909
    failing = LoadTracker()
    for _ in range(20):
        failing.record(False, 5)
    assert failing.snapshot(0, 0)["health"] == 0.333
    healthy = LoadTracker()
    for i in range(100):
        healthy.record(i % 20 != 0, 5)
    assert healthy.snapshot(0, 0)["health"] == 0.955


async def test_a_sync_handler_runs_in_a_worker_thread_and_the_loop_stays_free() -> None:
    """The runner alone (no socket): a blocking handler must not stall the event loop."""
    sent: list[dict[str, object]] = []
    runner = DeliveryRunner(
        max_concurrency=2,
        dedupe=DedupeOptions(),
        report_progress=False,
        log=logging.getLogger("test"),
        agent_id=lambda: "a1",
        send=sent.append,
        api=None,  # type: ignore[arg-type]  # the handler sends nothing
    )
    threads: list[str] = []
    released = threading.Event()

    def blocking(msg: Message) -> str:
        threads.append(threading.current_thread().name)
        # Blocks its thread until the event loop releases it: on the loop's own thread this
        # would wait in vain (nothing else could run) and the handler would fail.
        if not released.wait(5):
            raise RuntimeError("the event loop did not run while the handler blocked")
        return "done"

    runner.handle("crunch", blocking)
    d = Deliver(seq=1, attempt=0, deadline=None, traceparent=None, message=message(capability="crunch"))
    runner.accept(d, logging.LoggerAdapter(logging.getLogger("test"), {}))
    while not threads:
        await asyncio.sleep(0.01)
    released.set()
    await runner.idle()
    runner.close()
    assert threads[0].startswith("agent-reach-handler")
    assert [f["type"] for f in sent] == ["result", "ack"]
    assert sent[0]["payload"] == "done"


def test_the_testing_kit_finds_the_stack_by_the_services_variables(tmp_path: Path) -> None:
    (tmp_path / "admin-token").write_text("secret-admin\n")
    (tmp_path / "state.json").write_text(json.dumps({"endpoints": {"kafka": "127.0.0.1:19092", "schema-registry": "http://127.0.0.1:18081"}}))
    stack = local_stack({"REACH_HOME": str(tmp_path), "REACH_REGISTRY_PORT": "17411", "REACH_DISPATCHER_PORT": "17412", "REACH_HTTP_HOST": "0.0.0.0"})
    assert (stack.registry_url, stack.dispatcher_url, stack.ingress_url) == ("http://127.0.0.1:17411", "ws://127.0.0.1:17412/v1/connect", "http://127.0.0.1:7410")
    assert stack.admin_token == "secret-admin"
    assert stack.endpoint("kafka") == "127.0.0.1:19092"
    assert local_stack({"REACH_HOME": str(tmp_path), "REACH_ADMIN_TOKEN": "from-env"}).admin_token == "from-env"


def test_dispatcher_urls_get_the_connect_path() -> None:
    assert _ws_url("http://127.0.0.1:7412") == "ws://127.0.0.1:7412/v1/connect"
    assert _ws_url("wss://reach.example/v1/connect") == "wss://reach.example/v1/connect"


def test_dedupe_cache_stays_bounded_under_100k_distinct_keys() -> None:
    """R-G4: 100,000 distinct keys leave the cache at its entry bound; the newest stay, the oldest
    go; and memory is flat once the cache is full (80,000 more keys move it by less than 8 MiB)."""
    import gc
    import tracemalloc

    from agent_reach.dedupe import DedupeCache, DedupeOptions, Handled

    cache = DedupeCache(DedupeOptions())
    held: list[int] = []
    tracemalloc.start()
    try:
        for i in range(100_000):
            cache.set(f"key:{i}", Handled({"seen": i, "note": "x" * 100}))
            if i + 1 in (20_000, 100_000):
                gc.collect()
                held.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert held[1] - held[0] < 8 * 1024 * 1024, held
    assert len(cache) == DedupeOptions().max_entries
    assert cache.byte_size <= DedupeOptions().max_bytes
    assert cache.get("key:99999") is not None and cache.get("key:0") is None


def test_the_routes_view_decides_only_when_complete_and_lets_a_message_that_may_wait_go() -> None:
    """R-G6: no verdict before a full view or after reset (a dropped connection); with expire_at
    only 2003 refuses (the router parks the rest)."""
    from agent_reach.frames import Routes
    from agent_reach.routes_view import RoutesView

    view = RoutesView()
    view.apply(Routes(full=False, capabilities={"parse_pdf": 2001}, topics={}))
    assert view.verdict("capability", "parse_pdf") is None and view.refusal("capability", "parse_pdf") is None
    view.apply(Routes(full=True, capabilities={"parse_pdf": 2001, "read_ledger": 2003, "flaky": 3001}, topics={"orders": 0}))
    assert [view.verdict("capability", n) for n in ("parse_pdf", "read_ledger", "flaky@2", "nobody")] == [2001, 2003, 3001, None]
    refused = view.refusal("capability", "parse_pdf")
    assert refused is not None and (refused.code, refused.details["preflight"]) == (2001, "local")
    assert view.refusal("capability", "parse_pdf", may_wait=True) is None
    assert view.refusal("capability", "flaky", may_wait=True) is None
    denied = view.refusal("capability", "read_ledger", may_wait=True)
    assert denied is not None and denied.code == 2003
    assert view.refusal("topic", "orders") is None
    view.reset()
    assert (view.ready, view.verdict("capability", "read_ledger"), view.refusal("capability", "read_ledger")) == (False, None, None)


async def test_the_work_queue_says_when_the_number_of_running_jobs_changed() -> None:
    from agent_reach.work_queue import WorkQueue

    gates: list[asyncio.Event] = []
    seen: list[int] = []

    async def run(_: int) -> None:
        gate = asyncio.Event()
        gates.append(gate)
        await gate.wait()

    q: WorkQueue[int] = WorkQueue(2, run, lambda: seen.append(q.running))
    for i in range(3):
        q.push(i)  # the third waits: running stays 2
    assert seen == [1, 2]
    await asyncio.sleep(0)
    gates[0].set()  # job 3 takes the freed slot
    for _ in range(5):
        await asyncio.sleep(0)
    assert seen == [1, 2]
    gates[1].set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert seen == [1, 2, 1]
    for g in gates:
        g.set()
    await q.idle()


async def test_early_beat_tells_the_registry_when_the_load_crosses_the_busy_line_at_most_once_per_gap() -> None:
    from agent_reach.early_beat import EarlyBeat

    running = 0
    beats: list[int] = []
    in_flight = False
    now = [1000.0]

    def beat() -> bool:
        if in_flight:
            return False
        beats.append(running)
        early.sent(running)
        return True

    early = EarlyBeat(max_concurrency=1, running=lambda: running, beat=beat, min_gap=0.05, clock=lambda: now[0])

    def set_running(n: int) -> None:
        nonlocal running
        running = n
        early.changed()

    early.sent(0)  # the regular heartbeat: idle
    set_running(1)  # full, but the last beat was just now: after the gap
    await asyncio.sleep(0.01)
    assert beats == []
    now[0] += 0.05
    await asyncio.sleep(0.08)
    assert beats == [1]
    now[0] += 10
    in_flight = True
    set_running(0)  # freed 10 s after the busy report: at once, unless a beat is on its way
    await asyncio.sleep(0.01)
    assert beats == [1]
    in_flight = False
    await asyncio.sleep(0.1)
    assert beats == [1, 0]
    set_running(1)
    set_running(0)  # crossed back before the gap ended: nothing to correct
    await asyncio.sleep(0.1)
    assert beats == [1, 0]
    set_running(1)
    early.stop()
    await asyncio.sleep(0.1)
    assert beats == [1, 0]
