"""In-memory links (loadgen.amqp.link) for driving a Consumer or a Producer in unit tests: the
broker's side (deliveries, confirms, returns, blocks, a lost connection, a channel the broker
closes, a basic.cancel from the broker) is handed over as the I/O loop would, and what the
participant asks of the link is recorded (tests/consumer_checks.py and tests/producer_checks.py
run the same checks on pika's adapters against the broker too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pika

from loadgen.errors import BrokerOperationFailed


class FakeBroker:
    """What the consumer's links share of the broker: the queues that are gone (a basic.consume on
    one closes the channel with 404, as RabbitMQ does)."""

    def __init__(self) -> None:
        self.gone: set[str] = set()


class FakeStamps:
    __slots__ = ("kernel_ns",)

    def __init__(self) -> None:
        self.kernel_ns = 0


class FakeLink:
    """One connection and channel, in memory: records what the consumer asked of it."""

    def __init__(
        self,
        name: str,
        on_close: Callable[..., None],
        on_message: Callable[..., None],
        on_crossed: Callable[..., None],
        *,
        on_channel_close: Callable[..., None] | None = None,
        on_cancel: Callable[..., None] | None = None,
        broker: FakeBroker | None = None,
        with_message: bool = False,
    ):
        self.name = name
        self.on_close, self.on_message, self.on_crossed = on_close, on_message, on_crossed
        self.on_channel_close, self.on_cancel = on_channel_close, on_cancel
        self.with_message = with_message
        self.broker = broker or FakeBroker()
        self.stamps: FakeStamps | None = FakeStamps()
        self.receive_stamp = "kernel"
        self.is_open = True
        self.calls: list[tuple] = []  # ("qos", prefetch, global), ("consume", queue, auto_ack), ("cancel",), ...
        self.acks: list[int] = []
        self.nacks: list[tuple[int, bool]] = []  # (tag, requeue)
        self.rejects: list[tuple[int, bool]] = []  # (tag, requeue)
        self.ids: dict[int, str] = {}  # delivery tag -> message id
        self._tag = 0

    # -- ConsumerLink --------------------------------------------------------
    def set_prefetch(self, prefetch: int, global_qos: bool) -> None:
        self.calls.append(("qos", prefetch, global_qos))

    def consume(self, queue: str, auto_ack: bool, wait: bool = False, arguments: dict | None = None) -> None:
        self.calls.append(("consume", queue, auto_ack) + ((arguments,) if arguments else ()))
        if queue in self.broker.gone:  # RabbitMQ closes the channel: 404 NOT_FOUND
            text = f"NOT_FOUND - no queue '{queue}' in vhost '/'"
            self.close_channel(404, text)
            if wait:  # the consume-ok waited for never comes
                raise BrokerOperationFailed("basic.consume", 404, text)

    def cancel(self, timeout_s: float) -> None:
        self.calls.append(("cancel",))

    def ack(self, delivery_tag: int, multiple: bool = False, now: bool = False) -> None:
        assert self.is_open, "an ack on a closed link"
        self.acks.append(delivery_tag)

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        assert self.is_open, "a nack on a closed link"
        self.nacks.append((delivery_tag, requeue))

    def reject(self, delivery_tag: int, requeue: bool = False) -> None:
        assert self.is_open, "a reject on a closed link"
        self.rejects.append((delivery_tag, requeue))

    def send_now(self) -> None:
        pass

    def reading(self) -> bool:
        return False

    def close(self, timeout_s: float) -> None:
        self.calls.append(("close",))
        self.is_open = False

    def crash(self, timeout_s: float) -> bool:
        self.calls.append(("crash",))
        self.is_open = False
        return True

    # -- the broker's side ------------------------------------------------------
    def deliver(
        self,
        message_id: str,
        *,
        kernel_ns: int = 0,
        size: int = 100,
        priority: int | None = None,
        crossed: bool = False,
        redelivered: bool = False,
        body: bytes = b"",
        stream_offset: int | None = None,
    ) -> int:
        """Hand the consumer one delivery, as the I/O loop does; its delivery tag. On a link opened
        `with_message` (a handler's) the body and properties go along, routing key "k"."""
        self._tag += 1
        self.ids[self._tag] = message_id
        if self.stamps is not None:
            self.stamps.kernel_ns = kernel_ns
        headers = {"sojourn-id": message_id, "sojourn-pub-ns": 1}
        if stream_offset is not None:  # a stream's broker says where in the stream it is
            headers["x-stream-offset"] = stream_offset
        deliver = self.on_crossed if crossed else self.on_message
        if self.with_message:
            properties = pika.BasicProperties(headers=headers, priority=priority)
            deliver(self, self._tag, redelivered, headers, priority, len(body), (body, properties, "k", ""))
        else:
            deliver(self, self._tag, redelivered, headers, priority, size)
        return self._tag

    def close_channel(self, reply_code: int, reply_text: str) -> None:
        """The broker closes the channel (the connection stays open): it requeues what was unacked."""
        self.is_open = False
        if self.on_channel_close is not None:
            self.on_channel_close(self, reply_code, reply_text)

    def broker_cancel(self) -> None:
        """The broker cancels the subscription (basic.cancel: the queue was deleted); the channel stays open."""
        if self.on_cancel is not None:
            self.on_cancel(self)

    def unacked(self) -> list[int]:
        """Tags neither acked, nacked nor rejected: what the broker requeues when the channel closes."""
        settled = set(self.settled())
        return [tag for tag in range(1, self._tag + 1) if tag not in settled]

    def settled(self) -> list[int]:
        return self.acks + [tag for tag, _ in self.nacks] + [tag for tag, _ in self.rejects]

    def left(self) -> int:
        """Deliveries the broker would still hold for redelivery: not acked (nacked or rejected with
        requeue, or not settled at all)."""
        gone = sum(1 for _, requeue in self.nacks + self.rejects if not requeue)
        return self._tag - len(self.acks) - gone


class FakeProducerLink:
    """A producer's connection and channel, in memory: records each publish and how many were
    unconfirmed when it went; the test confirms, returns, blocks or loses the connection."""

    def __init__(
        self,
        name: str,
        *,
        on_close: Callable[..., None],
        on_channel_close: Callable[..., None],
        on_blocked: Callable[[str], None],
        on_unblocked: Callable[[], None],
        on_return: Callable[..., None] | None = None,
        on_confirm: Callable[[bool, int, bool], None] | None = None,
    ):
        self.name = name
        self.on_close, self.on_blocked, self.on_unblocked = on_close, on_blocked, on_unblocked
        self.on_channel_close = on_channel_close
        self.on_return, self.on_confirm = on_return, on_confirm
        self.is_open = self.connection_open = True
        self.published: list[dict] = []
        self.confirmed: set[int] = set()  # tags the test confirmed (acked or nacked)
        self.outstanding: list[int] = []  # unconfirmed publishes, as each went out (itself included)
        self.closed = False

    def publish(self, exchange: str, routing_key: str, body: bytes, properties: Any, mandatory: bool = False) -> None:
        assert self.is_open, "a publish on a closed link"
        self.published.append(
            {"routing_key": routing_key, "size": len(body), "id": properties.message_id, "mandatory": mandatory}
        )
        self.outstanding.append(len(self.published) - len(self.confirmed))

    def send_now(self) -> None:
        pass

    def write_buffered(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True
        self.is_open = self.connection_open = False

    # -- the broker's side ------------------------------------------------------
    def confirm(self, tag: int, *, acked: bool = True, multiple: bool = False) -> None:
        assert self.on_confirm is not None, "confirms are off"
        self.confirmed.update(range(1, tag + 1) if multiple else (tag,))
        self.on_confirm(acked, tag, multiple)

    def lose(self, exc: BaseException) -> None:
        self.is_open = self.connection_open = False
        self.on_close(exc)

    def close_channel(self, reply_code: int, reply_text: str) -> None:
        """The broker closes the channel (a publish to an exchange that is gone), the connection
        stays open: nothing it had not confirmed will be."""
        self.is_open = False
        self.on_channel_close(reply_code, reply_text)
