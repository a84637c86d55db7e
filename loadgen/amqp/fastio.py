"""Less work per message on a pika connection: coalesced writes and pre-marshalled publishes.

pika's asynchronous transport (`_AsyncPlaintextTransport`, pika.adapters.utils.io_services_utils)
queues each frame it is given as its own chunk and, when the socket is writable, sends the chunks
one `send()` each: a publish is three frames (method, header, body), so three system calls, and
an ack one. Under load the queue holds many frames by the time the hub gets to it; sending them
joined, up to `COALESCE_BYTES` per call, hands the kernel the same bytes in the same order, at the
same moment the first frame would have gone, with a fraction of the calls. (Reads stay at pika's
4,096 bytes per `recv()`: pika trims its frame buffer by copying the rest after every frame, so a
larger read costs more in copies than it saves in calls.)

Coalescing is set per connection, on sojourn's own connections only, and only on the plaintext
transport: a TLS socket must be retried with the same buffer after a partial write, so its
transport is left as pika made it. The attributes touched are pika's private ones; a pika
without them is left alone (`tune` returns False) and works as before.
"""

from __future__ import annotations

import struct
import types
from typing import Any

import pika

from loadgen.amqp import internals

__all__ = ["COALESCE_BYTES", "FrameWriter", "SojournProperties", "send_now", "tune"]

COALESCE_BYTES = 128 * 1024  # at most this much joined into one send()
MISSING = internals.check("fastio")  # pika internals this pika lacks: then nothing is patched


def tune(conn) -> bool:
    """Coalesce `conn`'s writes; False when its transport is not pika's plaintext one (TLS, or a
    pika whose internals differ), which is then left unchanged."""
    if MISSING:
        return False
    try:
        from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport
    except ImportError:  # pragma: no cover - a pika without the module
        return False
    transport = getattr(conn, "_transport", None)
    if type(transport) is not _AsyncPlaintextTransport or not all(
        hasattr(transport, name) for name in ("_tx_buffers", "_tx_buffered_byte_count", "_sock", "_sigint_safe_send")
    ):
        return False
    assert transport is not None  # its type is _AsyncPlaintextTransport (checked above); pika is untyped here
    if transport._sock.gettimeout() != 0.0:  # a blocking socket's send could wait, in the hub
        return False
    transport._produce = types.MethodType(produce_coalesced, transport)
    return True


def send_now(conn) -> None:
    """Send what `conn`'s tuned transport holds now, from the calling greenlet, instead of at the
    hub's next turn: for a greenlet about to wait (a consumer with an empty buffer, a producer with
    a full confirm window), so the ack or publish that the broker's answer depends on does not wait
    for one more round of the event loop. pika's own writability handler does the work: what the
    socket does not take stays queued for the hub, and a socket error aborts the connection as it
    would there."""
    transport = getattr(conn, "_transport", None)
    if transport is not None and transport._tx_buffers and _tuned(transport):
        transport._on_socket_writable()


def _tuned(transport) -> bool:
    """Whether `tune` set this transport up (plaintext, non-blocking, coalescing)."""
    return getattr(transport._produce, "__func__", None) is produce_coalesced


def produce_coalesced(self) -> None:
    """pika's `_AsyncTransportBase._produce` with the queued chunks joined before each send.

    The same contract: send until the queue is empty or `send` raises (EWOULDBLOCK: the caller
    waits for writability and calls again); a partial send leaves the unsent tail at the front;
    `_tx_buffered_byte_count` always equals the bytes still queued."""
    buffers = self._tx_buffers
    while buffers:
        if len(buffers) > 1 and len(buffers[0]) < COALESCE_BYTES:
            chunks, size = [], 0
            while buffers and size < COALESCE_BYTES:
                chunk = buffers.popleft()
                chunks.append(chunk)
                size += len(chunk)
            buffers.appendleft(b"".join(chunks))
        sent = self._sigint_safe_send(self._sock, buffers[0])
        chunk = buffers.popleft()
        if sent < len(chunk):
            buffers.appendleft(chunk[sent:])
        self._tx_buffered_byte_count -= sent


_FRAME_HEAD = struct.Struct(">BHI")  # frame type, channel, payload size
_CONTENT_HEAD = struct.Struct(">BHIHxxQ")  # header frame's head + class id, weight (0), body size
_FRAME_END = b"\xce"
# A whole basic.ack / basic.nack method frame: type 1, channel, size 13, method index, tag, bits, end.
_SETTLE = struct.Struct(">BHIIQBB")
_ACK, _NACK, _REJECT = 0x003C0050, 0x003C0078, 0x003C005A  # pika.spec.Basic.{Ack,Nack,Reject}.INDEX


