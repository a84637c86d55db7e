"""The delay-line TCP proxy: asyncio, one loop, one delay line per direction per connection.

Each accepted client gets its own connection to the broker. Every chunk read from
one side is stamped and pushed into that direction's `DelayLine`; one timer per
direction fires at the head's release time and writes everything due, so a
chunk's delay never waits for the chunks before it to have slept theirs. Settings
change on live connections (`apply`); `down` cuts every connection and stops
listening, `reset_peer` resets (RST) the established ones.

The loop uses `select()` rather than epoll: epoll's timeout has millisecond
granularity (asyncio rounds it up), which alone would make releases up to 1 ms
late; select's is microseconds, and a proxy has few sockets.
"""

from __future__ import annotations

import asyncio
import logging
import random
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from loadgen.netem.link import UNIMPAIRED, DelayLine, LinkSettings, NetworkState
from loadgen.netem.measure import DirectionMeter

__all__ = ["Proxy", "new_event_loop", "MAX_QUEUED_BYTES"]

log = logging.getLogger("sojourn.netem")

MAX_QUEUED_BYTES = 4 * 1024 * 1024
"""Bytes one direction of one connection may hold in its delay line before the proxy
stops reading from the sender (TCP back-pressure, as a full router buffer would)."""

DIRECTIONS = ("upstream", "downstream")
_EOF = object()  # the sender closed: released through the delay line like data


