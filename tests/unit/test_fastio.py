"""loadgen.amqp.fastio: a publish goes on the wire as exactly the bytes pika would send, and the
coalescing writer sends every queued byte once, in order, whatever the socket accepts per call."""

import errno
from collections import deque
from decimal import Decimal

import pika
import pytest
from pika import frame, spec

from loadgen.amqp.fastio import COALESCE_BYTES, FrameWriter, SojournProperties, produce_coalesced

FRAME_MAX_BODY = 131_072 - 8  # pika's body frame limit at the broker's default frame_max


class _Conn:
    def __init__(self):
        self.written: list[bytes] = []
        self.bytes_sent = self.frames_sent = 0
        self._body_max_length = FRAME_MAX_BODY

    def _adapter_emit_data(self, data: bytes) -> None:
        self.written.append(data)


class _Channel:
    def __init__(self, number: int = 1, is_open: bool = True):
        self.connection = _Conn()
        self.channel_number = number
        self.is_open = is_open
        self.pika_calls: list[tuple] = []

    def basic_publish(self, exchange, routing_key, body, properties, mandatory=False):
        self.pika_calls.append((exchange, routing_key, body, properties, mandatory))


def _pika_frames(number: int, exchange: str, routing_key: str, body: bytes, props, mandatory: bool) -> list[bytes]:
    """What pika's Connection._send_message marshals for the same publish (pika's own classes)."""
    frames = [
        frame.Method(
            number, spec.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory)
        ).marshal(),
        frame.Header(number, len(body), props).marshal(),
    ]
    if body:
        frames.append(frame.Body(number, body).marshal())
    return frames


CASES = [
    ("", "sojourn.q", b"x" * 100, SojournProperties(1, "run:p/w/0:0", 1_795_292_889_153_618_331), False),
    ("orders", "eu.paid", b"y" * 4000, SojournProperties(2, "run:p/w/3:99", 1_795_292_889_153_618_331), True),
    (
        "",
        "q",
        b"",
        pika.BasicProperties(
            delivery_mode=1,
            message_id="m",
            priority=5,
            headers={"sojourn-id": "m", "sojourn-pub-ns": 2**40, "tenant": "ä", "weight": Decimal("1.5")},
        ),
        False,
    ),
    ("ex", "k" * 255, b"\x00\xce" * 50, pika.BasicProperties(), False),
]


@pytest.mark.parametrize("number", [1, 7, 65535])
@pytest.mark.parametrize("exchange,routing_key,body,props,mandatory", CASES)
def test_one_write_holding_pikas_frames(number, exchange, routing_key, body, props, mandatory):
    channel = _Channel(number)
    FrameWriter(channel).publish(exchange, routing_key, body, props, mandatory=mandatory)
    expected = _pika_frames(number, exchange, routing_key, body, props, mandatory)
    conn = channel.connection
    assert conn.written == [b"".join(expected)]
    assert (conn.bytes_sent, conn.frames_sent) == (sum(map(len, expected)), len(expected))
    assert channel.pika_calls == []


def test_the_method_frame_follows_each_publishs_exchange_key_and_mandatory_flag():
    channel = _Channel()
    publisher = FrameWriter(channel)
    props = pika.BasicProperties(delivery_mode=1)
    sends = [("a", "k1", False), ("a", "k2", False), ("b", "k1", True), ("a", "k1", False), ("a", "k1", True)]
    for exchange, key, mandatory in sends:
        publisher.publish(exchange, key, b"body", props, mandatory=mandatory)
    assert channel.connection.written == [b"".join(_pika_frames(1, e, k, b"body", props, m)) for e, k, m in sends]


def test_a_body_over_the_frame_size_and_a_closed_channel_take_pikas_own_path():
    channel = _Channel()
    props = pika.BasicProperties()
    big = b"z" * (FRAME_MAX_BODY + 1)
    FrameWriter(channel).publish("", "q", big, props)
    closed = _Channel(is_open=False)
    FrameWriter(closed).publish("", "q", b"small", props, mandatory=True)
    assert channel.pika_calls == [("", "q", big, props, False)] and channel.connection.written == []
    assert closed.pika_calls == [("", "q", b"small", props, True)] and closed.connection.written == []


@pytest.mark.parametrize("number", [1, 300])
@pytest.mark.parametrize("tag", [1, 2**32 + 5, 2**64 - 1])
@pytest.mark.parametrize("multiple", [False, True])
def test_acks_and_nacks_are_pikas_frames(number, tag, multiple):
    channel = _Channel(number)
    writer = FrameWriter(channel)
    writer.ack(tag, multiple)
    writer.nack(tag, multiple, requeue=True)
    writer.nack(tag, multiple, requeue=False)
    writer.reject(tag, requeue=False)
    writer.reject(tag, requeue=True)
    expected = [
        frame.Method(number, spec.Basic.Ack(tag, multiple)).marshal(),
        frame.Method(number, spec.Basic.Nack(tag, multiple, True)).marshal(),
        frame.Method(number, spec.Basic.Nack(tag, multiple, False)).marshal(),
        frame.Method(number, spec.Basic.Reject(tag, False)).marshal(),
        frame.Method(number, spec.Basic.Reject(tag, True)).marshal(),
    ]
    assert channel.connection.written == expected
    assert (channel.connection.bytes_sent, channel.connection.frames_sent) == (sum(map(len, expected)), 5)