class FrameWriter:
    """`basic.publish`, `basic.ack`, `basic.nack` and `basic.reject` on one channel, marshalled here and handed to
    the transport as one write each.

    pika's `Channel.basic_publish` builds a `Basic.Publish` method object, three frame objects and
    their byte strings for every message, and writes each frame separately: about half of a
    publish's own CPU time (docs/benchmarks.md). Here the method frame is marshalled by pika once
    per (exchange, routing key, mandatory) and kept; the content header is the properties' own
    `encode()` behind a fixed head; the bytes are the same as pika's. A body larger than the
    connection's frame size, a closed channel or a pika without the internals used here take
    pika's own path (which raises as usual). An ack or nack is one struct call instead of pika's
    method object, frame object and three-piece join (a third of a consumer's CPU)."""

    def __init__(self, channel):
        self._channel = channel
        conn = channel.connection
        self._conn = conn
        self._number = channel.channel_number
        self._methods: dict[tuple[str, str, bool], bytes] = {}
        self._emit = getattr(conn, "_adapter_emit_data", None)
        self._max_body = getattr(conn, "_body_max_length", None) or 0

    def publish(self, exchange: str, routing_key: str, body: bytes, properties, mandatory: bool = False) -> None:
        channel = self._channel
        size = len(body)
        if self._emit is None or size > self._max_body or not channel.is_open:
            channel.basic_publish(exchange, routing_key, body, properties, mandatory=mandatory)
            return
        key = (exchange, routing_key, mandatory)
        method = self._methods.get(key)
        if method is None:
            method = self._methods[key] = self._method_frame(exchange, routing_key, mandatory)
        props = b"".join(properties.encode())
        number = self._number
        header = _CONTENT_HEAD.pack(2, number, 12 + len(props), properties.INDEX, size)
        if size:
            data = b"".join((method, header, props, _FRAME_END, _FRAME_HEAD.pack(3, number, size), body, _FRAME_END))
            frames = 3
        else:  # pika sends no body frame for an empty body
            data = b"".join((method, header, props, _FRAME_END))
            frames = 2
        conn = self._conn
        conn.bytes_sent += len(data)
        conn.frames_sent += frames
        self._emit(data)

    def ack(self, delivery_tag: int, multiple: bool = False, now: bool = False) -> None:
        """`now`: send it at once when nothing is queued ahead of it (see `_settle`)."""
        if self._emit is None or not self._channel.is_open:
            self._channel.basic_ack(delivery_tag, multiple)
            return
        self._settle(_SETTLE.pack(1, self._number, 13, _ACK, delivery_tag, multiple, 0xCE), now)

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        if self._emit is None or not self._channel.is_open:
            self._channel.basic_nack(delivery_tag, multiple, requeue)
            return
        self._settle(_SETTLE.pack(1, self._number, 13, _NACK, delivery_tag, multiple | requeue << 1, 0xCE))

    def reject(self, delivery_tag: int, requeue: bool = False) -> None:
        """basic.reject: one delivery, requeued or not (its frame is an ack's size: a tag and one bit)."""
        if self._emit is None or not self._channel.is_open:
            self._channel.basic_reject(delivery_tag, requeue)
            return
        self._settle(_SETTLE.pack(1, self._number, 13, _REJECT, delivery_tag, int(requeue), 0xCE))

    def _settle(self, data: bytes, now: bool = False) -> None:
        """Queue `data` for the hub to send; with `now` and an empty queue on a tuned transport, send
        it from here instead: the caller has nothing else to send soon (e.g. an ack at prefetch 1,
        which the broker waits for), and pika's queue-then-watch-for-writability costs a watcher
        set and removed per frame and a turn of the event loop. Whatever the socket does not take,
        or an error, goes through pika's queue as before."""
        conn = self._conn
        conn.bytes_sent += 21
        conn.frames_sent += 1
        transport = getattr(conn, "_transport", None) if now else None
        if transport is not None and not transport._tx_buffers and _tuned(transport):
            try:
                sent = transport._sock.send(data)
            except OSError:  # would block, or a broken socket: pika's writer meets it and aborts
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        self._emit(data)

    def _method_frame(self, exchange: str, routing_key: str, mandatory: bool) -> bytes:
        from pika import frame, spec

        return frame.Method(
            self._number, spec.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory)
        ).marshal()


_SOJOURN_FLAGS = (
    pika.BasicProperties.FLAG_HEADERS | pika.BasicProperties.FLAG_DELIVERY_MODE | pika.BasicProperties.FLAG_MESSAGE_ID
)
_HEAD = struct.Struct(">HI12sI")  # flags, table size, "sojourn-id" key and 'S' tag, id length
_TAIL = struct.Struct(">16sqBB")  # "sojourn-pub-ns" key and 'l' tag, ns, delivery mode, id length
_LONG_FROM = 2**31  # pika writes smaller ints as 'I'


class SojournProperties(pika.BasicProperties):
    """A synthetic publish's properties: delivery mode, message id and the two sojourn headers.

    pika's BasicProperties sets 14 fields and encodes each through checks and small functions
    (a fifth of `_publish`); this one encodes the same bytes with two struct calls."""

    content_type = content_encoding = priority = correlation_id = reply_to = expiration = None
    timestamp = type = user_id = app_id = cluster_id = None

    def __init__(self, delivery_mode: int, message_id: str, publish_ns: int):  # not super(): it sets 14 fields
        self.delivery_mode = delivery_mode
        self.message_id = message_id
        self.headers: dict[str, Any] = {"sojourn-id": message_id, "sojourn-pub-ns": publish_ns}

    def encode(self) -> list[bytes]:
        ident = self.message_id.encode()
        n = len(ident)
        ns = self.headers["sojourn-pub-ns"]
        if n > 255 or ns < _LONG_FROM:  # pika raises, or writes a small int differently
            return super().encode()
        return [
            _HEAD.pack(_SOJOURN_FLAGS, 40 + n, b"\nsojourn-idS", n),
            ident,
            _TAIL.pack(b"\x0esojourn-pub-nsl", ns, self.delivery_mode, n),
            ident,
        ]
