"""The transport seam: everything a Consumer or a Producer asks of AMQP, and nothing more.

`ConsumerLink` is the protocol: one connection and channel subscribed to one queue. The consumer
sets the prefetch, consumes, cancels, acks and nacks by delivery tag, sends what is queued now,
reads the kernel's receive stamp of the bytes in hand, and closes or crashes the link. Deliveries
reach it as `on_message(link, tag, redelivered, headers, priority, size)`, in the I/O loop, and
`on_crossed` the same for a delivery that crossed a basic.cancel (loadgen.amqp.cancel). The
broker's own faults on the channel reach it as `on_channel_close(link, reply_code, reply_text)`
(the broker closed the channel, its connection still open: a 406 on an unknown delivery tag, a
delivery held past `consumer_timeout`) and `on_cancel(link)` (the broker sent basic.cancel: the
queue was deleted); a lost connection is `on_close` alone.

`ProducerLink` is the producer's: publish (properties from `message_properties`), send what is
queued now, the bytes still queued for the socket, close. The broker's answers reach it as plain
values: `on_confirm(acked, delivery_tag, multiple)`, `on_return(message_id, reply_code,
reply_text, exchange, routing_key)`, `on_blocked(reason)`, `on_unblocked()`, `on_close(exc)` and
`on_channel_close(reply_code, reply_text)` (only when the broker closed the channel while the
connection stays open: a 404 on a publish to an exchange that is gone, a 406), in the I/O loop.

`PikaConsumerLink` and `PikaProducerLink` are the production implementations: pika's
GeventConnection, publishes, acks and nacks as pre-built frames (loadgen.amqp.fastio), kernel
receive stamps (loadgen.amqp.kstamp). Unit tests drive the consumer and the producer through
in-memory fakes of the same protocols (tests/unit/fake_link.py); tests/consumer_checks.py and
tests/producer_checks.py run the same checks on pika's links against the broker
(tests/integration/test_consumer_link.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Protocol

import gevent
import pika
from pika.exceptions import ChannelClosedByBroker

from loadgen.amqp import connection as amqp, fastio, internals, kstamp
from loadgen.amqp.cancel import keep_deliveries_across_cancel

# pika's `_frame_buffer` (reading) and `_transport` (write_buffered), read with getattr and a
# neutral default, so a pika without them only loses what they tell; said once here.
internals.check("link")

__all__ = [
    "ConsumerLink",
    "OnMessage",
    "PikaConsumerLink",
    "open_consumer_link",
    "ProducerLink",
    "PikaProducerLink",
    "open_producer_link",
    "message_properties",
]

OnMessage = Callable[..., None]
"""on_message(link, delivery_tag, redelivered, headers, priority, body_size[, raw]), in the I/O loop;
`raw` = (body, properties, routing_key, exchange) only on a link opened `with_message`."""


class ConsumerLink(Protocol):
    """One consumer's connection and channel (see the module's text)."""

    stamps: kstamp.ReceiveStamps | None
    """The kernel's arrival stamp of the bytes being handled (None: the platform gives none)."""
    receive_stamp: str
    """Where receive stamps come from: "kernel", or "read (why not the kernel)"."""

    @property
    def is_open(self) -> bool: ...

    def set_prefetch(self, prefetch: int, global_qos: bool) -> None: ...

    def consume(self, queue: str, auto_ack: bool, wait: bool = False, arguments: dict | None = None) -> None:
        """Subscribe (with basic.consume `arguments`, e.g. a stream's x-stream-offset); with `wait`,
        until consume-ok, a refusal (no such queue: 404) raising BrokerOperationFailed with the
        broker's reply code (a join waits; a re-subscription for a new prefetch does not, so the
        delivery in hand is processed meanwhile)."""
        ...

    def cancel(self, timeout_s: float) -> None: ...

    def ack(self, delivery_tag: int, multiple: bool = False, now: bool = False) -> None: ...

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None: ...

    def reject(self, delivery_tag: int, requeue: bool = False) -> None: ...

    def send_now(self) -> None: ...

    def reading(self) -> bool:
        """Whether more frames already read wait to be handled (a settle can wait for them)."""
        ...

    def close(self, timeout_s: float) -> None: ...

    def crash(self, timeout_s: float) -> bool:
        """Drop the TCP connection as a crashed client does, after the settles already sent;
        True when the broker closed its end within `timeout_s` (else the link is aborted)."""
        ...


