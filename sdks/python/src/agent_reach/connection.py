"""The node's connection to the dispatcher: one socket at a time, the one reconnect loop (with
backoff, re-registering through the lease when the token was refused), frames in and out, the
outbox of answers kept while disconnected, the unsure answers written again after a drop, the
seq to resume from (hello.last_seq), and the sends waiting for their ``accepted``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

from . import frames
from .agent_socket import CLOSE_AUTH_FAILED, CLOSE_DUPLICATE, AgentSocket
from .backoff import Backoff, reconnect_delay
from .errors import ReachError, error_for_code
from .frames import Accepted, AgentFrame, Deliver, ErrorFrame, Routes, ServerFrame, TokenRefreshed
from .lease import AgentLease
from .routes_view import RoutesView

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


class DispatcherConnection:
    def __init__(
        self,
        url: str,
        *,
        lease: AgentLease,
        log: logging.Logger,
        state: Callable[[], str],
        ssl_context: ssl.SSLContext | None,
        connect_timeout: float,
        ping_interval: float,
        idle_timeout: float,
        backoff: Backoff,
        random: Callable[[], float],
        routes: RoutesView,
        preflight: bool,
        on_deliver: Callable[[Deliver], None],
        on_replaced: Callable[[], None],
        fire: Callable[[str, Any], None],
    ) -> None:
        #: The dispatcher's WebSocket URL (start() may point it at the local control plane).
        self.url = url
        self._lease = lease
        self._log = log
        self._state = state
        self._ssl_context = ssl_context
        self._connect_timeout = connect_timeout
        self._ping_interval = ping_interval
        self._idle_timeout = idle_timeout
        self._backoff = backoff
        self._random = random
        #: The pre-flight view, kept current over this connection (routes frames).
        self._routes = routes
        self._preflight = preflight
        self._on_deliver = on_deliver
        self._on_replaced = on_replaced
        self._fire = fire
        self._sends: dict[str, _PendingSend] = {}
        self._outbox: deque[AgentFrame] = deque()
        # acks and rejects written lately: (frame, socket, monotonic time)
        self._unsure: deque[tuple[AgentFrame, AgentSocket, float]] = deque()
        self.socket: AgentSocket | None = None
        #: The highest seq received (acked, running or queued here): sent as hello.last_seq.
        self._last_seq = 0
        self._needs_register = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self._token_refreshed: asyncio.Future[str] | None = None

    @property
    def is_open(self) -> bool:
        return self.socket is not None and self.socket.is_open

    @property
    def steady(self) -> bool:
        """One connection is open and no reconnect runs (a new token can go over it)."""
        return self._reconnect_task is None and self.is_open

    def restart_stream(self) -> None:
        """The registry gave a new agent id: its delivery stream starts from the beginning."""
        self._last_seq = 0

    def send_token(self, token: str) -> tuple[asyncio.Future[str], str] | None:
        """Writes ``refresh_token``: the future of its ``token_refreshed`` and the connection id; None when not written."""
        socket = self.socket
        confirmed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._token_refreshed = confirmed
        if socket is None or not socket.send(frames.refresh_token(token)):
            return None
        return confirmed, socket.connection_id

    def token_settled(self) -> None:
        self._token_refreshed = None

    async def connect(self) -> None:
        reg = self._lease.registration
        assert reg is not None
        socket = await AgentSocket.open(
            self.url,
            frames.hello(reg.agent_id, reg.token, self._last_seq),
            connect_timeout=self._connect_timeout,
            ping_interval=self._ping_interval,
            idle_timeout=self._idle_timeout,
            log=self._log,
            ssl_context=self._ssl_context,
        )
        if self._state() in ("stopping", "stopped"):
            await socket.close(1000, "agent stopping")
            raise ReachError("CONNECTION_CLOSED", "the node stopped while connecting")
        self.socket = socket
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

    def reconnect(self, *, re_register: bool, immediate: bool) -> None:
        """The one reconnect loop: backoff 1 s doubling to 32 s plus jitter, re-registering first
        when the token was refused or is due. Concurrent triggers join the running loop."""
        if re_register:
            self._needs_register = True
        if self._reconnect_task is not None or self._state() not in ("running", "starting"):
            return
        self._reconnect_task = asyncio.create_task(self._reconnect_loop(immediate))

    async def cancel_reconnect(self) -> None:
        task = self._reconnect_task
        self._reconnect_task = None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def send(self, client_ref: str, envelope: dict[str, Any], timeout: float) -> str:
        """Writes a ``send`` frame now or on the next connection; returns the message id once the
        dispatcher accepted it, raises its ``error`` frame's code, 1002 when the socket it went
        out on closed first, or 1001 after ``timeout``."""
        pending = _PendingSend(frames.send(client_ref, envelope), asyncio.get_running_loop().create_future())
        self._sends[client_ref] = pending
        self._write_send(pending)
        try:
            return await asyncio.wait_for(pending.future, timeout)
        except TimeoutError:
            raise ReachError("CONNECT_TIMEOUT", f"the dispatcher did not accept message {envelope['message_id']} within {timeout} s") from None
        finally:
            self._sends.pop(client_ref, None)

    def send_frame(self, frame: AgentFrame) -> None:
        """Writes an answer (or any frame); while disconnected it waits in the outbox."""
        socket = self.socket
        if socket is not None and socket.send(frame):
            if frame.get("type") in ("result", "ack", "reject"):
                now = time.monotonic()
                while self._unsure and (now - self._unsure[0][2] > UNSURE_ANSWER_S or len(self._unsure) >= MAX_OUTBOX):
                    self._unsure.popleft()
                self._unsure.append((frame, socket, now))
            return
        self._keep(frame)

    async def flushed(self) -> None:
        """Returns once what was written has left (the answers of finished work, before deregistering)."""
        if self.socket is not None:
            await self.socket.flushed()

    async def close(self, err: ReachError) -> None:
        """Closes the connection for good; sends still waiting fail with ``err``."""
        socket, self.socket = self.socket, None
        if socket is not None:
            await socket.close(1000, "agent stopped")
        for pending in self._sends.values():
            if not pending.future.done():
                pending.future.set_exception(err)

    async def _reconnect_loop(self, immediate: bool) -> None:
        try:
            attempt = 0
            wait = not immediate
            while self._state() in ("running", "starting"):
                if wait:
                    delay = reconnect_delay(attempt, self._random, self._backoff)
                    attempt += 1
                    self._log.debug("reconnecting in %.2f s (attempt %d)", delay, attempt)
                    await asyncio.sleep(delay)
                    if self._state() not in ("running", "starting"):
                        return
                wait = True
                try:
                    old = self.socket
                    if old is not None:
                        # Closed before the new one opens: the dispatcher would close it anyway
                        # (4001), and its un-acked deliveries are replayed on the new connection.
                        self.socket = None
                        await old.close(1000, "reconnecting")
                    if self._needs_register:
                        self._needs_register = False
                        try:
                            await self._lease.register()
                        except BaseException:
                            self._needs_register = True
                            raise
                    await self.connect()
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
        if socket is not self.socket:
            return  # a connection this node replaced itself
        self.socket = None
        # The view came on this connection and is no longer kept current: it decides nothing until the next one's.
        self._routes.reset()
        self._resend_unsure(socket)
        self._fire("disconnected", {"code": code, "reason": reason})
        if self._state() in ("stopping", "stopped"):
            return
        if code == CLOSE_DUPLICATE:
            self._on_replaced()
            return
        self._log.warning("connection to the dispatcher lost (%d %s); reconnecting", code, reason)
        self.reconnect(re_register=code == CLOSE_AUTH_FAILED, immediate=False)

    def _on_frame(self, frame: ServerFrame) -> None:
        if isinstance(frame, Deliver):
            if frame.seq > self._last_seq:
                self._last_seq = frame.seq
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
            self.send_frame(frame)

    def _write_send(self, pending: _PendingSend) -> None:
        socket = self.socket
        if socket is not None and socket.send(pending.frame):
            pending.socket = socket