def test_on_a_closed_channel_acks_and_nacks_are_pikas_calls():
    calls = []

    class Closed(_Channel):
        def basic_ack(self, tag, multiple=False):
            calls.append(("ack", tag, multiple))

        def basic_nack(self, tag, multiple=False, requeue=True):
            calls.append(("nack", tag, multiple, requeue))

        def basic_reject(self, tag, requeue=True):
            calls.append(("reject", tag, requeue))

    channel = Closed(is_open=False)
    FrameWriter(channel).ack(4)
    FrameWriter(channel).nack(5, False, False)
    FrameWriter(channel).reject(6)
    assert calls == [("ack", 4, False), ("nack", 5, False, False), ("reject", 6, False)]
    assert channel.connection.written == []


class _Socket:
    """Accepts at most `accept[i]` bytes on its i-th send; None raises EWOULDBLOCK."""

    def __init__(self, accept):
        self.accept = list(accept)
        self.received = bytearray()
        self.calls = 0

    def send(self, data):
        self.calls += 1
        limit = self.accept.pop(0) if self.accept else len(data)
        if limit is None:
            raise BlockingIOError(errno.EWOULDBLOCK, "would block")
        n = min(limit, len(data))
        self.received += bytes(data[:n])
        return n


class _Transport:
    def __init__(self, sock, chunks):
        self._sock = sock
        self._tx_buffers = deque(chunks)
        self._tx_buffered_byte_count = sum(map(len, chunks))

    @staticmethod
    def _sigint_safe_send(sock, data):
        return sock.send(data)


def _drain(transport, max_rounds=100):
    """Call produce as pika's writability handler does until the queue is empty."""
    for _ in range(max_rounds):
        try:
            produce_coalesced(transport)
        except BlockingIOError:
            assert transport._tx_buffered_byte_count == sum(map(len, transport._tx_buffers))
            continue
        if not transport._tx_buffers:
            return
    raise AssertionError("queue never emptied")


def test_queued_frames_go_out_in_order_in_one_send():
    chunks = [bytes([i % 256]) * (10 + i % 50) for i in range(300)]
    sock = _Socket([])
    transport = _Transport(sock, chunks)
    _drain(transport)
    assert bytes(sock.received) == b"".join(chunks)
    assert sock.calls == 1 and transport._tx_buffered_byte_count == 0


@pytest.mark.parametrize("accept", [[7, 1, None, 3, None, 1000, 2], [None, None, 1], [1] * 50])
def test_partial_sends_and_would_block_lose_and_repeat_nothing(accept):
    chunks = [bytes([65 + i % 26]) * (1 + i % 40) for i in range(200)]
    sock = _Socket(accept)
    transport = _Transport(sock, chunks)
    _drain(transport, max_rounds=500)
    assert bytes(sock.received) == b"".join(chunks)
    assert transport._tx_buffered_byte_count == 0


def test_no_send_is_larger_than_the_cap_plus_one_chunk():
    chunks = [b"a" * 50_000 for _ in range(10)]
    sizes = []

    class Recording(_Socket):
        def send(self, data):
            sizes.append(len(data))
            return super().send(data)

    transport = _Transport(Recording([]), chunks)
    _drain(transport)
    assert sum(sizes) == 500_000 and max(sizes) < COALESCE_BYTES + 50_000 and len(sizes) > 1


class _TunedTransport(_Transport):
    """A tuned transport as `send_now` and an ack with `now` see it."""

    def __init__(self, sock, chunks=()):
        super().__init__(sock, list(chunks))
        self._produce = produce_coalesced.__get__(self)


@pytest.mark.parametrize("accept,queued", [([], b""), ([5], b"rest"), ([None], b"all"), ([0], b"all")])
def test_an_ack_sent_now_goes_straight_to_the_socket_and_what_it_does_not_take_is_queued(accept, queued):
    sock = _Socket(accept)
    channel = _Channel()
    channel.connection._transport = _TunedTransport(sock)
    FrameWriter(channel).ack(9, now=True)
    frame_bytes = frame.Method(1, spec.Basic.Ack(9, False)).marshal()
    got = bytes(sock.received) + b"".join(channel.connection.written)
    assert got == frame_bytes  # every byte once, in order, on the socket or in pika's queue
    assert channel.connection.written == ([] if not queued else [frame_bytes[len(sock.received) :]])


def test_an_ack_sent_now_queues_behind_frames_already_waiting():
    sock = _Socket([])
    channel = _Channel()
    channel.connection._transport = _TunedTransport(sock, [b"earlier frame"])
    FrameWriter(channel).ack(9, now=True)
    assert sock.calls == 0 and channel.connection.written == [frame.Method(1, spec.Basic.Ack(9, False)).marshal()]
