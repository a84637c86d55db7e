"""Kernel receive stamps (loadgen.amqp.kstamp) on a real loopback TCP socket, no broker: bytes that
wait in the socket while the reader is stalled carry the time they arrived, not the time they
were read. The read loop under test is the one the consumer's connection gets."""

from __future__ import annotations

import socket
import time
import types

import pytest

from loadgen.amqp import kstamp

pytestmark = pytest.mark.skipif(kstamp.platform_reason() is not None, reason="no SO_TIMESTAMPNS here")


def _pair():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    sender, _ = server.accept()
    server.close()
    return sender, client


class _Transport:
    """What pika's plaintext transport has that the read loop uses."""

    _STATE_ACTIVE = 1
    _MAX_RECV_BYTES = 4096
    _MAX_CONSUME_BYTES = 100 * 1024

    class RxEndOfFile(OSError):
        pass

    def __init__(self, sock, protocol):
        self._sock, self._protocol, self._state = sock, protocol, self._STATE_ACTIVE


def _read(reader: socket.socket, stamped: bool) -> list[tuple[bytes, int]]:
    """Run the stamped read loop over `reader` (as kstamp.enable installs it) until it would block:
    each chunk handed to the parser, with the stamp the parser saw."""
    if stamped:
        reader.setsockopt(socket.SOL_SOCKET, kstamp.SO_TIMESTAMPNS, 1)
    reader.setblocking(False)
    stamps = kstamp.ReceiveStamps()
    got: list[tuple[bytes, int]] = []
    protocol = types.SimpleNamespace(data_received=lambda data: got.append((data, stamps.kernel_ns)))
    transport = _Transport(reader, protocol)
    with pytest.raises(BlockingIOError):  # pika's readability handler takes this as "read all"
        kstamp._consume_stamped(stamps)(transport)
    return got


def test_bytes_read_late_carry_the_time_they_arrived():
    sender, reader = _pair()
    with sender, reader:
        reader.setsockopt(socket.SOL_SOCKET, kstamp.SO_TIMESTAMPNS, 1)
        time.sleep(0.05)  # Linux turns receive stamping on for the first such socket a moment later
        sent_ns = time.time_ns()
        sender.sendall(b"delivery")
        time.sleep(0.3)  # the stalled consumer: the bytes wait in the socket
        ((data, stamp),) = _read(reader, stamped=True)
        read_ns = time.time_ns()
    assert data == b"delivery"
    # arrived soon after the send, on loopback (100 ms of slack for a busy machine), long before
    # the read: a read-time stamp would have hidden the 300 ms in the socket
    assert sent_ns <= stamp < sent_ns + 100_000_000
    assert read_ns - stamp >= 200_000_000


def test_without_the_option_the_read_loop_stamps_at_the_read():
    sender, reader = _pair()
    with sender, reader:
        sender.sendall(b"x")
        time.sleep(0.1)
        before_ns = time.time_ns()
        ((_data, stamp),) = _read(reader, stamped=False)
    assert stamp >= before_ns  # no kernel stamp: the read's own time, the 100 ms in the socket unseen


def test_the_end_of_the_stream_is_pikas_end_of_file():
    sender, reader = _pair()
    with reader:
        sender.close()
        time.sleep(0.05)
        reader.setblocking(False)
        transport = _Transport(reader, types.SimpleNamespace(data_received=lambda data: None))
        with pytest.raises(_Transport.RxEndOfFile):
            kstamp._consume_stamped(kstamp.ReceiveStamps())(transport)


def test_run_json_says_the_kernel_stamps_the_arrivals_here():
    assert kstamp.expected_source() == {"source": "kernel", "reason": None}


def test_a_connection_that_is_not_pikas_plaintext_transport_is_left_alone():
    class NotPika:
        _transport = None

    assert kstamp.enable(NotPika()) == "no transport"