def new_event_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose timers wake within microseconds (select) instead of up to 1 ms late."""
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


class _Side(asyncio.Protocol):
    """One socket of a proxied connection (the client's or the broker's)."""

    def __init__(self, conn: _Connection, name: str):
        self.conn = conn
        self.name = name
        self.transport: asyncio.Transport | None = None
        self.outgoing: _Pipe | None = None  # data read here goes into this pipe
        self.incoming: _Pipe | None = None  # this pipe writes here
        self._holds: set[str] = set()
        self.closed = False

    # reading is held while the peer can not take more, or our delay line is full
    def hold(self, reason: str) -> None:
        if not self._holds and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._holds.add(reason)

    def release(self, reason: str) -> None:
        if reason in self._holds:
            self._holds.discard(reason)
            if not self._holds and self.transport is not None and not self.closed:
                self.transport.resume_reading()

    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._holds:
            transport.pause_reading()
        self.conn.side_ready(self)

    def data_received(self, data: bytes) -> None:
        assert self.outgoing is not None  # our _Connection built both pipes before any socket existed
        self.outgoing.feed(data)

    def eof_received(self):
        self.outgoing.feed_eof()
        return True  # keep our write half open until the EOF is released to the peer

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.conn.side_lost(self, exc)

    def pause_writing(self) -> None:
        assert self.incoming is not None  # our _Connection built both pipes before any socket existed
        self.incoming.source.hold("peer-busy")

    def resume_writing(self) -> None:
        assert self.incoming is not None  # as in pause_writing
        self.incoming.source.release("peer-busy")


class _Pipe:
    """One direction of one connection: source side -> delay line -> destination side."""

    def __init__(self, proxy: Proxy, direction: str, source: _Side, dest: _Side):
        self.proxy = proxy
        self.direction = direction
        self.source = source
        self.dest = dest
        self.meter = proxy.meters[direction]
        clock = proxy.clock
        self.line: DelayLine = DelayLine(getattr(proxy.state, direction), proxy.rng, clock())
        self._timer: asyncio.TimerHandle | None = None
        self.done = False
        source.outgoing = self
        dest.incoming = self

    def feed(self, data: bytes) -> None:
        clock = self.proxy.clock
        now = clock()
        dest = self.dest.transport
        if not self.line and self.line.settings.transparent and dest is not None and not self.dest.closed:
            # Nothing to delay and nothing queued ahead: forward at once, no timer.
            sent = clock()
            dest.write(data)
            self.meter.record(now, now, sent, len(data))
            return
        release = self.line.push(data, len(data), now)
        if self.line.queued_bytes > MAX_QUEUED_BYTES:
            self.source.hold("line-full")
        if self._timer is None:
            self._schedule(release)

    def feed_eof(self) -> None:
        release = self.line.push(_EOF, 0, self.proxy.clock())
        if self._timer is None:
            self._schedule(release)

    def _schedule(self, release_ns: int) -> None:
        assert self.proxy.loop is not None  # data flows only on connections the started proxy accepted
        self._timer = self.proxy.loop.call_at(release_ns / 1e9, self._fire)

    def kick(self) -> None:
        """The destination just connected: release whatever is already due."""
        if self._timer is None and self.line:
            self._fire()

    def _fire(self) -> None:
        self._timer = None
        dest = self.dest.transport
        if dest is None or self.done:
            return  # not connected yet: `kick` resumes
        now = self.proxy.clock()
        due = self.line.due(now)
        if due:
            chunks = []
            eof = False
            for release, stamp, item in due:
                if item is _EOF:
                    eof = True
                    break
                chunks.append(item)
                self.meter.record(stamp, release, now, len(item))
            if chunks and not self.dest.closed:
                dest.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
            if eof:
                self.finish()
                return
            if self.line.queued_bytes <= MAX_QUEUED_BYTES // 2:
                self.source.release("line-full")
        upcoming = self.line.next_release_ns()
        if upcoming is not None:
            self._schedule(upcoming)

    def finish(self) -> None:
        """The sender's EOF reached the head of the line: pass it on, and close once both are done."""
        self.done = True
        if self.dest.transport is not None and not self.dest.closed:
            if self.dest.transport.can_write_eof():
                self.dest.transport.write_eof()
            else:
                self.dest.transport.close()
        self.source.conn.pipe_done()

    def drop(self) -> None:
        """The connection is cut: whatever is still in the line never arrives."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.meter.dropped += self.line.clear()
        self.done = True


class _Connection:
    """A client socket, its broker socket, and the two pipes between them."""

    def __init__(self, proxy: Proxy):
        self.proxy = proxy
        self.client = _Side(self, "client")
        self.broker = _Side(self, "broker")
        self.upstream = _Pipe(proxy, "upstream", self.client, self.broker)
        self.downstream = _Pipe(proxy, "downstream", self.broker, self.client)
        self.was_cut = False

    def side_ready(self, side: _Side) -> None:
        if side is self.client:
            self.proxy.connections.add(self)
            assert self.proxy.loop is not None  # the started proxy accepted this connection
            self.proxy.loop.create_task(self._connect_broker())
        elif self.was_cut:  # cut (an outage, a reset) while the broker connection was being made
            assert side.transport is not None  # connection_made set it before calling us
            side.transport.abort()
        else:
            self.upstream.kick()

    async def _connect_broker(self) -> None:
        assert self.proxy.loop is not None  # the started proxy accepted this connection
        try:
            await self.proxy.loop.create_connection(
                lambda: self.broker, self.proxy.upstream_host, self.proxy.upstream_port
            )
        except OSError as exc:
            log.warning(
                "netem: cannot reach the broker at %s:%s: %s", self.proxy.upstream_host, self.proxy.upstream_port, exc
            )
            self.cut()

    def configure(self, state: NetworkState, now_ns: int) -> None:
        self.upstream.line.configure(state.upstream, now_ns)
        self.downstream.line.configure(state.downstream, now_ns)

    def pipe_done(self) -> None:
        if self.upstream.done and self.downstream.done:
            self._close_both(abort=False)

    def side_lost(self, side: _Side, exc) -> None:
        """A socket closed. With an error (reset, broken pipe) the whole connection goes at once;
        without one it is the end of an orderly close that `pipe_done` started."""
        if exc is not None:
            self.cut()
        if self.client.closed and (self.broker.closed or self.broker.transport is None):
            self.proxy.connections.discard(self)

    def cut(self, reset: bool = False) -> None:
        """Close both sockets now, dropping what is in flight; `reset` sends RST instead of FIN."""
        self.was_cut = True
        self.upstream.drop()
        self.downstream.drop()
        self._close_both(abort=True, reset=reset)

    def _close_both(self, abort: bool, reset: bool = False) -> None:
        for side in (self.client, self.broker):
            transport = side.transport
            if transport is None or side.closed:
                continue
            if reset:
                sock = transport.get_extra_info("socket")
                if sock is not None:
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    except OSError:
                        pass
            if abort:
                transport.abort()
            else:
                transport.close()
        self.proxy.connections.discard(self)


class Proxy:
    """A TCP proxy on listen_host:listen_port to upstream_host:upstream_port, impaired by `state`.

    `clock` is a monotonic nanosecond clock that must agree with the loop's `time()`
    (asyncio's default loop uses time.monotonic). Run it in its own process or thread:
    it must not share a loop with the load it delays.
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        state: NetworkState = UNIMPAIRED,
        rng: random.Random | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        reuse_port: bool = False,
    ):
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.listen_host = listen_host
        self.listen_port = listen_port
        self.state = state
        self.rng = rng or random.Random()
        self.clock = clock
        self.reuse_port = reuse_port
        self.meters = {d: DirectionMeter() for d in DIRECTIONS}
        self.connections: set[_Connection] = set()
        self.accepted = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def start(self) -> int:
        """Listen; return the port (the one asked for, or the one the system chose for 0)."""
        self.loop = asyncio.get_running_loop()
        await self._listen()
        if self.state.down:
            self._stop_listening()
        return self.listen_port

    async def _listen(self) -> None:
        def accept() -> _Side:
            self.accepted += 1
            return _Connection(self).client

        assert self.loop is not None  # start() set it before listening
        self._server = await self.loop.create_server(
            accept,
            self.listen_host,
            self.listen_port,
            reuse_address=True,
            reuse_port=self.reuse_port or None,
            backlog=128,
        )
        self.listen_port = self._server.sockets[0].getsockname()[1]

    def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()  # new connections are refused (nothing listens on the port)
            self._server = None

    async def apply(self, state: NetworkState, *, reset: bool = False) -> None:
        """Put `state` in force on every live connection; `reset` resets the established ones."""
        previous, self.state = self.state, state
        now = self.clock()
        if reset:
            self.reset_all()
        if state.down:
            self._stop_listening()
            for conn in list(self.connections):
                conn.cut()
        elif previous.down or self._server is None:
            await self._listen_again()
        for conn in self.connections:
            conn.configure(state, now)

    async def _listen_again(self, attempts: int = 50) -> None:
        for attempt in range(attempts):
            try:
                await self._listen()
                return
            except OSError as exc:  # the port may still be held for a moment
                if attempt == attempts - 1:
                    log.error("netem: cannot listen on %s:%s again: %s", self.listen_host, self.listen_port, exc)
                    return
                await asyncio.sleep(0.1)

    def reset_all(self) -> None:
        for conn in list(self.connections):
            conn.cut(reset=True)

    def set_link(self, direction: str, settings: LinkSettings) -> None:
        """Change one direction only (benchmarks, tests)."""
        now = self.clock()
        # direction is "upstream" or "downstream", both LinkSettings fields: mypy sees only a str key
        self.state = replace(self.state, **cast("dict[str, Any]", {direction: settings}))
        for conn in self.connections:
            getattr(conn, direction).line.configure(settings, now)

    async def close(self) -> None:
        self._stop_listening()
        for conn in list(self.connections):
            conn.cut()
        await asyncio.sleep(0)
