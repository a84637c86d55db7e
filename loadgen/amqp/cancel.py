"""Deliveries that cross a basic.cancel on the wire reach the consumer like any other.

Between sending basic.cancel and receiving cancel-ok, the broker may still deliver to the
consumer tag (they cross on the wire). pika rejects such a delivery with requeue (or, for an
auto-ack consumer, drops it: the broker already counts it settled) without calling the
consumer's callback (pika.channel.Channel._on_deliver), so a load tester built on it neither
traces nor processes it: the broker's `deliver` counter ran ahead of the traces by 2 to 4 a
run, and the requeued copies came back later as redeliveries with no cause. The broker counts
such a delivery delivered to this channel, and it may be acked there like any other, so
sojourn gives it to the consumer's callback: a consumer leaving processes it with the rest of
its buffer; one re-subscribing for a new prefetch processes it as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadgen.amqp import internals

__all__ = ["keep_deliveries_across_cancel"]

MISSING = internals.check("cancel")  # pika internals this pika lacks: then the channel is left as pika made it


def keep_deliveries_across_cancel(channel: Any, on_message: Callable[[Any, Any, Any, bytes], None]) -> bool:
    """Make `channel` hand deliveries for a consumer tag it is cancelling to `on_message`
    (channel, method, properties, body) instead of rejecting or dropping them. Call once, right
    after the channel opened; deliveries for live consumers go through pika as before. A pika
    without the internals used here (MISSING, or this channel lacking them) is left alone: such a
    delivery is then requeued unseen, as pika does. Returns whether the channel was patched."""
    pika_on_deliver = getattr(channel, "_on_deliver", None)
    cancelling = getattr(channel, "_cancelled", None)  # pika's set of tags between basic.cancel and cancel-ok
    if MISSING or pika_on_deliver is None or not isinstance(cancelling, set):
        return False

    def on_deliver(method_frame: Any, header_frame: Any, body: bytes) -> None:
        if method_frame.method.consumer_tag in cancelling:
            on_message(channel, method_frame.method, header_frame.properties, body)
            return
        pika_on_deliver(method_frame, header_frame, body)

    # pika calls self._on_deliver(...) through the instance (Channel._handle_content_frame)
    channel._on_deliver = on_deliver
    return True
