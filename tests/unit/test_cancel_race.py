"""A delivery that crosses basic.cancel on the wire reaches the consumer's callback.

Real pika channel objects, fed the frames the broker would send; the connection below them is
a recorder of what pika would write (no broker: the order of frames on the wire is the point)."""

from __future__ import annotations

import pika
from pika import frame, spec

from loadgen.amqp.cancel import keep_deliveries_across_cancel


class _Wire:
    """Stands in for pika's connection: records the methods a channel sends."""

    def __init__(self):
        self.sent = []
        self.callbacks = pika.callback.CallbackManager()
        self.is_closed = False
        self.is_open = True

    def _send_method(self, channel_number, method, content=None):
        self.sent.append(method)

    def _rpc(self, *args, **kwargs):  # pragma: no cover - not reached here
        raise AssertionError("no RPC expected")


def _open_channel(wire):
    channel = pika.channel.Channel(wire, 1, lambda _ch: None)
    channel._set_state(channel.OPEN)
    return channel


def _deliver(channel, tag: str, delivery_tag: int, body: bytes = b"x") -> None:
    """What pika's connection does with the three frames of one delivery."""
    method = frame.Method(1, spec.Basic.Deliver(consumer_tag=tag, delivery_tag=delivery_tag, routing_key="q"))
    header = frame.Header(1, len(body), spec.BasicProperties(headers={"sojourn-id": f"m{delivery_tag}"}))
    for f in (method, header, frame.Body(1, body)):
        channel._handle_content_frame(f)


def _cancelling(channel, tag: str) -> None:
    channel._consumers[tag] = lambda *a: None
    channel._cancelled.add(tag)  # what basic_cancel records before cancel-ok arrives


def test_pika_alone_rejects_a_delivery_that_crosses_the_cancel_without_calling_back():
    wire = _Wire()
    channel = _open_channel(wire)
    _cancelling(channel, "ctag")
    _deliver(channel, "ctag", 7)
    assert [type(m).__name__ for m in wire.sent] == ["Reject"]  # requeued, never seen: the race
    assert wire.sent[0].delivery_tag == 7 and wire.sent[0].requeue


def test_with_the_seam_the_delivery_reaches_the_callback_and_nothing_is_rejected():
    wire = _Wire()
    channel = _open_channel(wire)
    seen = []
    keep_deliveries_across_cancel(channel, lambda ch, method, props, body: seen.append((method, props, body)))
    _cancelling(channel, "ctag")
    _deliver(channel, "ctag", 7, b"hello")
    _deliver(channel, "ctag", 8)
    assert wire.sent == []
    assert [(m.delivery_tag, p.headers["sojourn-id"], b) for m, p, b in seen] == [(7, "m7", b"hello"), (8, "m8", b"x")]


def test_deliveries_to_a_live_consumer_still_go_through_pika_to_its_own_callback():
    wire = _Wire()
    channel = _open_channel(wire)
    crossed, live = [], []
    keep_deliveries_across_cancel(channel, lambda *a: crossed.append(a))
    channel._consumers["live"] = lambda ch, method, props, body: live.append(method.delivery_tag)
    _deliver(channel, "live", 3)
    assert live == [3] and crossed == [] and wire.sent == []
