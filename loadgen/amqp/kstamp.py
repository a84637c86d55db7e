"""Kernel receive stamps: when a delivery's bytes reached the consumer's socket, not when the
process got round to reading them.

A delivery that arrives while the consumer's process is busy (another greenlet, a collection, a
CPU the broker and Spark share) waits in the socket's receive buffer until the hub reads it. That
wait is client-side waiting, part of the buffer sojourn; stamped at the read, it would count as
broker + network time. With `SO_TIMESTAMPNS` (Linux) the kernel stamps each received segment, and
`recvmsg` hands the stamp back with the bytes: for TCP, the stamp of the last segment the read
took. `enable(conn)` turns it on for one pika connection and replaces its transport's read loop
with the same loop over `recvmsg`; `ReceiveStamps.kernel_ns` then holds the stamp of the bytes
pika is parsing, read by the delivery callback, which pika calls while it parses them. A delivery
completed by an earlier segment of the same read gets that read's (later) stamp: the socket wait
can read short by up to one read's spread (at most 4,096 bytes), never long.

Over TLS the bytes pika parses come decrypted out of the TLS layer, one record at a time. Before
each read that needs a new record, the record's header is peeked from the socket underneath
(`MSG_PEEK`: nothing is consumed) and then the whole record, whose peek carries the stamp of the
segment that completed it: exact to the record (up to 16 KB), the same bound as a plaintext read.

Where it cannot be had (a platform without SO_TIMESTAMPNS, a pika whose transport differs),
`enable` returns the reason instead, and the consumer stamps at the read as before. The
attributes touched are pika's private ones, as in loadgen.amqp.fastio.
"""

from __future__ import annotations

import _socket
import socket
import struct
import sys
import time
import types

from loadgen.amqp import internals

__all__ = ["ReceiveStamps", "enable", "platform_reason", "expected_source", "SO_TIMESTAMPNS"]

MISSING = internals.check("kstamp")  # pika internals this pika lacks: then no stamps (enable says why)

# Python does not name them; Linux's values (asm-generic/socket.h: SO_TIMESTAMPNS_OLD, and the
# control message type is the same number). A 64-bit struct timespec: seconds, nanoseconds.
SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY_SPACE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


class ReceiveStamps:
    """The kernel's arrival stamp of the bytes the connection's parser is handling now (0 before
    the first read)."""

    __slots__ = ("kernel_ns",)

    def __init__(self) -> None:
        self.kernel_ns = 0


def platform_reason() -> str | None:
    """Why this platform gives no kernel receive stamps, or None when it does."""
    if SO_TIMESTAMPNS is None or not _ANCILLARY_SPACE:
        return f"{sys.platform} has no SO_TIMESTAMPNS"
    return None


def expected_source() -> dict[str, str | None]:
    """run.json's `receive_stamp`: where the consumers' receive_ns will come from, and why not the
    kernel when it will not (each consumer_join event says what its connection got)."""
    reason = platform_reason()
    return {"source": "kernel" if reason is None else "read", "reason": reason}


def enable(conn) -> ReceiveStamps | str:
    """Kernel receive stamps on `conn` (a pika connection over the gevent adapter, open): its
    ReceiveStamps, or why not (a sentence for run.json and the consumer_join event)."""
    reason = platform_reason()
    if reason is not None:
        return reason
    if MISSING:
        return f"pika {internals.pika_version()} lacks the internals sojourn reads from: {', '.join(MISSING)}"
    try:
        from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport, _AsyncSSLTransport
    except ImportError:  # pragma: no cover - a pika without the module
        return "this pika has no transport sojourn knows how to read from"
    transport = getattr(conn, "_transport", None)
    if type(transport) not in (_AsyncPlaintextTransport, _AsyncSSLTransport):
        return "no transport sojourn knows how to read from" if transport is not None else "no transport"
    if not all(hasattr(transport, n) for n in ("_sock", "_protocol", "_state", "_MAX_RECV_BYTES")):
        return "this pika's transport differs from the one sojourn knows"  # pragma: no cover
    assert transport is not None  # its type was checked above; pika is untyped here
    tls = type(transport) is _AsyncSSLTransport
    # Under TLS the socket underneath: gevent's SSLSocket keeps the real one in `_sock`.
    raw = getattr(transport._sock, "_sock", transport._sock) if tls else transport._sock
    if tls and not isinstance(raw, _socket.socket):
        return "TLS: no socket underneath to peek at"  # pragma: no cover
    try:
        raw.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError as exc:
        return f"SO_TIMESTAMPNS refused: {exc}"
    stamps = ReceiveStamps()
    if tls:
        transport._sigint_safe_recv = _recv_stamped_tls(stamps, raw)  # shadows pika's static method
    else:
        transport._consume = types.MethodType(_consume_stamped(stamps), transport)
    return stamps


def _recv_stamped_tls(stamps: ReceiveStamps, raw):
    """pika's `_sigint_safe_recv(sock, max_bytes)` for a TLS transport: the stamp of the next TLS
    record, peeked from the socket underneath, then the TLS layer's read as before. Decrypted bytes
    already waiting in the TLS layer (`pending()`) belong to the record last stamped."""
    peek, flags = _socket.socket.recvmsg, socket.MSG_PEEK | socket.MSG_DONTWAIT

    def _stamp() -> int | None:
        try:
            head, ancillary, _flags, _addr = peek(raw, 5, _ANCILLARY_SPACE, flags)
            if len(head) == 5:  # the record header: type, version, length
                length = int.from_bytes(head[3:5], "big")
                _record, ancillary, _flags, _addr = peek(raw, 5 + length, _ANCILLARY_SPACE, flags)
        except OSError:  # nothing queued (would block), or the socket is gone: the read says which
            return None
        if ancillary and ancillary[0][1] == SO_TIMESTAMPNS:
            seconds, nanoseconds = _TIMESPEC.unpack_from(ancillary[0][2])
            return seconds * 1_000_000_000 + nanoseconds
        return None

    def recv(ssl_sock, max_bytes: int) -> bytes:
        if not ssl_sock.pending():
            stamps.kernel_ns = _stamp() or time.time_ns()
        return ssl_sock.recv(max_bytes)

    return recv


def _consume_stamped(stamps: ReceiveStamps):
    """pika's _AsyncTransportBase._consume over recvmsg: the same limits, the same end-of-file and
    error handling (a would-block error goes up to pika's readability handler, as from recv), and
    the kernel's stamp of each read set before pika parses its bytes. Kept lean: it runs once per
    read in the I/O loop (docs/benchmarks.md has its cost)."""
    unpack, wall_ns, space, option = _TIMESPEC.unpack_from, time.time_ns, _ANCILLARY_SPACE, SO_TIMESTAMPNS

    def _consume(self) -> None:
        consumed = 0
        recvmsg, size, limit = self._sock.recvmsg, self._MAX_RECV_BYTES, self._MAX_CONSUME_BYTES
        while self._state == self._STATE_ACTIVE and consumed < limit:
            data, ancillary, _flags, _addr = recvmsg(size, space)
            if not data:
                raise self.RxEndOfFile()
            consumed += len(data)
            if ancillary and ancillary[0][1] == option:  # the one control message asked for
                seconds, nanoseconds = unpack(ancillary[0][2])
                stamps.kernel_ns = seconds * 1_000_000_000 + nanoseconds
            else:
                stamps.kernel_ns = wall_ns()
            self._protocol.data_received(data)

    return _consume
