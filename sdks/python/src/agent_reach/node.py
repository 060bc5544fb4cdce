"""An agent on Agent-Reach.

``AgentNode`` registers the agent's capabilities, heartbeats its real load, holds one WebSocket
to the dispatcher (reconnecting with backoff, renewing its token on that socket before it
expires), runs deliveries through handlers (DeliveryRunner: concurrency limit, dedupe,
ack / reject / result, progress), and sends, publishes and requests over the same socket.

    node = AgentNode({"agent_type": "pdf", "metadata": {"max_concurrency": 4}})

    @node.handle("parse_pdf")
    async def parse(msg):
        return {"pages": 3}  # the result

    asyncio.run(node.run())  # register, heartbeat, connect; SIGTERM / Ctrl-C drains and deregisters
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import signal
import ssl
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, TypeVar, cast, overload
from urllib.parse import urlsplit, urlunsplit

from . import frames
from .agent_socket import CLOSE_AUTH_FAILED, CLOSE_DUPLICATE, AgentSocket
from .backoff import RECONNECT_BACKOFF, Backoff, reconnect_delay
from .dedupe import DedupeOptions
from .early_beat import EarlyBeat
from .delivery_runner import DeliveryRunner
from .direct import shared_local_reach
from .env import connection_from_env
from .errors import AgentReplacedError, NonRetryableError, ReachError, error_for_code
from .frames import Accepted, AgentFrame, Deliver, ErrorFrame, Routes, ServerFrame, TokenRefreshed
from .http import JsonHttp
from .ids import new_id, new_message_id
from .message import AgentDescriptor, CapabilitySpec, LoadReport, Message, Receipt, Registration
from .mode import mode_of
from .payload import envelope_fields
from .pending_requests import PendingRequests, Reply
from .reach_client import ReachClient
from .registry_client import RegistryClient
from .routes_view import RouteKind, RoutesView
from .session import context_to_headers
from .token_expiry import refresh_delay, token_lifetime

TASK_REQUEST = "task_request"
TASK_RESULT = "task_result"
EVENT = "event"
#: Failure receipts: never handed to handlers.
RECEIPT = "reach.receipt"

#: Answers kept while disconnected; beyond this the oldest go (the dispatcher retries their deliveries).
MAX_OUTBOX = 10_000
# How long an answer (result, ack, reject) written to the socket stays "unsure": if the connection drops
# within this time it is written again on the next one. A dispatcher killed with SIGKILL loses
# the frames it had read but not acted on, and hello.last_seq keeps the new one from replaying
# those deliveries, so unanswered they would run again on another agent. An answer the
# dispatcher did take is harmless twice (its seq is gone: ignored). A result goes again with its
# ack: an ack re-sent alone would make the message DELIVERED without its result. Same as the
# TypeScript SDK.
UNSURE_ANSWER_S = 5.0
#: A failed token renewal is tried again this soon (the old token still has a fifth of its life).
TOKEN_REFRESH_RETRY_S = 5.0

State = Literal["new", "starting", "running", "stopping", "stopped"]
H = TypeVar("H", bound=Callable[..., Any])
Listener = Callable[[Any], None]


@dataclass(slots=True)
class _PendingSend:
    frame: AgentFrame
    future: asyncio.Future[str]
    #: The socket it was written to; None while it waits for a connection.
    socket: AgentSocket | None = None


def _ws_url(url: str) -> str:
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path if parts.path not in ("", "/") else "/v1/connect"
    return urlunsplit((scheme, parts.netloc, path, parts.query, parts.fragment))


class AgentNode:
    def __init__(
        self,
        descriptor: AgentDescriptor | Mapping[str, Any],
        *,
        registry_url: str | None = None,
        dispatcher_url: str | None = None,
        ingress_url: str | None = None,
        mode: str | None = None,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        logger: logging.Logger | None = None,
        connect_timeout: float = 10.0,
        ping_interval: float = 15.0,
        idle_timeout: float = 30.0,
        reconnect: Backoff = RECONNECT_BACKOFF,
        drain_timeout: float = 10.0,
        send_timeout: float = 10.0,
        request_timeout: float = 30.0,
        token_refresh_ratio: float = 0.8,
        dedupe: DedupeOptions = DedupeOptions(),
        report_progress: bool = True,
        preflight: bool = True,
        handle_signals: bool = True,
        random: Callable[[], float] = _random.random,
    ) -> None:
        """Endpoints not given come from AGENT_REACH_REGISTRY_URL, _DISPATCHER_URL, _INGRESS_URL and
        _TOKEN (defaults: the local stack). ``token`` is the enrollment (or admin) token that
        registration needs when the registry asks for one. ``ssl_context`` (else AGENT_REACH_CA_FILE)
        trusts a private CA for https/wss endpoints. Times are in seconds.

        ``preflight`` (R-G6): keep the dispatcher's ``routes`` view of what this agent can
        reach and check request() against it — and send()/publish() when they ask — failing fast
        with 2001, 2003 or 3001 without a round trip; False: no view, no check.

        ``mode`` (else AGENT_REACH_MODE, else ``queued``): ``direct`` runs without infrastructure —
        given no endpoints, the node joins the process's local control plane
        (``agent_reach.direct``) at start."""
        env = connection_from_env()
        self._mode = mode_of(mode)
        #: Direct mode without endpoints (arguments or AGENT_REACH_*_URL): the process's own local control plane's, at start().
        self._join_local = self._mode == "direct" and registry_url is None and dispatcher_url is None and not env.explicit_endpoints
        self._registry_url = registry_url or env.registry_url
        self._url = _ws_url(dispatcher_url or env.dispatcher_url)
        self._ingress_url = ingress_url or env.ingress_url
        self._token = token or env.token
        self._ssl_context = ssl_context or env.ssl_context
        self._descriptor = dict(descriptor)
        self._log = logger or logging.getLogger("agent_reach")
        self._connect_timeout = connect_timeout
        self._ping_interval = ping_interval
        self._idle_timeout = idle_timeout
        self._backoff = reconnect
        self._drain_timeout = drain_timeout
        self._send_timeout = send_timeout
        self._request_timeout = request_timeout
        self._token_refresh_ratio = token_refresh_ratio
        self._handle_signals = handle_signals
        self._random = random
        metadata = self._descriptor.get("metadata") or {}
        max_concurrency = int(metadata.get("max_concurrency", 10))
        self._beating = False
        #: A heartbeat as soon as the load crosses the busy line, not half a lease later.
        self._early_beat = EarlyBeat(max_concurrency=max_concurrency, running=lambda: self._runner.running, beat=self._beat_early)
        self._runner = DeliveryRunner(
            max_concurrency=max_concurrency,
            on_load_changed=self._early_beat.changed,
            dedupe=dedupe,
            report_progress=report_progress,
            log=self._log,
            agent_id=lambda: self.agent_id,
            send=self._send_frame,
            api=self,
        )
        self._requests = PendingRequests()
        self._preflight = preflight
        #: What this agent can reach, from the dispatcher's ``routes`` frames (pre-flight, R-G6).
        self._routes = RoutesView()
        self._sends: dict[str, _PendingSend] = {}
        self._listeners: dict[str, list[Listener]] = {}
        self._outbox: deque[AgentFrame] = deque()
        # acks and rejects written lately: (frame, socket, monotonic time)
        self._unsure: deque[tuple[AgentFrame, AgentSocket, float]] = deque()
        self._state: State = "new"
        self._registration: Registration | None = None
        self._capabilities: list[CapabilitySpec] = []
        self._socket: AgentSocket | None = None
        #: The highest seq received (acked, running or queued here): sent as hello.last_seq.
        self._last_seq = 0
        self._needs_register = False
        self._replaced = False
        self._heartbeat_every = 0.0
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._refresh_task: asyncio.Task[None] | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._renewal_lock: asyncio.Lock | None = None
        self._token_refreshed: asyncio.Future[str] | None = None
        self._stopping: asyncio.Future[None] | None = None
        self._stopped: asyncio.Event | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._http: JsonHttp | None = None
        self._registry: RegistryClient | None = None
        self._signals: list[signal.Signals] = []

    # ── declaring what the agent does ──────────────────────────────────────────────────────

    @overload
    def handle(self, capability: str) -> Callable[[H], H]: ...
    @overload
    def handle(self, capability: str, fn: H) -> H: ...

    def handle(self, capability: str, fn: Any = None) -> Any:
        """Serves a capability (exactly one agent gets each message); a decorator or a call. Before start()."""

        def register(f: H) -> H:
            self._before_start("handle")
            self._runner.handle(capability, f)
            return f

        return register(fn) if fn is not None else register

    @overload
    def subscribe(self, topic: str) -> Callable[[H], H]: ...
    @overload
    def subscribe(self, topic: str, fn: H) -> H: ...

    def subscribe(self, topic: str, fn: Any = None) -> Any:
        """Subscribes to a topic (every subscriber gets a copy); a decorator or a call. Before start()."""

        def register(f: H) -> H:
            self._before_start("subscribe")
            self._runner.subscribe(topic, f)
            return f

        return register(fn) if fn is not None else register

    def on_direct(self, fn: H) -> H:
        """Handles messages addressed to this agent by id that are no reply to its own requests."""
        self._runner.set_direct(fn)
        return fn

    def on(self, event: str, listener: Listener) -> Callable[[], None]:
        """Listens to ``registered``, ``connected``, ``disconnected``, ``token_refreshed``,
        ``receipt`` (a failure receipt for a message this node sent), ``replaced`` and ``stopped``.
        Returns a function that removes the listener."""
        self._listeners.setdefault(event, []).append(listener)
        return lambda: self._listeners.get(event, []).remove(listener)

    # ── what the node is ───────────────────────────────────────────────────────────────────

    @property
    def agent_id(self) -> str | None:
        """The agent id the registry gave (None before start())."""
        return self._registration.agent_id if self._registration else None

    @property
    def token(self) -> str | None:
        """The current agent token (for the HTTP API or Kafka ingress)."""
        return self._registration.token if self._registration else None

    @property
    def connected(self) -> bool:
        return self._socket is not None and self._socket.is_open

    @property
    def connection_id(self) -> str | None:
        return self._socket.connection_id if self._socket is not None else None

    @property
    def status(self) -> State:
        return self._state

    @property
    def replaced(self) -> bool:
        """True once another connection of the same agent took over (close 4001)."""
        return self._replaced

    def load(self) -> LoadReport:
        """What the next heartbeat reports."""
        return self._runner.load()

    def client(self) -> ReachClient:
        """The HTTP message API as this agent (its token): submit with wait, status, timeline, traces."""
        return ReachClient(self._ingress_url, registry_url=self._registry_url, token=self.token, ssl_context=self._ssl_context)

    # ── lifecycle ──────────────────────────────────────────────────────────────────────────

    async def start(self) -> None:
        """Registers, starts heartbeating and connects; returns once the dispatcher welcomed the agent."""
        if self._state != "new":
            raise RuntimeError(f"AgentNode.start() called twice (state {self._state})")
        self._state = "starting"
        self._stopped = asyncio.Event()
        self._renewal_lock = asyncio.Lock()
        if self._join_local:
            local = await asyncio.to_thread(shared_local_reach)
            self._registry_url, self._url, self._ingress_url = local.registry_url, _ws_url(local.dispatcher_url), local.ingress_url
        self._http = JsonHttp(ssl_context=self._ssl_context)
        self._registry = RegistryClient(self._registry_url, self._http)
        self._capabilities = self._declared_capabilities()
        try:
            await self._register()
            self._start_heartbeat()
            await self._connect()
        except BaseException as err:
            self._log.error("agent failed to start: %s", err)
            # stop() may have been called meanwhile: one shutdown, whoever started it.
            if self._stopping is None:
                self._stopping = asyncio.ensure_future(self._shutdown(0, deregister=True))
            await asyncio.shield(self._stopping)
            raise
        if self._state == "starting":
            self._state = "running"
        if self._handle_signals:
            self._install_signal_handlers()

    async def stop(self, drain_timeout: float | None = None) -> None:
        """Stops taking work (queued and new deliveries go back to the dispatcher, retryable),
        waits up to ``drain_timeout`` for running handlers, sends their answers, deregisters
        and closes."""
        if self._state in ("new", "stopped") and self._stopping is None:
            self._state = "stopped"
            return
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._shutdown(self._drain_timeout if drain_timeout is None else drain_timeout, deregister=True))
        await asyncio.shield(self._stopping)

    async def run(self) -> None:
        """start() (unless started), then serve until stop(), SIGTERM or SIGINT.

        Raises AgentReplacedError when another connection of the agent took over (4001)."""
        if self._state == "new":
            await self.start()
        assert self._stopped is not None
        try:
            await self._stopped.wait()
        except asyncio.CancelledError:
            await self.stop()
            raise
        if self._replaced:
            raise AgentReplacedError(self.agent_id or "")

    async def __aenter__(self) -> "AgentNode":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ── sending ────────────────────────────────────────────────────────────────────────────

    async def send(self, fields: Mapping[str, Any] | None = None, /, *, preflight: bool = False, **more: Any) -> str:
        """Sends one message over the WebSocket; returns its message id once the dispatcher
        accepted it, raises the ``error`` frame's code. Exactly one of ``capability``,
        ``topic``, ``target_agent_id``. While disconnected it waits for the next connection,
        up to ``send_timeout`` (1001).

        ``preflight=True`` checks a capability or topic against the local routes view first
        (R-G6): 2001, 2003 or 3001 without sending (a message with ``expire_at``, which the
        router parks instead, only for 2003)."""
        if self._state in ("stopping", "stopped"):
            raise ReachError("CONNECTION_CLOSED", "the agent node is stopped")
        given = {**(fields or {}), **more}
        targets = [t for t in ("capability", "topic", "target_agent_id") if given.get(t)]
        if len(targets) != 1:
            raise NonRetryableError("INVALID_ENVELOPE", f"exactly one of capability, topic, target_agent_id must be set (got {len(targets)})")
        if preflight and self._preflight:
            # A message with expire_at may wait for an agent: the router parks it rather than refuse it.
            may_wait = given.get("expire_at") is not None
            refused = (
                self._routes.refusal("capability", str(given["capability"]), may_wait=may_wait)
                if given.get("capability")
                else self._routes.refusal("topic", str(given["topic"]), may_wait=may_wait)
                if given.get("topic")
                else None
            )
            if refused is not None:
                raise refused
        client_ref = new_id("ref")
        # The id is chosen here so a request can wait for its answer before the send completes.
        envelope = envelope_fields({**given, "message_id": given.get("message_id") or new_message_id()})
        if self.agent_id:
            envelope["producer"] = self.agent_id
        pending = _PendingSend(frames.send(client_ref, envelope), asyncio.get_running_loop().create_future())
        self._sends[client_ref] = pending
        self._write_send(pending)
        try:
            return await asyncio.wait_for(pending.future, self._send_timeout)
        except TimeoutError:
            raise ReachError("CONNECT_TIMEOUT", f"the dispatcher did not accept message {envelope['message_id']} within {self._send_timeout} s") from None
        finally:
            self._sends.pop(client_ref, None)

    async def publish(
        self,
        topic: str,
        payload: Any,
        *,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = False,
    ) -> str:
        """Publishes an event to a topic: every subscriber gets a copy. ``preflight=True`` checks the
        topic against the local routes view first (2001, 2003, 3001 without sending); off by
        default, as a publish nobody hears is still REJECTED 2001 with a receipt."""
        return await self.send(
            preflight=preflight,
            topic=topic,
            message_type=EVENT,
            payload=payload,
            session_id=session_id,
            headers=dict(headers) if headers else None,
            priority=priority,
            idempotency_key=idempotency_key,
            trace_id=trace_id,
            traceparent=traceparent,
            tags=tags,
        )

    async def request(
        self,
        capability: str,
        payload: Any,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = True,
    ) -> Any:
        """Asks the agent serving ``capability`` and returns its result (see request_reply)."""
        reply = await self.request_reply(
            capability,
            payload,
            timeout=timeout,
            context=context,
            session_id=session_id,
            headers=headers,
            priority=priority,
            idempotency_key=idempotency_key,
            trace_id=trace_id,
            traceparent=traceparent,
            tags=tags,
            preflight=preflight,
        )
        return reply.payload

    async def request_reply(
        self,
        capability: str,
        payload: Any,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        session_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: str | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
        traceparent: str | None = None,
        tags: list[str] | None = None,
        preflight: bool = True,
    ) -> Reply:
        """A request with the reply's context fragments and the whole result message.

        The request carries reply_to = this agent; the result comes back as a ``task_result``
        correlated by the request's message id. Raises 2001 at once when the registry knows no
        live agent of the capability (``preflight``), 3002 on timeout (seconds; also sent as the
        envelope's timeout_ms), or the code of a failure receipt."""
        agent_id = self.agent_id
        if not agent_id:
            raise ReachError("CONNECTION_CLOSED", "request() needs a started node (reply_to is this agent)")
        if preflight and self._preflight:
            # The local view when the dispatcher sent one (no round trip), else the registry.
            refused = self._routes.refusal("capability", capability)
            if refused is not None:
                raise refused
            if self._routes.verdict("capability", capability) is None and not await self._registry_offers(capability):
                raise NonRetryableError("NO_ROUTE", f"no live agent offers {capability}", details={"capability": capability})
        wait = self._request_timeout if timeout is None else timeout
        message_id = new_message_id()
        fragments = dict(context or {})
        reply = self._requests.wait(message_id, capability, fragments, wait)
        try:
            await self.send(
                message_id=message_id,
                message_type=TASK_REQUEST,
                capability=capability,
                payload=payload,
                reply_to=agent_id,
                timeout_ms=int(wait * 1000),
                headers={**(headers or {}), **context_to_headers(fragments)},
                session_id=session_id,
                priority=priority,
                idempotency_key=idempotency_key,
                trace_id=trace_id,
                traceparent=traceparent,
                tags=tags,
            )
        except BaseException:
            self._requests.forget(message_id)
            raise
        return await reply

    async def can_reach(self, name: str, kind: RouteKind = "capability") -> bool:
        """Would a message to ``name`` be routed now? From the local routes view (ONLINE,
        connected, domain allowed, circuit not open) once there is one, else from the registry."""
        verdict = self._routes.verdict(kind, name)
        if verdict is not None:
            return verdict == 0
        return await self._registry_offers(name) if kind == "capability" else True

    def route_verdict(self, name: str, kind: RouteKind = "capability") -> int | None:
        """The local routes view's verdict: 0 routable, else the refusal code; None until the first view."""
        return self._routes.verdict(kind, name)

    @property
    def routes_view(self) -> str:
        """The local routes view: ``off`` (preflight=False), ``waiting`` (no complete view on the
        current connection yet: nothing is refused from it) or ``ready``."""
        if not self._preflight:
            return "off"
        return "ready" if self._routes.ready else "waiting"

    async def _registry_offers(self, capability: str) -> bool:
        assert self._registry is not None, "can_reach() needs a started node"
        agents = await self._registry.list(capability=capability, token=self.token or self._token)
        return any((a.get("status") or "ONLINE") == "ONLINE" for a in agents)

    # ── registration, heartbeats, token renewal ────────────────────────────────────────────

    def _before_start(self, what: str) -> None:
        if self._state != "new":
            raise RuntimeError(f"{what}() must be called before start(): capabilities are registered at start")

    def _declared_capabilities(self) -> list[CapabilitySpec]:
        by_name: dict[str, CapabilitySpec] = {}
        for c in self._descriptor.get("capabilities") or []:
            spec = CapabilitySpec(name=c, mode="handle") if isinstance(c, str) else cast(CapabilitySpec, {"mode": "handle", **c})
            by_name[spec["name"]] = spec
        handled, subscribed = set(self._runner.capability_names), set(self._runner.topic_names)
        for name in self._runner.capability_names:
            by_name.setdefault(name, {"name": name, "mode": "handle"})
        for name in self._runner.topic_names:
            by_name.setdefault(name, {"name": name, "mode": "subscribe"})
        for spec in by_name.values():
            served = spec["name"] in (subscribed if spec.get("mode") == "subscribe" else handled)
            if not served:
                self._log.warning("capability %s declared without a handler: its deliveries will be rejected", spec["name"])
        return list(by_name.values())

    async def _register(self) -> Registration:
        assert self._registry is not None
        previous = self._registration
        descriptor: dict[str, Any] = {**self._descriptor, "capabilities": self._capabilities}
        # Re-registering under the same id replaces the record atomically and keeps the delivery stream.
        agent_id = previous.agent_id if previous else self._descriptor.get("agent_id")
        if agent_id:
            descriptor["agent_id"] = agent_id
        reg = await self._register_with_best_token(descriptor, previous)
        if previous and reg.agent_id != previous.agent_id:
            self._log.warning("the registry gave a new agent id %s (was %s); the delivery stream starts over", reg.agent_id, previous.agent_id)
            self._last_seq = 0
        self._registration = reg
        self._schedule_token_refresh()
        self._log.info("%s agent %s (lease %s, heartbeat every %.1f s)", "re-registered" if previous else "registered", reg.agent_id, reg.lease_id, reg.heartbeat_interval_ms / 1000)
        if not previous:
            for w in reg.warnings:
                self._log.warning("registry: %s", w.get("message"))
        self._fire("registered", {"agent_id": reg.agent_id, "lease_id": reg.lease_id})
        return reg

    async def _register_with_best_token(self, descriptor: dict[str, Any], previous: Registration | None) -> Registration:
        """Re-registering an existing id needs the agent's own token (or the admin token): the
        enrollment token may only create ids, so nobody hijacks a live agent. The current token
        goes first while it is valid; the configured token is the fallback (e.g. after expiry)."""
        assert self._registry is not None
        own = None
        if previous is not None:
            life = token_lifetime(previous.token)
            if life is None or life.expires_at > time.time() + 1:
                own = previous.token
        tokens = list(dict.fromkeys(t for t in (own, self._token) if t))
        if not tokens:
            return await self._registry.register(descriptor)
        for i, token in enumerate(tokens):
            try:
                return await self._registry.register(descriptor, token)
            except ReachError as err:
                if i == len(tokens) - 1 or err.name != "AUTH_FAILED":
                    raise
                self._log.warning("registration refused the agent token (%s); trying the configured token", err.message)
        raise AssertionError("unreachable")

    def _start_heartbeat(self) -> None:
        """Heartbeats come from their own task, independent of deliveries, so running handlers never delay them."""
        assert self._registration is not None
        every = self._registration.heartbeat_interval_ms / 1000
        if self._heartbeat_task is not None and every == self._heartbeat_every:
            return
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        self._heartbeat_every = every
        self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(every))

    async def _heartbeat_loop(self, every: float) -> None:
        next_at = time.monotonic()
        while True:
            next_at += every
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            await self._beat(timeout=max(1.0, min(10.0, every)))

    def _beat_early(self) -> bool:
        """EarlyBeat's heartbeat: False while one is on its way (it tries again after its gap)."""
        if self._registration is None or self._state != "running":
            return True  # nothing to tell
        if self._beating:
            return False
        self._background_task(self._beat(timeout=max(1.0, min(10.0, self._heartbeat_every or 10.0))))
        return True

    async def _beat(self, timeout: float) -> None:
        reg = self._registration
        if reg is None or self._registry is None:
            return
        load = self.load()
        self._early_beat.sent(load["current_load"])
        self._beating = True
        try:
            await asyncio.wait_for(self._registry.heartbeat(reg.agent_id, reg.token, load), timeout)
        except TimeoutError:
            self._log.warning("heartbeat of %s timed out", reg.agent_id)
        except ReachError as err:
            if err.name == "AUTH_FAILED" or err.details.get("http_status") in (404, 410):
                # The lease is gone (expired while we were away) or the token was refused: register again.
                self._log.warning("heartbeat refused (%s); re-registering", err)
                self._background_task(self._renew("the heartbeat was refused"))
            else:
                self._log.warning("heartbeat of %s failed: %s", reg.agent_id, err)
        finally:
            self._beating = False

    def _schedule_token_refresh(self, delay: float | None = None) -> None:
        assert self._registration is not None
        wait = refresh_delay(self._registration.token, time.time(), self._token_refresh_ratio) if delay is None else delay
        old = self._refresh_task
        if old is not None and old is not asyncio.current_task():
            old.cancel()
        self._refresh_task = asyncio.create_task(self._refresh_after(wait))

    async def _refresh_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        await self._renew("the token nears expiry")

    async def _renew(self, why: str) -> None:
        """Renews the token without dropping the connection: re-register (which issues a new
        token), then hand the new token to the open connection (``refresh_token`` →
        ``token_refreshed``). Without an open connection the reconnect loop does both. A
        failed re-registration is tried again shortly while the old token still lives; once it
        has expired the dispatcher closes the connection (4003) and the reconnect loop
        re-registers."""
        assert self._renewal_lock is not None
        if self._state != "running" or self._renewal_lock.locked():
            return
        async with self._renewal_lock:
            if self._reconnect_task is not None or not self.connected:
                self._reconnect(re_register=True, immediate=True)
                return
            self._log.info("%s: re-registering and renewing the token on the open connection", why)
            try:
                await self._register()  # schedules the next renewal
                self._start_heartbeat()
            except Exception as err:
                self._log.warning("token renewal failed (%s); trying again in %.0f s", err, TOKEN_REFRESH_RETRY_S)
                self._schedule_token_refresh(TOKEN_REFRESH_RETRY_S)
                return
            socket = self._socket
            assert self._registration is not None
            confirmed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            self._token_refreshed = confirmed
            if socket is None or not socket.send(frames.refresh_token(self._registration.token)):
                self._reconnect(re_register=False, immediate=True)
                return
            try:
                expires_at = await asyncio.wait_for(asyncio.shield(confirmed), 10)
            except TimeoutError:
                self._log.warning("the dispatcher did not confirm the renewed token; at expiry it closes the connection (4003) and the node reconnects")
                return
            except ReachError as err:
                self._log.warning("the dispatcher refused the renewed token (%s); the node reconnects", err)
                return
            finally:
                self._token_refreshed = None
            self._log.info("token renewed on connection %s (expires %s)", socket.connection_id, expires_at)
            self._fire("token_refreshed", {"connection_id": socket.connection_id, "expires_at": expires_at})

    # ── the connection ─────────────────────────────────────────────────────────────────────

    async def _connect(self) -> None:
        reg = self._registration
        assert reg is not None
        socket = await AgentSocket.open(
            self._url,
            frames.hello(reg.agent_id, reg.token, self._last_seq),
            connect_timeout=self._connect_timeout,
            ping_interval=self._ping_interval,
            idle_timeout=self._idle_timeout,
            log=self._log,
            ssl_context=self._ssl_context,
        )
        if self._state in ("stopping", "stopped"):
            await socket.close(1000, "agent stopping")
            raise ReachError("CONNECTION_CLOSED", "the node stopped while connecting")
        self._socket = socket
        resume_from = socket.welcome.resume_from
        if resume_from is not None and resume_from < self._last_seq:
            # The dispatcher's counter is behind ours (its state was lost): it replays everything
            # from resume_from, and new deliveries count on from there.
            self._log.warning("the dispatcher resumes from seq %d, before our last_seq %d", resume_from, self._last_seq)
            self._last_seq = resume_from
        socket.start(self._on_frame, self._on_socket_close)
        # What an earlier connection's dispatcher said is forgotten: no verdict until this one's full view.
        self._routes.reset()
        if self._preflight:
            # The pre-flight view over this socket (a dispatcher without it answers with an error).
            socket.send({"type": "subscribe_routes"})
        self._log.info("connected to the dispatcher as %s (connection %s, last_seq %d, resume_from %s)", reg.agent_id, socket.connection_id, self._last_seq, socket.welcome.resume_from)
        self._flush_outbox()
        for pending in self._sends.values():
            if pending.socket is None:
                self._write_send(pending)
        self._fire("connected", {"agent_id": reg.agent_id, "connection_id": socket.connection_id, "resume_from": socket.welcome.resume_from})

    def _on_socket_close(self, socket: AgentSocket, code: int, reason: str) -> None:
        # What never left goes out on the next connection: answers to the outbox, sends again.
        for frame in socket.unsent():
            if frame.get("type") == "send":
                unsent = self._sends.get(str(frame.get("client_ref")))
                if unsent is not None:
                    unsent.socket = None
            elif frame.get("type") in ("ack", "reject", "result"):
                self._keep(frame)
        # Sends written to this socket and not accepted may or may not have arrived: the caller decides.
        for pending in list(self._sends.values()):
            if pending.socket is socket and not pending.future.done():
                pending.future.set_exception(ReachError("CONNECTION_CLOSED", f"connection closed ({code}) before the dispatcher accepted the message"))
        if self._token_refreshed is not None and not self._token_refreshed.done():
            self._token_refreshed.set_exception(ReachError("CONNECTION_CLOSED", f"connection closed ({code}) before the token was confirmed"))
        if socket is not self._socket:
            return  # a connection this node replaced itself
        self._socket = None
        # The view came on this connection and is no longer kept current: it decides nothing until the next one's.
        self._routes.reset()
        self._resend_unsure(socket)
        self._fire("disconnected", {"code": code, "reason": reason})
        if self._state in ("stopping", "stopped"):
            return
        if code == CLOSE_DUPLICATE:
            self._on_replaced()
            return
        self._log.warning("connection to the dispatcher lost (%d %s); reconnecting", code, reason)
        self._reconnect(re_register=code == CLOSE_AUTH_FAILED, immediate=False)

    def _on_replaced(self) -> None:
        """4001: a newer connection of this agent (another process with the same agent id) holds
        it now. Reconnecting would take the agent back from it, and it would do the same: the
        two would take turns. So this node stops, without deregistering (that would end the
        other connection's registration too)."""
        self._replaced = True
        agent_id = self.agent_id or ""
        self._log.error("agent %s was taken over by a newer connection (4001); stopping this node without deregistering", agent_id)
        self._fire("replaced", {"agent_id": agent_id})
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._shutdown(self._drain_timeout, deregister=False))

    def _reconnect(self, *, re_register: bool, immediate: bool) -> None:
        """The one reconnect loop: backoff 1 s doubling to 32 s plus jitter, re-registering first
        when the token was refused or is due. Concurrent triggers join the running loop."""
        if re_register:
            self._needs_register = True
        if self._reconnect_task is not None or self._state not in ("running", "starting"):
            return
        self._reconnect_task = asyncio.create_task(self._reconnect_loop(immediate))

    async def _reconnect_loop(self, immediate: bool) -> None:
        try:
            attempt = 0
            wait = not immediate
            while self._state in ("running", "starting"):
                if wait:
                    delay = reconnect_delay(attempt, self._random, self._backoff)
                    attempt += 1
                    self._log.debug("reconnecting in %.2f s (attempt %d)", delay, attempt)
                    await asyncio.sleep(delay)
                    if self._state not in ("running", "starting"):
                        return
                wait = True
                try:
                    old = self._socket
                    if old is not None:
                        # Closed before the new one opens: the dispatcher would close it anyway
                        # (4001), and its un-acked deliveries are replayed on the new connection.
                        self._socket = None
                        await old.close(1000, "reconnecting")
                    if self._needs_register:
                        self._needs_register = False
                        try:
                            await self._register()
                        except BaseException:
                            self._needs_register = True
                            raise
                        self._start_heartbeat()
                    await self._connect()
                    return
                except ReachError as err:
                    if err.name == "AUTH_FAILED":
                        self._needs_register = True
                    self._log.warning("reconnect failed (attempt %d): %s", attempt, err)
                except Exception as err:
                    # Anything else is unexpected, but the loop must live on or the agent never comes back.
                    self._log.warning("reconnect failed (attempt %d): %r", attempt, err, exc_info=True)
        finally:
            self._reconnect_task = None

    def _send_frame(self, frame: AgentFrame) -> None:
        socket = self._socket
        if socket is not None and socket.send(frame):
            if frame.get("type") in ("result", "ack", "reject"):
                now = time.monotonic()
                while self._unsure and (now - self._unsure[0][2] > UNSURE_ANSWER_S or len(self._unsure) >= MAX_OUTBOX):
                    self._unsure.popleft()
                self._unsure.append((frame, socket, now))
            return
        self._keep(frame)

    def _resend_unsure(self, socket: AgentSocket) -> None:
        """The answers written to a socket that just closed, lately enough to be lost with it,
        go out again on the next connection."""
        since = time.monotonic() - UNSURE_ANSWER_S
        again = [f for (f, s, at) in self._unsure if s is socket and at >= since]
        self._unsure = deque(u for u in self._unsure if u[1] is not socket)
        if again:
            self._log.info("connection lost right after %d answers: they go out again on the next connection", len(again))
            self._outbox.extendleft(reversed(again))

    def _keep(self, frame: AgentFrame) -> None:
        """Not connected: answers wait for the next connection instead of being lost."""
        if frame.get("type") == "progress":
            return  # stale by then; without it the deadline runs out and the dispatcher retries
        self._outbox.append(frame)
        if len(self._outbox) > MAX_OUTBOX:
            self._outbox.popleft()
            self._log.warning("outbox full: dropping the oldest frame (its delivery will be retried by the dispatcher)")

    def _flush_outbox(self) -> None:
        kept = list(self._outbox)
        self._outbox.clear()
        for frame in kept:
            self._send_frame(frame)

    def _write_send(self, pending: _PendingSend) -> None:
        socket = self._socket
        if socket is not None and socket.send(pending.frame):
            pending.socket = socket

    # ── frames from the dispatcher ─────────────────────────────────────────────────────────

    def _on_frame(self, frame: ServerFrame) -> None:
        if isinstance(frame, Deliver):
            self._on_deliver(frame)
        elif isinstance(frame, Accepted):
            pending = self._sends.get(frame.client_ref)
            if pending is not None and not pending.future.done():
                pending.future.set_result(frame.message_id)
        elif isinstance(frame, ErrorFrame):
            pending = self._sends.get(frame.client_ref) if frame.client_ref else None
            if pending is not None and not pending.future.done():
                pending.future.set_exception(error_for_code(frame.code, frame.message or frame.name, {"name": frame.name}))
            else:
                self._log.warning("error from the dispatcher: %d %s %s", frame.code, frame.name, frame.message)
        elif isinstance(frame, Routes):
            self._routes.apply(frame)
        elif isinstance(frame, TokenRefreshed):
            if self._token_refreshed is not None and not self._token_refreshed.done():
                self._token_refreshed.set_result(frame.expires_at)

    def _on_deliver(self, d: Deliver) -> None:
        m = d.message
        if d.seq > self._last_seq:
            self._last_seq = d.seq
        log = logging.LoggerAdapter(self._log, {"agent_id": self.agent_id, "message_id": m.message_id, "trace_id": m.trace_id, "seq": d.seq})
        # Answers to this node's own sends are settled here and never reach a handler.
        if m.message_type == RECEIPT:
            receipt = Receipt.of(m)
            log.info("failure receipt about %s: %d %s", receipt.message_id, receipt.code, receipt.status)
            self._requests.settle_receipt(receipt)
            self._fire("receipt", receipt)
            self._runner.ack(d)
            return
        if m.message_type == TASK_RESULT and m.correlation_id and self._requests.has(m.correlation_id):
            self._requests.settle_result(m)
            self._runner.ack(d)
            return
        self._runner.accept(d, log)

    def _fire(self, event: str, arg: Any) -> None:
        for listener in list(self._listeners.get(event, [])):
            try:
                listener(arg)
            except Exception:
                self._log.exception("a %s listener failed", event)

    def _background_task(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ── shutdown ───────────────────────────────────────────────────────────────────────────

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                self._signals.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                self._log.debug("cannot handle %s here (not the main thread?)", sig.name)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._log.info("%s received: stopping agent %s", sig.name, self.agent_id)
        self._background_task(self.stop())

    def _remove_signal_handlers(self) -> None:
        # A second signal then does what it does by default: the process ends at once.
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)
        self._signals.clear()

    async def _shutdown(self, drain_timeout: float, *, deregister: bool) -> None:
        was_started = self._state != "new"
        self._state = "stopping"
        self._early_beat.stop()
        self._remove_signal_handlers()
        if self._replaced:
            await self._cancel_timers()  # the agent is someone else's now: no heartbeat for it
        self._runner.stop_accepting()
        try:
            await asyncio.wait_for(self._runner.idle(), drain_timeout)
        except TimeoutError:
            self._log.warning("%d handler(s) still running after the %.1f s drain; abandoning them", self._runner.running, drain_timeout)
            self._runner.abandon()
            try:
                # Cancelled handlers answer with a retryable reject; threads cannot be waited for.
                await asyncio.wait_for(self._runner.idle(), 1)
            except TimeoutError:
                pass
        # The answers of finished work leave before the agent deregisters.
        if self._socket is not None:
            await self._socket.flushed()
        await self._cancel_timers()
        reg = self._registration
        if deregister and was_started and reg is not None and self._registry is not None:
            try:
                await self._registry.deregister(reg.agent_id, reg.token)
                self._log.info("deregistered agent %s", reg.agent_id)
            except ReachError as err:
                self._log.warning("deregistration of %s failed (%s); the lease will expire", reg.agent_id, err)
        self._state = "stopped"
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close(1000, "agent stopped")
        closed = ReachError("CONNECTION_CLOSED", "the agent node stopped")
        for pending in self._sends.values():
            if not pending.future.done():
                pending.future.set_exception(closed)
        self._requests.fail_all(closed)
        self._runner.close()
        if self._http is not None:
            await self._http.aclose()
        self._fire("stopped", {})
        if self._stopped is not None:
            self._stopped.set()

    async def _cancel_timers(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in (self._heartbeat_task, self._refresh_task, self._reconnect_task) if t is not None and t is not current]
        self._heartbeat_task = self._refresh_task = self._reconnect_task = None
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)



