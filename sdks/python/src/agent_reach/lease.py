"""The agent's lease with the registry: registration (with the best token), heartbeats from a
task of their own plus an early one when the load crosses the busy line (EarlyBeat), the token's
renewal before it expires, and deregistration.

It knows nothing of sockets: a refused heartbeat, or a token due without an open connection, is
handed to the connection's reconnect loop; a renewed token goes to the connection to confirm.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Mapping, Protocol, cast

from .early_beat import EarlyBeat
from .errors import ReachError
from .message import CapabilitySpec, LoadReport, Registration
from .registry_client import RegistryClient
from .token_expiry import refresh_delay, token_lifetime

#: A failed token renewal is tried again this soon (the old token still has a fifth of its life).
TOKEN_REFRESH_RETRY_S = 5.0


class LeaseConnection(Protocol):
    """What the lease needs of the connection (connection.DispatcherConnection)."""

    @property
    def steady(self) -> bool:
        """One connection is open and no reconnect runs: a new token can go over it."""
        ...

    def reconnect(self, *, re_register: bool, immediate: bool) -> None: ...

    def send_token(self, token: str) -> tuple[asyncio.Future[str], str] | None:
        """Writes ``refresh_token``: the future of its ``token_refreshed`` (the new expiry) and the
        connection id; None when no open connection took it."""
        ...

    def token_settled(self) -> None:
        """The lease stopped waiting for ``token_refreshed``."""
        ...


class AgentLease:
    def __init__(
        self,
        descriptor: Mapping[str, Any],
        *,
        token: str | None,
        token_refresh_ratio: float,
        max_concurrency: int,
        log: logging.Logger,
        state: Callable[[], str],
        load: Callable[[], LoadReport],
        running: Callable[[], int],
        on_registered: Callable[[Registration, Registration | None], None],
        fire: Callable[[str, Any], None],
        connection: Callable[[], LeaseConnection],
    ) -> None:
        self._descriptor = descriptor
        self._token = token
        self._token_refresh_ratio = token_refresh_ratio
        self._log = log
        self._state = state
        self._load = load
        self._on_registered = on_registered
        self._fire = fire
        self._connection = connection
        #: A heartbeat as soon as the load crosses the busy line, not half a lease later.
        self._early_beat = EarlyBeat(max_concurrency=max_concurrency, running=running, beat=self._beat_early)
        #: The registry client, from start() on (attach()).
        self.registry: RegistryClient | None = None
        self.registration: Registration | None = None
        self._capabilities: list[CapabilitySpec] = []
        self._beating = False
        self._heartbeat_every = 0.0
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._refresh_task: asyncio.Task[None] | None = None
        self._renewal_lock: asyncio.Lock | None = None
        self._background: set[asyncio.Task[Any]] = set()

    def attach(self, registry: RegistryClient) -> None:
        """start(): the registry to hold the lease with (and a lock, on the running loop)."""
        self.registry = registry
        self._renewal_lock = asyncio.Lock()

    def declare(self, handled: list[str], subscribed: list[str]) -> None:
        """The capabilities the agent registers: the descriptor's, plus every handled one and subscribed topic."""
        by_name: dict[str, CapabilitySpec] = {}
        for c in self._descriptor.get("capabilities") or []:
            spec = CapabilitySpec(name=c, mode="handle") if isinstance(c, str) else cast(CapabilitySpec, {"mode": "handle", **c})
            by_name[spec["name"]] = spec
        handled_set, subscribed_set = set(handled), set(subscribed)
        for name in handled:
            by_name.setdefault(name, {"name": name, "mode": "handle"})
        for name in subscribed:
            by_name.setdefault(name, {"name": name, "mode": "subscribe"})
        for spec in by_name.values():
            served = spec["name"] in (subscribed_set if spec.get("mode") == "subscribe" else handled_set)
            if not served:
                self._log.warning("capability %s declared without a handler: its deliveries will be rejected", spec["name"])
        self._capabilities = list(by_name.values())

    async def register(self) -> Registration:
        """Registers (again: same agent id, a new token) and heartbeats at the interval the registry gave."""
        reg = await self._register()
        self._start_heartbeat()
        return reg

    def load_changed(self) -> None:
        """A handler started or ended: an early heartbeat when the node became busy or idle."""
        self._early_beat.changed()

    def stop_early_beats(self) -> None:
        """No early heartbeats any more (the node is stopping); the regular ones go on until cancel_timers()."""
        self._early_beat.stop()

    async def cancel_timers(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in (self._heartbeat_task, self._refresh_task) if t is not None and t is not current]
        self._heartbeat_task = self._refresh_task = None
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def deregister(self) -> None:
        reg = self.registration
        if reg is None or self.registry is None:
            return
        try:
            await self.registry.deregister(reg.agent_id, reg.token)
            self._log.info("deregistered agent %s", reg.agent_id)
        except ReachError as err:
            self._log.warning("deregistration of %s failed (%s); the lease will expire", reg.agent_id, err)

    async def _register(self) -> Registration:
        assert self.registry is not None
        previous = self.registration
        descriptor: dict[str, Any] = {**self._descriptor, "capabilities": self._capabilities}
        # Re-registering under the same id replaces the record atomically and keeps the delivery stream.
        agent_id = previous.agent_id if previous else self._descriptor.get("agent_id")
        if agent_id:
            descriptor["agent_id"] = agent_id
        reg = await self._register_with_best_token(descriptor, previous)
        if previous and reg.agent_id != previous.agent_id:
            self._log.warning("the registry gave a new agent id %s (was %s); the delivery stream starts over", reg.agent_id, previous.agent_id)
        self.registration = reg
        self._schedule_token_refresh()
        self._log.info("%s agent %s (lease %s, heartbeat every %.1f s)", "re-registered" if previous else "registered", reg.agent_id, reg.lease_id, reg.heartbeat_interval_ms / 1000)
        if not previous:
            for w in reg.warnings:
                self._log.warning("registry: %s", w.get("message"))
        self._on_registered(reg, previous)
        return reg

    async def _register_with_best_token(self, descriptor: dict[str, Any], previous: Registration | None) -> Registration:
        """Re-registering an existing id needs the agent's own token (or the admin token): the
        enrollment token may only create ids, so nobody hijacks a live agent. The current token
        goes first while it is valid; the configured token is the fallback (e.g. after expiry)."""
        assert self.registry is not None
        own = None
        if previous is not None:
            life = token_lifetime(previous.token)
            if life is None or life.expires_at > time.time() + 1:
                own = previous.token
        tokens = list(dict.fromkeys(t for t in (own, self._token) if t))
        if not tokens:
            return await self.registry.register(descriptor)
        for i, token in enumerate(tokens):
            try:
                return await self.registry.register(descriptor, token)
            except ReachError as err:
                if i == len(tokens) - 1 or err.name != "AUTH_FAILED":
                    raise
                self._log.warning("registration refused the agent token (%s); trying the configured token", err.message)
        raise AssertionError("unreachable")

    def _start_heartbeat(self) -> None:
        """Heartbeats come from their own task, independent of deliveries, so running handlers never delay them."""
        assert self.registration is not None
        every = self.registration.heartbeat_interval_ms / 1000
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
        if self.registration is None or self._state() != "running":
            return True  # nothing to tell
        if self._beating:
            return False
        self._background_task(self._beat(timeout=max(1.0, min(10.0, self._heartbeat_every or 10.0))))
        return True

    async def _beat(self, timeout: float) -> None:
        reg = self.registration
        if reg is None or self.registry is None:
            return
        load = self._load()
        self._early_beat.sent(load["current_load"])
        self._beating = True
        try:
            await asyncio.wait_for(self.registry.heartbeat(reg.agent_id, reg.token, load), timeout)
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
        assert self.registration is not None
        wait = refresh_delay(self.registration.token, time.time(), self._token_refresh_ratio) if delay is None else delay
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
        if self._state() != "running" or self._renewal_lock.locked():
            return
        async with self._renewal_lock:
            connection = self._connection()
            if not connection.steady:
                connection.reconnect(re_register=True, immediate=True)
                return
            self._log.info("%s: re-registering and renewing the token on the open connection", why)
            try:
                await self.register()  # schedules the next renewal
            except Exception as err:
                self._log.warning("token renewal failed (%s); trying again in %.0f s", err, TOKEN_REFRESH_RETRY_S)
                self._schedule_token_refresh(TOKEN_REFRESH_RETRY_S)
                return
            assert self.registration is not None
            sent = connection.send_token(self.registration.token)
            if sent is None:
                connection.reconnect(re_register=False, immediate=True)
                return
            confirmed, connection_id = sent
            try:
                expires_at = await asyncio.wait_for(asyncio.shield(confirmed), 10)
            except TimeoutError:
                self._log.warning("the dispatcher did not confirm the renewed token; at expiry it closes the connection (4003) and the node reconnects")
                return
            except ReachError as err:
                self._log.warning("the dispatcher refused the renewed token (%s); the node reconnects", err)
                return
            finally:
                connection.token_settled()
            self._log.info("token renewed on connection %s (expires %s)", connection_id, expires_at)
            self._fire("token_refreshed", {"connection_id": connection_id, "expires_at": expires_at})

    def _background_task(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
