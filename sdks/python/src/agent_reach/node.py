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

The node is a facade: the public API, the lifecycle (start, stop, signals) and the events. Its
parts (lease.py, connection.py, sender.py, delivery_runner.py) talk through the callbacks wired
in ``__init__``::

                        reconnect, refresh_token
      ┌────────────┐ ──────────────────────────────▶ ┌──────────────────────┐    frames
      │ AgentLease │                                 │ DispatcherConnection │ ◀──────────▶ dispatcher
      └────────────┘ ◀────────────────────────────── └──────────────────────┘
        │      ▲      register() after a refusal        │ deliver    ▲ answers    ▲ send frames
        ▼      │ load()                                 ▼            │            │
      registry │                                node._on_deliver node._send_frame │
      ┌────────┴───────┐   accept (the others)      │     │          ▲       ┌────┴────────┐
      │ DeliveryRunner │ ◀──────────────────────────┘     │          │       │ AgentSender │ ◀── send(), request()
      │                │ ── ack, reject, result ──────────┼──────────┘       │             │
      └────────────────┘                                  └── settle ──────▶ │             │ ──▶ PendingRequests
                                                        (receipts, replies)  └─────────────┘

The connection keeps the RoutesView current (routes frames); the sender reads it.
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import signal
import ssl
from typing import Any, Callable, Literal, Mapping, TypeVar, overload

from .agent_socket import AgentSocket
from .backoff import RECONNECT_BACKOFF, Backoff
from .connection import DispatcherConnection, _ws_url
from .dedupe import DedupeOptions
from .delivery_runner import DeliveryRunner
from .direct import shared_local_reach
from .env import connection_from_env
from .errors import AgentReplacedError, ReachError
from .frames import AgentFrame, Deliver
from .http import JsonHttp
from .lease import AgentLease
from .message import AgentDescriptor, LoadReport, Registration
from .mode import mode_of
from .pending_requests import PendingRequests, Reply
from .reach_client import ReachClient
from .registry_client import RegistryClient
from .routes_view import RouteKind, RoutesView
from .sender import EVENT, AgentSender

