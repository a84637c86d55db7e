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

Where it cannot be had (a TLS connection, whose bytes are decrypted from a buffer; a platform
without SO_TIMESTAMPNS; a pika whose transport differs), `enable` returns the reason instead, and
the consumer stamps at the read as before. The attributes touched are pika's private ones, as in
loadgen.amqp.fastio.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
import types

__all__ = ["ReceiveStamps", "enable", "platform_reason", "expected_source", "SO_TIMESTAMPNS"]

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


def expected_source(broker_url: str) -> dict[str, str | None]:
    """run.json's `receive_stamp`: where the consumers' receive_ns will come from, and why not the
    kernel when it will not (each consumer_join event says what its connection got)."""
    reason = platform_reason()
    if reason is None and broker_url.lower().startswith("amqps:"):
        reason = "TLS: the bytes are read through the TLS layer"
    return {"source": "kernel" if reason is None else "read", "reason": reason}


def enable(conn) -> ReceiveStamps | str:
    """Kernel receive stamps on `conn` (a pika connection over the gevent adapter, open): its
    ReceiveStamps, or why not (a sentence for run.json and the consumer_join event)."""
    reason = platform_reason()
    if reason is not None:
        return reason
    try:
        from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport
    except ImportError:  # pragma: no cover - a pika without the module
        return "this pika has no plaintext transport to read from"
    transport = getattr(conn, "_transport", None)
    if type(transport) is not _AsyncPlaintextTransport:
        return "TLS: the bytes are read through the TLS layer" if transport is not None else "no transport"
    if not all(hasattr(transport, n) for n in ("_sock", "_protocol", "_state", "_MAX_RECV_BYTES")):
        return "this pika's transport differs from the one sojourn knows"  # pragma: no cover
    assert transport is not None  # its type was checked above; pika is untyped here
    try:
        transport._sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError as exc:
        return f"SO_TIMESTAMPNS refused: {exc}"
    stamps = ReceiveStamps()
    transport._consume = types.MethodType(_consume_stamped(stamps), transport)
    return stamps


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
