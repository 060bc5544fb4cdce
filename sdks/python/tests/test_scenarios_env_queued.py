"""The SDK scenarios of scenario_list.py in queued mode, through the real stack — the same test
code as test_scenarios_direct.py (test_scenarios.py covers the scenarios that need the stack's
own tools: a chaos proxy, SIGTERM, token lifetimes)."""

from __future__ import annotations

import pytest

from agent_reach.testing import TestEnvironment
from scenario_list import SCENARIOS

scenario = pytest.mark.scenario
pytestmark = pytest.mark.parametrize("reach_env", ["queued"], indirect=True)


@scenario("deliver-ack")
async def test_deliver_ack(reach_env: TestEnvironment) -> None:
    await SCENARIOS["deliver-ack"](reach_env)


@scenario("request-result")
async def test_request_result(reach_env: TestEnvironment) -> None:
    await SCENARIOS["request-result"](reach_env)


@scenario("reject-retryable")
async def test_reject_retryable(reach_env: TestEnvironment) -> None:
    await SCENARIOS["reject-retryable"](reach_env)


@scenario("reject-non-retryable")
async def test_reject_non_retryable(reach_env: TestEnvironment) -> None:
    await SCENARIOS["reject-non-retryable"](reach_env)


@scenario("no-route")
async def test_no_route(reach_env: TestEnvironment) -> None:
    await SCENARIOS["no-route"](reach_env)


@scenario("sticky-session")
async def test_sticky_session(reach_env: TestEnvironment) -> None:
    await SCENARIOS["sticky-session"](reach_env)


@scenario("publish-fanout")
async def test_publish_fanout(reach_env: TestEnvironment) -> None:
    await SCENARIOS["publish-fanout"](reach_env)


@scenario("publish-no-subscriber")
async def test_publish_no_subscriber(reach_env: TestEnvironment) -> None:
    await SCENARIOS["publish-no-subscriber"](reach_env)


@scenario("ack-timeout-retry")
async def test_ack_timeout_retry(reach_env: TestEnvironment) -> None:
    await SCENARIOS["ack-timeout-retry"](reach_env)


@scenario("redelivery-deduped")
async def test_redelivery_deduped(reach_env: TestEnvironment) -> None:
    await SCENARIOS["redelivery-deduped"](reach_env)


@scenario("long-handler-progress")
async def test_long_handler_progress(reach_env: TestEnvironment) -> None:
    await SCENARIOS["long-handler-progress"](reach_env)


@scenario("refusal-keeps-health")
async def test_refusal_keeps_health(reach_env: TestEnvironment) -> None:
    await SCENARIOS["refusal-keeps-health"](reach_env)


@scenario("duplicate-4001")
async def test_duplicate_4001(reach_env: TestEnvironment) -> None:
    await SCENARIOS["duplicate-4001"](reach_env)


@scenario("preflight-local")
async def test_preflight_local(reach_env: TestEnvironment) -> None:
    await SCENARIOS["preflight-local"](reach_env)