class PikaConsumerLink:
    """ConsumerLink over pika's GeventConnection (the module's text)."""

    def __init__(
        self,
        conn: Any,
        channel: Any,
        stamps: kstamp.ReceiveStamps | str,
        on_message: OnMessage,
        on_crossed: OnMessage,
        on_channel_close: Callable[[ConsumerLink, int, str], None] | None = None,
        on_cancel: Callable[[ConsumerLink], None] | None = None,
        with_message: bool = False,
    ):
        self._conn = conn
        self._channel = channel
        self.stamps = stamps if isinstance(stamps, kstamp.ReceiveStamps) else None
        self.receive_stamp = "kernel" if self.stamps is not None else f"read ({stamps})"
        self._consumer_tag: str | None = None
        self._on_message, self._on_crossed = on_message, on_crossed
        frames = fastio.FrameWriter(channel)
        self.ack = frames.ack  # bound methods: no extra call per settle
        self.nack = frames.nack
        self.reject = frames.reject
        if with_message:  # a handler's group: the body and properties go along (one more argument)
            self._deliver, self._deliver_crossed = self._deliver_message, self._deliver_crossed_message  # type: ignore[method-assign]
        keep_deliveries_across_cancel(channel, self._deliver_crossed)  # not requeued unseen (amqp/cancel.py)
        if on_channel_close is not None:
            channel.add_on_close_callback(
                lambda _ch, exc: (
                    isinstance(exc, ChannelClosedByBroker) and on_channel_close(self, exc.reply_code, exc.reply_text)
                )
            )
        if on_cancel is not None:  # the broker's basic.cancel (pika drops the consumer tag itself)
            channel.add_on_cancel_callback(lambda _frame: on_cancel(self))

    @property
    def is_open(self) -> bool:
        return bool(self._channel.is_open)

    @property
    def connection(self) -> Any:
        """pika's connection (the benchmarks wait for its write buffer to drain)."""
        return self._conn

    def set_prefetch(self, prefetch: int, global_qos: bool) -> None:
        channel = self._channel
        amqp.wait_for(
            lambda cb: channel.basic_qos(prefetch_count=prefetch, global_qos=global_qos, callback=cb),
            "basic.qos",
            channel=channel,
        )

    def consume(self, queue: str, auto_ack: bool, wait: bool = False, arguments: dict | None = None) -> None:
        channel = self._channel
        if not wait:
            self._consumer_tag = channel.basic_consume(queue, self._deliver, auto_ack=auto_ack, arguments=arguments)
            return

        def start(cb: Callable[..., None]) -> None:
            self._consumer_tag = channel.basic_consume(
                queue, self._deliver, auto_ack=auto_ack, arguments=arguments, callback=cb
            )

        amqp.wait_for(start, "basic.consume", channel=channel)

    def cancel(self, timeout_s: float) -> None:
        channel, tag = self._channel, self._consumer_tag
        amqp.wait_for(lambda cb: channel.basic_cancel(tag, callback=cb), "basic.cancel", timeout_s, channel=channel)

    def send_now(self) -> None:
        fastio.send_now(self._conn)

    def reading(self) -> bool:
        return bool(getattr(self._conn, "_frame_buffer", True))

    def close(self, timeout_s: float) -> None:
        conn = self._conn
        try:
            if conn.is_open:
                conn.close()
            _wait_closed(conn, timeout_s)
        except Exception:  # noqa: BLE001 - leaving: a close that fails leaves nothing to do
            pass

    def _deliver(self, _channel: Any, method: Any, props: Any, body: bytes) -> None:
        """pika's callback for a delivery, in the hub: handed on as plain values."""
        self._on_message(self, method.delivery_tag, method.redelivered, props.headers, props.priority, len(body))

    def _deliver_crossed(self, _channel: Any, method: Any, props: Any, body: bytes) -> None:
        """The same for a delivery that crossed a basic.cancel."""
        self._on_crossed(self, method.delivery_tag, method.redelivered, props.headers, props.priority, len(body))

    def _deliver_message(self, _channel: Any, method: Any, props: Any, body: bytes) -> None:
        """`_deliver` with the message itself: (body, properties, routing key, exchange) last."""
        raw = (body, props, method.routing_key, method.exchange)
        self._on_message(self, method.delivery_tag, method.redelivered, props.headers, props.priority, len(body), raw)

    def _deliver_crossed_message(self, _channel: Any, method: Any, props: Any, body: bytes) -> None:
        raw = (body, props, method.routing_key, method.exchange)
        self._on_crossed(self, method.delivery_tag, method.redelivered, props.headers, props.priority, len(body), raw)

    def crash(self, timeout_s: float) -> bool:
        conn = self._conn
        amqp.flush_writes(conn)  # settles traced as sent must reach the broker ahead of the FIN
        amqp.sever(conn)
        if _wait_closed(conn, timeout_s):  # pika reads until the broker's EOF: held deliveries too
            return True
        amqp.sever(conn, abort=True)
        return False


