"""A TCP proxy between agents and the dispatcher that a test can break the way networks break:
drop what one side sends (the bytes reach the proxy and go nowhere), or cut every connection at
once (both ends see the TCP connection die, no WebSocket close frame). New connections after a
cut go through normally, so a reconnecting agent finds its way back."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit


class ChaosProxy:
    def __init__(self, target_url: str) -> None:
        u = urlsplit(target_url)
        self._target = (u.hostname or "127.0.0.1", u.port or 80)
        self._path = u.path
        self._server: asyncio.base_events.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        #: Drop what agents send to the dispatcher (acks, results, pings…).
        self.drop_upstream = False
        #: Drop what the dispatcher sends to agents (deliveries, pings…).
        self.drop_downstream = False
        self.dropped_upstream = 0
        self.dropped_downstream = 0
        #: Connections accepted so far.
        self.accepted = 0

    async def start(self) -> "ChaosProxy":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}{self._path}"

    def cut(self) -> None:
        """Kills every current connection (TCP abort on both sides) and stops dropping bytes."""
        self.drop_upstream = self.drop_downstream = False
        for client, upstream in list(self._pairs):
            client.transport.abort()
            upstream.transport.abort()
        self._pairs.clear()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_r, up_w = await asyncio.open_connection(*self._target)
        except OSError:
            client_w.transport.abort()
            return
        pair = (client_w, up_w)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pump(client_r, up_w, upstream=True), self._pump(up_r, client_w, upstream=False))
        finally:
            self._pairs.discard(pair)
            client_w.transport.abort()
            up_w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, upstream: bool) -> None:
        try:
            while chunk := await reader.read(65536):
                if upstream and self.drop_upstream:
                    self.dropped_upstream += len(chunk)
                elif not upstream and self.drop_downstream:
                    self.dropped_downstream += len(chunk)
                else:
                    writer.write(chunk)
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()
