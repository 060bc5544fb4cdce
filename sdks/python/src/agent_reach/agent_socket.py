"""One WebSocket to the dispatcher.

Sends ``hello`` first and is open once ``welcome`` arrives; answers the dispatcher's pings,
pings on its own, and drops a connection that has been silent for twice the ping interval (the
dispatcher does the same). Frames go out in the order they were given, through one writer task,
so an ack never overtakes the result it follows. Reconnecting is the node's business.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol

import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from . import frames
from .errors import ReachError
from .frames import AgentFrame, ErrorFrame, Ping, ServerFrame, Welcome

#: Close codes of the protocol (docs/protocol.md) and what they mean to an agent.
CLOSE_DUPLICATE = 4001
CLOSE_AUTH_FAILED = 4003
CLOSE_HEARTBEAT_TIMEOUT = 4008
CLOSE_FRAME_TOO_LARGE = 4013
#: No close frame arrived: the TCP connection died.
CLOSE_ABNORMAL = 1006

# Frames from the dispatcher are bounded by the payload limit (256 KiB, base64 ≈ 342 KiB) plus
# the envelope; 4 MiB leaves room without letting a broken peer exhaust memory.
MAX_INBOUND_BYTES = 4 * 1024 * 1024

OnFrame = Callable[[ServerFrame], None]
OnClose = Callable[["AgentSocket", int, str], None]


class _WebSocket(Protocol):
    """What this module uses of a websockets client connection (the same in websockets 10 … 15)."""

    @property
    def close_code(self) -> int | None: ...
    @property
    def close_reason(self) -> str | None: ...
    @property
    def transport(self) -> Any: ...
    async def send(self, message: str) -> None: ...
    async def recv(self) -> str | bytes: ...
    async def close(self, code: int = 1000, reason: str = "") -> None: ...
    def __aiter__(self) -> AsyncIterator[str | bytes]: ...


# websockets resolves `connect` lazily (the asyncio client of whichever version is installed), so
# type checkers cannot see it; its call is the same in 10.4 (Debian bookworm) and later versions.
_connect: Callable[..., Awaitable[Any]] = getattr(websockets, "connect")


def _now_ms() -> float:
    return time.time() * 1000


class AgentSocket:
    def __init__(self, ws: _WebSocket, welcome: Welcome, *, ping_interval: float, idle_timeout: float, log: logging.Logger) -> None:
        self.welcome = welcome
        self._ws = ws
        self._log = log
        self._outgoing: asyncio.Queue[AgentFrame] = asyncio.Queue()
        self._last_heard = time.monotonic()
        self._closing = False
        self._done: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        self._on_frame: OnFrame = lambda _f: None
        self._on_close: OnClose = lambda _s, _c, _r: None
        # The dispatcher's advertised interval wins when shorter, so both ends agree on "silent".
        server = welcome.heartbeat_ms / 1000 if welcome.heartbeat_ms else None
        self._ping_interval = min(server, ping_interval) if server and server > 0 else ping_interval
        self._idle_timeout = max(idle_timeout, self._ping_interval * 2)
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def open(
        cls,
        url: str,
        hello: AgentFrame,
        *,
        connect_timeout: float,
        ping_interval: float,
        idle_timeout: float,
        log: logging.Logger,
        ssl_context: ssl.SSLContext | None = None,
    ) -> "AgentSocket":
        """Connects and authenticates; raises 1001 (timeout), 1003 (refused token) or 1002 (closed).

        Call ``start(on_frame, on_close)`` next: frames that arrive meanwhile wait in the socket.
        """
        ws: _WebSocket | None = None
        try:
            async with asyncio.timeout(connect_timeout):
                # Protocol-level pings are off: the agent protocol has its own ping frames.
                # wss:// with a private CA takes the given SSLContext; otherwise websockets' default.
                tls = {"ssl": ssl_context} if ssl_context is not None and url.startswith("wss:") else {}
                live: _WebSocket = await _connect(url, open_timeout=None, ping_interval=None, max_size=MAX_INBOUND_BYTES, close_timeout=2, **tls)
                ws = live
                await live.send(json.dumps(hello))
                while True:
                    text = await live.recv()
                    frame = frames.parse_server_frame(text, _now_ms()) if isinstance(text, str) else None
                    if isinstance(frame, Ping):
                        await live.send(json.dumps(frames.pong(frame.ts)))
                    elif isinstance(frame, Welcome):
                        return cls(live, frame, ping_interval=ping_interval, idle_timeout=idle_timeout, log=log)
                    elif isinstance(frame, ErrorFrame):
                        name = "AUTH_FAILED" if frame.code == 1003 else "CONNECTION_CLOSED"
                        raise ReachError(name, f"dispatcher refused hello: {frame.name} {frame.message}")
        except TimeoutError:
            await _abandon(ws)
            raise ReachError("CONNECT_TIMEOUT", f"no welcome from {url} within {connect_timeout} s") from None
        except ConnectionClosed:
            code = ws.close_code if ws is not None and ws.close_code is not None else CLOSE_ABNORMAL
            reason = (ws.close_reason if ws is not None else None) or ""
            name = "AUTH_FAILED" if code == CLOSE_AUTH_FAILED else "CONNECTION_CLOSED"
            raise ReachError(name, f"connection closed before welcome ({code} {reason})".strip()) from None
        except (OSError, InvalidHandshake, InvalidURI) as err:
            await _abandon(ws)
            raise ReachError("CONNECTION_CLOSED", f"websocket to {url} failed: {err}") from err
        except BaseException:
            await _abandon(ws)
            raise

    def start(self, on_frame: OnFrame, on_close: OnClose) -> None:
        """Starts reading, writing and pinging; ``on_close(socket, code, reason)`` runs once at the end."""
        self._on_frame = on_frame
        self._on_close = on_close
        self._tasks = [asyncio.create_task(coro) for coro in (self._read(), self._write(), self._watch())]

    @property
    def connection_id(self) -> str:
        return self.welcome.connection_id

    @property
    def is_open(self) -> bool:
        return not self._closing and not self._done.done()

    def send(self, frame: AgentFrame) -> bool:
        """Queues one frame for the writer; False when the socket is closing (the caller keeps it)."""
        if not self.is_open:
            return False
        self._outgoing.put_nowait(frame)
        return True

    async def flushed(self, timeout: float = 5.0) -> None:
        """Returns once everything queued so far was written (or the socket closed)."""
        if not self.is_open:
            return
        join: asyncio.Future[Any] = asyncio.ensure_future(self._outgoing.join())
        done: asyncio.Future[Any] = self._done
        await asyncio.wait([join, done], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        join.cancel()

    def unsent(self) -> list[AgentFrame]:
        """Frames queued but never written: after a close the node keeps its answers for the next connection."""
        out: list[AgentFrame] = []
        while not self._outgoing.empty():
            out.append(self._outgoing.get_nowait())
            self._outgoing.task_done()
        return out

    async def close(self, code: int = 1000, reason: str = "") -> tuple[int, str]:
        """Closes (the close handshake gets 3 s, then the connection is dropped); returns the close code and reason."""
        if not self._closing and not self._done.done():
            self._closing = True
            try:
                await asyncio.wait_for(self._ws.close(code, reason), 3)
            except Exception:  # noqa: BLE001 — any failure to close politely ends in an abort
                _abort(self._ws)
        return await self.wait_closed()

    async def wait_closed(self) -> tuple[int, str]:
        return await asyncio.shield(self._done)

    def abort(self) -> None:
        """Drops the TCP connection without a close handshake (the dispatcher replays what was not acked)."""
        _abort(self._ws)

    # ── tasks ───────────────────────────────────────────────────────────────────────────────

    async def _read(self) -> None:
        try:
            async for text in self._ws:
                self._last_heard = time.monotonic()
                if not isinstance(text, str):
                    continue  # binary frames are not part of the protocol
                frame = frames.parse_server_frame(text, _now_ms())
                if frame is None:
                    self._log.debug("ignoring a frame this SDK does not know: %.200s", text)
                elif isinstance(frame, Ping):
                    self.send(frames.pong(frame.ts))
                else:
                    try:
                        self._on_frame(frame)
                    except Exception:  # one bad frame must not end the connection
                        self._log.exception("handling a %s frame failed", type(frame).__name__)
        except ConnectionClosed:
            pass
        except Exception:
            self._log.exception("reading from the dispatcher failed")
            _abort(self._ws)
        finally:
            self._finish()

    async def _write(self) -> None:
        while True:
            frame = await self._outgoing.get()
            try:
                await self._ws.send(json.dumps(frame, separators=(",", ":")))
            except ConnectionClosed:
                self._outgoing.put_nowait(frame)  # back for unsent(): it never left
                self._outgoing.task_done()
                return
            self._outgoing.task_done()

    async def _watch(self) -> None:
        # Checked more often than we ping, so a dead peer is noticed within about idle_timeout.
        tick = max(0.05, min(self._ping_interval, self._idle_timeout / 3))
        last_ping = time.monotonic()
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            if now - self._last_heard > self._idle_timeout:
                self._log.warning("dispatcher silent for %.1f s; dropping the connection %s", now - self._last_heard, self.connection_id)
                _abort(self._ws)
                return
            if now - last_ping >= self._ping_interval:
                last_ping = now
                self.send(frames.ping(_now_ms()))

    def _finish(self) -> None:
        if self._done.done():
            return
        code = self._ws.close_code if self._ws.close_code is not None else CLOSE_ABNORMAL
        reason = self._ws.close_reason or ""
        self._done.set_result((code, reason))
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        try:
            self._on_close(self, code, reason)
        except Exception:
            self._log.exception("on_close failed")


def _abort(ws: _WebSocket | None) -> None:
    transport = getattr(ws, "transport", None)
    if transport is not None:
        transport.abort()


async def _abandon(ws: _WebSocket | None) -> None:
    """Closes a socket whose handshake failed, without waiting long for the peer."""
    if ws is None:
        return
    try:
        await asyncio.wait_for(ws.close(), 1)
    except Exception:  # noqa: BLE001
        _abort(ws)