State = Literal["new", "starting", "running", "stopping", "stopped"]
H = TypeVar("H", bound=Callable[..., Any])
Listener = Callable[[Any], None]


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
        self._ingress_url = ingress_url or env.ingress_url
        self._ssl_context = ssl_context or env.ssl_context
        self._log = logger or logging.getLogger("agent_reach")
        self._drain_timeout = drain_timeout
        self._handle_signals = handle_signals
        described = dict(descriptor)
        max_concurrency = int((described.get("metadata") or {}).get("max_concurrency", 10))
        self._state: State = "new"
        self._listeners: dict[str, list[Listener]] = {}
        self._requests = PendingRequests()
        self._preflight = preflight
        #: What this agent can reach, from the dispatcher's ``routes`` frames (pre-flight, R-G6).
        self._routes = RoutesView()
        self._lease = AgentLease(
            described,
            token=token or env.token,
            token_refresh_ratio=token_refresh_ratio,
            max_concurrency=max_concurrency,
            log=self._log,
            state=lambda: self._state,
            load=lambda: self.load(),  # node.load(), looked up each time: a heartbeat reports what it says
            running=lambda: self._runner.running,
            on_registered=self._on_registered,
            fire=self._fire,
            connection=lambda: self._connection,
        )
        self._connection = DispatcherConnection(
            _ws_url(dispatcher_url or env.dispatcher_url),
            lease=self._lease,
            log=self._log,
            state=lambda: self._state,
            ssl_context=self._ssl_context,
            connect_timeout=connect_timeout,
            ping_interval=ping_interval,
            idle_timeout=idle_timeout,
            backoff=reconnect,
            random=random,
            routes=self._routes,
            preflight=preflight,
            on_deliver=lambda d: self._on_deliver(d),
            on_replaced=self._on_replaced,
            fire=self._fire,
        )
        self._sender = AgentSender(
            connection=self._connection,
            lease=self._lease,
            requests=self._requests,
            routes=self._routes,
            preflight=preflight,
            send_timeout=send_timeout,
            request_timeout=request_timeout,
            token=token or env.token,
            state=lambda: self._state,
            fire=self._fire,
        )
        self._runner = DeliveryRunner(
            max_concurrency=max_concurrency,
            on_load_changed=self._lease.load_changed,
            dedupe=dedupe,
            report_progress=report_progress,
            log=self._log,
            agent_id=lambda: self.agent_id,
            send=self._send_frame,
            api=self,
        )
        self._replaced = False
        self._stopping: asyncio.Future[None] | None = None
        self._stopped: asyncio.Event | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._http: JsonHttp | None = None
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
        return self._lease.registration.agent_id if self._lease.registration else None

    @property
    def token(self) -> str | None:
        """The current agent token (for the HTTP API or Kafka ingress)."""
        return self._lease.registration.token if self._lease.registration else None

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
        if self._join_local:
            local = await asyncio.to_thread(shared_local_reach)
            self._registry_url, self._connection.url, self._ingress_url = local.registry_url, _ws_url(local.dispatcher_url), local.ingress_url
        self._http = JsonHttp(ssl_context=self._ssl_context)
        self._lease.attach(RegistryClient(self._registry_url, self._http))
        self._lease.declare(self._runner.capability_names, self._runner.topic_names)
        try:
            await self._lease.register()
            await self._connection.connect()
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
        return await self._sender.send({**(fields or {}), **more}, preflight)

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
        return await self._sender.request_reply(
            capability,
            payload,
            timeout=timeout,
            context=context,
            headers=headers,
            preflight=preflight,
            session_id=session_id,
            priority=priority,
            idempotency_key=idempotency_key,
            trace_id=trace_id,
            traceparent=traceparent,
            tags=tags,
        )

    async def can_reach(self, name: str, kind: RouteKind = "capability") -> bool:
        """Would a message to ``name`` be routed now? From the local routes view (ONLINE,
        connected, domain allowed, circuit not open) once there is one, else from the registry."""
        return await self._sender.can_reach(name, kind)

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

    # ── between the parts ──────────────────────────────────────────────────────────────────

    @property
    def _registry(self) -> RegistryClient | None:
        """The registry client (from start() on), the lease's."""
        return self._lease.registry

    @property
    def _socket(self) -> AgentSocket | None:
        """The open connection, the connection's."""
        return self._connection.socket

    def _send_frame(self, frame: AgentFrame) -> None:
        """The runner's answers (ack, reject, result, progress) go out through here."""
        self._connection.send_frame(frame)

    def _on_registered(self, reg: Registration, previous: Registration | None) -> None:
        if previous and reg.agent_id != previous.agent_id:
            self._connection.restart_stream()
        self._fire("registered", {"agent_id": reg.agent_id, "lease_id": reg.lease_id})

    def _on_deliver(self, d: Deliver) -> None:
        m = d.message
        log = logging.LoggerAdapter(self._log, {"agent_id": self.agent_id, "message_id": m.message_id, "trace_id": m.trace_id, "seq": d.seq})
        if self._sender.settle(d, log):
            self._runner.ack(d)
        else:
            self._runner.accept(d, log)

    def _before_start(self, what: str) -> None:
        if self._state != "new":
            raise RuntimeError(f"{what}() must be called before start(): capabilities are registered at start")

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
        self._lease.stop_early_beats()
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
        await self._connection.flushed()
        await self._cancel_timers()
        if deregister and was_started:
            await self._lease.deregister()
        self._state = "stopped"
        closed = ReachError("CONNECTION_CLOSED", "the agent node stopped")
        await self._connection.close(closed)
        self._requests.fail_all(closed)
        self._runner.close()
        if self._http is not None:
            await self._http.aclose()
        self._fire("stopped", {})
        if self._stopped is not None:
            self._stopped.set()

    async def _cancel_timers(self) -> None:
        """The heartbeats, the token renewal and a reconnect in progress end."""
        await asyncio.gather(self._lease.cancel_timers(), self._connection.cancel_reconnect())
