"""Kernel receive stamps (loadgen.amqp.kstamp) on a real loopback TCP socket, no broker: bytes that
wait in the socket while the reader is stalled carry the time they arrived, not the time they
were read."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from loadgen.amqp import kstamp

pytestmark = pytest.mark.skipif(kstamp.platform_reason() is not None, reason="no SO_TIMESTAMPNS here")


def _pair():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    sender, _ = server.accept()
    server.close()
    return sender, client


def test_bytes_read_late_carry_the_time_they_arrived():
    sender, reader = _pair()
    with sender, reader:
        reader.setsockopt(socket.SOL_SOCKET, kstamp.SO_TIMESTAMPNS, 1)
        sent_ns = time.time_ns()
        sender.sendall(b"delivery")
        time.sleep(0.2)  # the stalled consumer: the bytes wait in the socket
        data, ancillary, _flags, _addr = reader.recvmsg(4096, socket.CMSG_SPACE(16))
        read_ns = time.time_ns()
    stamp = kstamp.kernel_stamp(ancillary)
    assert data == b"delivery" and stamp is not None
    assert sent_ns <= stamp < sent_ns + 20_000_000  # arrived within 20 ms of the send, on loopback
    assert read_ns - stamp >= 190_000_000  # a read-time stamp would have hidden the 200 ms in the socket


def test_without_the_option_there_is_no_stamp_and_the_reader_falls_back():
    sender, reader = _pair()
    with sender, reader:
        sender.sendall(b"x")
        time.sleep(0.05)
        _data, ancillary, _flags, _addr = reader.recvmsg(4096, socket.CMSG_SPACE(16))
    assert kstamp.kernel_stamp(ancillary) is None


def test_the_stamp_is_read_from_a_timespec_control_message():
    message = struct.pack("@qq", 1_763_733_600, 123_456_789)
    assert kstamp.kernel_stamp([(socket.SOL_SOCKET, kstamp.SO_TIMESTAMPNS, message)]) == 1_763_733_600_123_456_789
    assert kstamp.kernel_stamp([(socket.SOL_SOCKET, 99, message)]) is None


def test_run_json_says_tls_connections_are_stamped_at_the_read():
    assert kstamp.expected_source("amqp://guest:guest@127.0.0.1:5672/") == {"source": "kernel", "reason": None}
    tls = kstamp.expected_source("amqps://guest:guest@broker.example:5671/")
    assert tls["source"] == "read" and "TLS" in tls["reason"]


def test_a_connection_that_is_not_pikas_plaintext_transport_is_left_alone():
    class NotPika:
        _transport = None

    assert kstamp.enable(NotPika()) == "no transport"