def _wait_closed(conn: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not conn.is_closed and time.monotonic() < deadline:
        gevent.sleep(0.01)
    return bool(conn.is_closed)


def open_consumer_link(
    connect: Callable[..., Any],
    name: str,
    on_close: Callable[..., None],
    on_message: OnMessage,
    on_crossed: OnMessage,
    *,
    on_channel_close: Callable[[ConsumerLink, int, str], None] | None = None,
    on_cancel: Callable[[ConsumerLink], None] | None = None,
    with_message: bool = False,
) -> PikaConsumerLink:
    """Connect (`connect(name, on_close=...)`: RunContext.connect), turn kernel receive stamps
    on, open the channel, and hand its deliveries to `on_message` (those crossing a cancel to
    `on_crossed`) as plain values; a channel the broker closes to `on_channel_close`, the broker's
    basic.cancel to `on_cancel`. `with_message`: each delivery's body, properties, routing key and
    exchange go along, as one more argument (a handler's group)."""
    conn = connect(name, on_close=on_close)
    stamps = kstamp.enable(conn)
    channel = amqp.open_channel(conn)
    return PikaConsumerLink(conn, channel, stamps, on_message, on_crossed, on_channel_close, on_cancel, with_message)


# -- the producer's link ---------------------------------------------------------


class ProducerLink(Protocol):
    """One producer's connection and channel (see the module's text)."""

    @property
    def is_open(self) -> bool: ...

    @property
    def connection_open(self) -> bool: ...

    def publish(
        self, exchange: str, routing_key: str, body: bytes, properties: Any, mandatory: bool = False
    ) -> None: ...

    def send_now(self) -> None: ...

    def write_buffered(self) -> int:
        """Bytes handed to the link and not yet to the socket."""
        ...

    def close(self) -> None: ...


class PikaProducerLink:
    """ProducerLink over pika's GeventConnection (the module's text)."""

    def __init__(self, conn: Any, channel: Any):
        self._conn = conn
        self._channel = channel
        self.publish = fastio.FrameWriter(channel).publish  # a bound method: no extra call per publish

    @property
    def is_open(self) -> bool:
        return bool(self._channel.is_open)

    @property
    def connection_open(self) -> bool:
        return bool(self._conn.is_open)

    def send_now(self) -> None:
        fastio.send_now(self._conn)

    def write_buffered(self) -> int:
        transport = getattr(self._conn, "_transport", None)
        return 0 if transport is None else int(transport.get_write_buffer_size())

    def close(self) -> None:
        try:
            if self._conn.is_open:
                self._conn.close()
        except Exception:  # noqa: BLE001 - leaving: a close that fails leaves nothing to do
            pass


def open_producer_link(
    connect: Callable[..., Any],
    name: str,
    *,
    on_close: Callable[[BaseException], None],
    on_channel_close: Callable[[int, str], None],
    on_blocked: Callable[[str], None],
    on_unblocked: Callable[[], None],
    on_return: Callable[[Any, int, str, str, str], None] | None = None,
    on_confirm: Callable[[bool, int, bool], None] | None = None,
) -> PikaProducerLink:
    """Connect (`connect(name, on_close=...)`: RunContext.connect) and open the channel; with
    `on_return`, mandatory publishes come back there; with `on_confirm`, confirms are on;
    `on_channel_close(reply_code, reply_text)` only for a channel the broker closed (a close of
    the client's own, or with the connection, is not one)."""
    conn = connect(name, on_close=lambda _conn, exc: on_close(exc))
    conn.add_on_connection_blocked_callback(lambda _conn, frame: on_blocked(getattr(frame.method, "reason", "")))
    conn.add_on_connection_unblocked_callback(lambda _conn, _frame: on_unblocked())

    def channel_closed(_channel: Any, exc: BaseException) -> None:
        if isinstance(exc, ChannelClosedByBroker):  # not the client's own close, nor a lost connection
            on_channel_close(exc.reply_code, exc.reply_text)

    channel = amqp.open_channel(conn, on_close=channel_closed)
    if on_return is not None:

        def returned(_channel: Any, method: Any, props: Any, _body: bytes) -> None:
            message_id = (props.headers or {}).get("sojourn-id")
            on_return(message_id, method.reply_code, method.reply_text, method.exchange, method.routing_key)

        channel.add_on_return_callback(returned)
    if on_confirm is not None:

        def confirmed(frame: Any) -> None:
            method = frame.method
            on_confirm(isinstance(method, pika.spec.Basic.Ack), method.delivery_tag, method.multiple)

        amqp.wait_for(lambda cb: channel.confirm_delivery(confirmed, callback=cb), "confirm.select", channel=channel)
    return PikaProducerLink(conn, channel)


def message_properties(
    delivery_mode: int, message_id: str, publish_ns: int, priority: int | None, headers: Mapping[str, Any] | None
) -> Any:
    """A publish's AMQP properties: the delivery mode, the message id and the sojourn headers
    (`sojourn-id`, `sojourn-pub-ns`) after `headers` (a replayed row's, JSON values), with the
    priority. Without a priority or other headers, fastio's pre-encoded ones (the same bytes)."""
    if priority is None and not headers:
        return fastio.SojournProperties(delivery_mode, message_id, publish_ns)
    table: dict[str, Any] = {key: _amqp_table(value) for key, value in (headers or {}).items()}
    table["sojourn-id"] = message_id
    table["sojourn-pub-ns"] = publish_ns
    return pika.BasicProperties(delivery_mode=delivery_mode, message_id=message_id, priority=priority, headers=table)


def _amqp_table(value):
    """A JSON value as pika can encode it in a header table: floats become Decimals."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {key: _amqp_table(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_amqp_table(item) for item in value]
    return value
