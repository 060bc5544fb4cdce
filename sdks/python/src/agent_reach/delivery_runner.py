"""Runs deliveries through their handlers.

At most max_concurrency run at once (the rest wait in a local queue); each is answered with
``result`` (when one is expected) then ``ack``, or with a ``reject``. Redeliveries are deduped:
a message already handled is answered from the cache, one still running is answered when that
run ends. While a handler runs, ``progress`` frames keep its ack deadline ahead of the work.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from . import frames
from .dedupe import DedupeCache, DedupeOptions, Handled, Outcome, Refused, dedupe_key
from .errors import ReachError
from .frames import AgentFrame, Deliver
from .handler_context import AgentApi, ContinuingApi, Handler, HandlerContext
from .load import LoadTracker
from .message import LoadReport, Message
from .payload import encode_payload, json_size
from .session import SessionContext, context_to_headers
from .work_queue import WorkQueue

#: Largest result payload: it becomes the payload of a task_result envelope.
MAX_RESULT_BYTES = 256 * 1024
# The code of a retryable reject that hands back work never started (2002 SATURATED): the
# dispatcher retries it elsewhere without counting it against this agent's circuit.
HAND_BACK = 2002
TASK_RESULT = "task_result"


@dataclass(frozen=True, slots=True)
class Failure:
    code: int
    reason: str
    retryable: bool


@dataclass(frozen=True, slots=True)
class _Registered:
    fn: Handler
    takes_ctx: bool
    is_async: bool


@dataclass(frozen=True, slots=True)
class _Job:
    frame: Deliver
    key: str
    handler: _Registered


def _registered(fn: Handler) -> _Registered:
    """How to call a handler: with or without ``ctx``, on the loop or in the thread pool."""
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))
    try:
        params = inspect.signature(fn).parameters.values()
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        takes_ctx = len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)
    except (TypeError, ValueError):
        takes_ctx = True
    return _Registered(fn, takes_ctx, is_async)


def failure_of(err: BaseException) -> Failure:
    """What a handler's exception means on the wire: a ReachError keeps its code and retryable
    flag; anything else is 3003, retryable (another attempt may succeed)."""
    if isinstance(err, ReachError):
        return Failure(err.code, err.message, err.retryable)
    return Failure(3003, str(err) or type(err).__name__, True)


def check_result(value: Any) -> Failure | None:
    """A result must fit in a task_result envelope: at most 256 KiB of payload as the protocol
    counts it (the bytes themselves, or the UTF-8 JSON text; never the base64 text or the frame).
    A larger one is refused here with the dispatcher's words: the delivery is rejected (final),
    so the sender learns at once."""
    try:
        size = memoryview(value).nbytes if isinstance(value, (bytes, bytearray, memoryview)) else json_size(value)
    except (TypeError, ValueError) as err:
        return Failure(3003, f"result is not JSON-serialisable: {err}", False)
    if size <= MAX_RESULT_BYTES:
        return None
    return Failure(4102, f"result refused: 4102 PAYLOAD_TOO_LARGE: result payload is {size} bytes; the limit is {MAX_RESULT_BYTES}", False)


def expects_result(m: Message) -> bool:
    """A capability request or anything with reply_to is answered with a result; topic events are not."""
    return m.reply_to is not None or m.capability is not None


def progress_interval(d: Deliver, now: float | None = None) -> float:
    """A third of the delivery's ack window (from its deadline), so two reports may be lost
    before the deadline passes; between 0.5 s and 10 s."""
    if d.deadline is None:
        return 3.0
    window = d.deadline - (time.time() if now is None else now)
    return min(10.0, max(0.5, window / 3))


def _unversioned(name: str) -> str:
    """``name@major`` is served by the handler of ``name`` when none is registered for the pin."""
    at = name.rfind("@")
    return name[:at] if at > 0 else name


class DeliveryRunner:
    def __init__(
        self,
        *,
        max_concurrency: int,
        dedupe: DedupeOptions,
        report_progress: bool,
        log: logging.Logger,
        agent_id: Callable[[], str | None],
        send: Callable[[AgentFrame], None],
        api: AgentApi,
        on_load_changed: Callable[[], None] | None = None,
    ) -> None:
        """``on_load_changed``: a handler started or ended (the heartbeat's current_load changed)."""
        self._handlers: dict[str, _Registered] = {}
        self._subscriptions: dict[str, _Registered] = {}
        self._direct: _Registered | None = None
        self._queue: WorkQueue[_Job] = WorkQueue(max_concurrency, self._run, on_load_changed)
        self._dedupe = DedupeCache(dedupe)
        self._outcomes = LoadTracker()
        self._report_progress = report_progress
        self._log = log
        self._agent_id = agent_id
        self._send = send
        self._api = api
        #: Dedupe key → redeliveries that arrived while the first delivery runs or waits.
        self._in_flight: dict[str, list[Deliver]] = {}
        self._accepting = True
        # Synchronous handlers run here: one thread per concurrent delivery at most.
        self._executor = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="agent-reach-handler")
        self._running_calls: set[asyncio.Future[Any]] = set()
        self._contexts: set[HandlerContext] = set()

    # ── what the agent serves ───────────────────────────────────────────────────────────────

    def handle(self, capability: str, fn: Handler) -> None:
        self._handlers[capability] = _registered(fn)

    def subscribe(self, topic: str, fn: Handler) -> None:
        self._subscriptions[topic] = _registered(fn)

    def set_direct(self, fn: Handler) -> None:
        self._direct = _registered(fn)

    @property
    def capability_names(self) -> list[str]:
        return list(self._handlers)

    @property
    def topic_names(self) -> list[str]:
        return list(self._subscriptions)

    @property
    def running(self) -> int:
        return self._queue.running

    def load(self) -> LoadReport:
        return self._outcomes.snapshot(self._queue.running, self._queue.queued)

    # ── deliveries ──────────────────────────────────────────────────────────────────────────

    def accept(self, d: Deliver, log: logging.LoggerAdapter[logging.Logger]) -> None:
        """Takes one delivery meant for a handler."""
        m = d.message
        if not self._accepting:
            self.reject(d, HAND_BACK, "agent is stopping", True)
            return
        key = dedupe_key(m)
        earlier = self._dedupe.get(key)
        if earlier is not None:
            log.info("redelivery of a handled message (attempt %d): answering with the earlier outcome", d.attempt)
            self._answer(d, earlier)
            return
        waiting = self._in_flight.get(key)
        if waiting is not None:
            log.info("redelivery of a message in progress (attempt %d): it is answered when the handler finishes", d.attempt)
            waiting.append(d)
            return
        handler = self._handler_for(m)
        if handler is None:
            if m.message_type == TASK_RESULT:
                # A reply whose request already timed out: nothing waits for it any more.
                log.debug("late task_result without a waiting request: acknowledged")
                self.ack(d)
                return
            direct = not m.capability and not m.topic
            log.warning("no handler for capability=%s topic=%s", m.capability, m.topic)
            # Another agent may serve the capability; a message addressed to this agent has nowhere else to go.
            self.reject(d, 3003, f"agent {self._agent_id() or ''} has no handler for {m.capability or m.topic or m.message_type}", not direct)
            return
        self._in_flight[key] = []
        self._queue.push(_Job(d, key, handler))

    def stop_accepting(self) -> None:
        """Deliveries that have not started go back to the dispatcher (retryable), for another agent."""
        self._accepting = False
        for job in self._queue.take_queued():
            self._finish(job, None, Failure(HAND_BACK, "agent is stopping", True), self._log)

    async def idle(self) -> None:
        await self._queue.idle()

    def abandon(self) -> None:
        """Gives up on running handlers: async ones are cancelled, every ``ctx.cancelled`` is set."""
        for ctx in list(self._contexts):
            ctx.cancelled.set()
        for call in list(self._running_calls):
            call.cancel()

    def close(self) -> None:
        # Threads of abandoned synchronous handlers cannot be stopped; they end on their own.
        self._executor.shutdown(wait=False, cancel_futures=True)

    def ack(self, d: Deliver) -> None:
        self._send(frames.ack(d))

    def reject(self, d: Deliver, code: int, reason: str, retryable: bool) -> None:
        self._send(frames.reject(d, code, reason, retryable))

    def _handler_for(self, m: Message) -> _Registered | None:
        if m.capability:
            return self._handlers.get(m.capability) or self._handlers.get(_unversioned(m.capability))
        if m.topic:
            return self._subscriptions.get(m.topic)
        return self._direct

    async def _run(self, job: _Job) -> None:
        d = job.frame
        m = d.message
        log = logging.LoggerAdapter(self._log, {"agent_id": self._agent_id(), "message_id": m.message_id, "trace_id": m.trace_id, "seq": d.seq})
        session = SessionContext(m.headers, m.session_id)
        ctx = HandlerContext(
            seq=d.seq,
            attempt=d.attempt,
            deadline=d.deadline,
            traceparent=d.traceparent,
            session=session,
            log=log,
            node=ContinuingApi(self._api, d.traceparent, m.trace_id or None),
            loop=asyncio.get_running_loop(),
        )
        self._contexts.add(ctx)
        # A handler longer than the ack window must not look dead: progress frames keep moving
        # the delivery's deadline while it runs, so it is never retried elsewhere meanwhile.
        reporter = asyncio.create_task(self._report(d)) if self._report_progress else None
        started = time.monotonic()
        outcome: Outcome | None = None
        failure: Failure | None = None
        # A final refusal the handler chose (NonRetryableError: bad input) is the agent working as
        # it should: it must not lower the health the heartbeats report. Two of them took an agent
        # to health 0, COOLDOWN and 2001 for its senders (issue 25). A crash, a retryable failure,
        # a cancelled handler or a result the node cannot send still counts.
        refused = False
        try:
            value = await self._call(job.handler, m, ctx)
            failure = check_result(value)
            outcome = Handled(value, context_to_headers(session.changes()))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this task itself is being cancelled (the loop is shutting down)
            # Cancelled by the node's own stop (drain time up): handed back, not the agent failing.
            code = 3003 if self._accepting else HAND_BACK
            failure = Failure(code, "the handler was cancelled: the agent stopped before it finished", True)
        except Exception as err:
            failure = failure_of(err)
            refused = not failure.retryable
        finally:
            if reporter is not None:
                reporter.cancel()
            self._contexts.discard(ctx)
        self._outcomes.record(failure is None or refused, (time.monotonic() - started) * 1000)
        self._finish(job, outcome if failure is None else None, failure, log)

    async def _call(self, h: _Registered, m: Message, ctx: HandlerContext) -> Any:
        args: tuple[Any, ...] = (m, ctx) if h.takes_ctx else (m,)
        loop = asyncio.get_running_loop()
        call: asyncio.Future[Any]
        if h.is_async:
            # Its own task, so abandon() can cancel the handler without cancelling the runner.
            call = asyncio.ensure_future(h.fn(*args))
        else:
            # A copy of the caller's context variables travels into the thread, as asyncio does for tasks.
            call = loop.run_in_executor(self._executor, contextvars.copy_context().run, h.fn, *args)
        self._running_calls.add(call)
        try:
            value = await call
        finally:
            self._running_calls.discard(call)
        if inspect.isawaitable(value):  # a plain function that returned a coroutine
            value = await value
        return value

    async def _report(self, d: Deliver) -> None:
        every = progress_interval(d)
        while True:
            await asyncio.sleep(every)
            self._send(frames.progress(d))

    def _finish(self, job: _Job, outcome: Outcome | None, failure: Failure | None, log: logging.LoggerAdapter[logging.Logger] | logging.Logger) -> None:
        deliveries = [job.frame, *self._in_flight.pop(job.key, [])]
        if outcome is not None and failure is None:
            self._dedupe.set(job.key, outcome)
            for d in deliveries:
                self._answer(d, outcome)
            log.debug("handled (attempt %d)", job.frame.attempt)
            return
        f = failure or Failure(5001, "no outcome", True)
        # Only a final refusal is remembered: a retryable failure must run again when it is retried.
        if not f.retryable:
            self._dedupe.set(job.key, Refused(f.code, f.reason))
        for d in deliveries:
            self.reject(d, f.code, f.reason, f.retryable)
        log.warning("delivery rejected (attempt %d, code %d, retryable %s): %s", job.frame.attempt, f.code, f.retryable, f.reason)

    def _answer(self, d: Deliver, outcome: Outcome) -> None:
        """The result (when one is expected) goes out before the ack, so the message is never DELIVERED without it."""
        if isinstance(outcome, Refused):
            self.reject(d, outcome.code, outcome.reason, False)
            return
        if expects_result(d.message):
            self._send(frames.result(d, encode_payload(outcome.payload), outcome.headers))
        self.ack(d)
