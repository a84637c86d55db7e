"""`python -m tests.integration.consumer_link_child URL DIR`: tests/consumer_checks.py's and
tests/producer_checks.py's checks on pika's adapters (loadgen.amqp.link) against the broker at URL,
in this gevent-patched process as in a load generator; a queue of its own per check, deleted after
it. Prints one line per check and exits 1 when any failed (tests/integration/test_consumer_link.py)."""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402 - after the patch, as in the load generator
import time  # noqa: E402
import traceback  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pika  # noqa: E402

from loadgen.amqp import connection as amqp  # noqa: E402
from loadgen.amqp.link import PikaConsumerLink, PikaProducerLink, open_consumer_link, open_producer_link  # noqa: E402
from loadgen.amqp.topology import queue_counts  # noqa: E402
from tests import consumer_checks, producer_checks  # noqa: E402
from tests.consumer_checks import Running  # noqa: E402
from tests.producer_checks import Publishing  # noqa: E402


class Recording:
    """A ConsumerLink that records what the consumer asks of it (as the fake does), then asks
    pika's link."""

    def __init__(self) -> None:
        self.inner: PikaConsumerLink | Any = None
        self.calls: list[tuple] = []
        self.acks: list[int] = []
        self.nacks: list[tuple[int, bool]] = []

    @property
    def stamps(self):
        return self.inner.stamps

    @property
    def receive_stamp(self) -> str:
        return self.inner.receive_stamp

    @property
    def is_open(self) -> bool:
        return self.inner.is_open

    def set_prefetch(self, prefetch: int, global_qos: bool) -> None:
        self.calls.append(("qos", prefetch, global_qos))
        self.inner.set_prefetch(prefetch, global_qos)

    def consume(self, queue: str, auto_ack: bool, wait: bool = False, arguments: dict | None = None) -> None:
        self.calls.append(("consume", queue, auto_ack) + ((arguments,) if arguments else ()))
        self.inner.consume(queue, auto_ack, wait, arguments)

    def cancel(self, timeout_s: float) -> None:
        self.calls.append(("cancel",))
        self.inner.cancel(timeout_s)

    def ack(self, delivery_tag: int, multiple: bool = False, now: bool = False) -> None:
        self.acks.append(delivery_tag)
        self.inner.ack(delivery_tag, multiple, now)

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        self.nacks.append((delivery_tag, requeue))
        self.inner.nack(delivery_tag, multiple, requeue)

    def send_now(self) -> None:
        self.inner.send_now()

    def reading(self) -> bool:
        return self.inner.reading()

    def close(self, timeout_s: float) -> None:
        self.calls.append(("close",))
        self.inner.close(timeout_s)

    def crash(self, timeout_s: float) -> bool:
        self.calls.append(("crash",))
        return self.inner.crash(timeout_s)


class RecordingProducer:
    """A ProducerLink that records each publish and how many were unconfirmed as it went (as the
    fake does), then asks pika's link."""

    def __init__(self) -> None:
        self.inner: PikaProducerLink | Any = None
        self.published: list[dict] = []
        self.outstanding: list[int] = []
        self.confirmed: set[int] = set()
        self.closed = False

    @property
    def is_open(self) -> bool:
        return self.inner.is_open

    @property
    def connection_open(self) -> bool:
        return self.inner.connection_open

    def publish(self, exchange: str, routing_key: str, body: bytes, properties: Any, mandatory: bool = False) -> None:
        self.published.append({"routing_key": routing_key, "size": len(body), "id": properties.message_id})
        self.outstanding.append(len(self.published) - len(self.confirmed))
        self.inner.publish(exchange, routing_key, body, properties, mandatory)

    def send_now(self) -> None:
        self.inner.send_now()

    def write_buffered(self) -> int:
        return self.inner.write_buffered()

    def close(self) -> None:
        self.closed = True
        self.inner.close()


def main(url: str, base: Path) -> int:
    control = amqp.connect(url, name="sojourn-consumer-link-checks")
    channel = amqp.open_channel(control)

    def declare(queue: str) -> None:
        amqp.wait_for(lambda cb: channel.queue_declare(queue, callback=cb), "queue.declare", channel=channel)

    def consuming_in(queue: str):
        def open_link(name, on_close, on_message, on_crossed, on_channel_close=None, on_cancel=None):
            rec = Recording()
            rec.inner = open_consumer_link(
                connect,
                name,
                on_close,
                lambda _link, *delivery: on_message(rec, *delivery),
                lambda _link, *delivery: on_crossed(rec, *delivery),
                on_channel_close=on_channel_close and (lambda _link, *reply: on_channel_close(rec, *reply)),
                on_cancel=on_cancel and (lambda _link: on_cancel(rec)),
            )
            return rec

        def fault(r: Running, kind: str) -> None:
            if kind == "close_channel":  # an ack of a tag the channel never had: 406, the broker requeues
                r.link.inner.ack(1_000_000, now=True)
            elif kind == "cancel":  # the queue deleted under the consumer: basic.cancel
                r.run.on_declare = lambda: declare(queue)
                amqp.wait_for(lambda cb: channel.queue_delete(queue, callback=cb), "queue.delete", channel=channel)
            else:
                raise AssertionError(kind)

        def send(r: Running, ids: list[str]) -> None:
            before = r.run.counters["delivered"]
            for message_id in ids:
                props = pika.BasicProperties(headers={"sojourn-id": message_id, "sojourn-pub-ns": time.time_ns()})
                channel.basic_publish("", queue, b"x" * 100, props)
            r.until(lambda: r.run.counters["delivered"] >= before + len(ids))

        def make(consumer: str, timeline: str = "") -> Running:
            scenario = consumer_checks.scenario(base / f"{queue}.yaml", queue, consumer, timeline)
            return Running(scenario, open_link, send, lambda _r: queue_counts(channel, queue)[0], fault=fault)

        return make

    def connect(name, on_close):
        return amqp.connect(url, name=name, on_close=on_close)

    def producing_in(queue: str):
        def open_link(name, **callbacks):
            rec = RecordingProducer()
            on_confirm = callbacks.get("on_confirm")
            if on_confirm is not None:

                def confirmed(acked: bool, tag: int, multiple: bool) -> None:
                    rec.confirmed.update(range(1, tag + 1) if multiple else (tag,))
                    on_confirm(acked, tag, multiple)

                callbacks["on_confirm"] = confirmed
            rec.inner = open_producer_link(connect, name, **callbacks)
            return rec

        exchange = producer_checks.EXCHANGE

        def restore() -> None:
            amqp.wait_for(
                lambda cb: channel.exchange_declare(exchange, "direct", callback=cb),
                "exchange.declare",
                channel=channel,
            )
            amqp.wait_for(
                lambda cb: channel.queue_bind(queue, exchange, "k", callback=cb), "queue.bind", channel=channel
            )

        def fault(_p: Publishing, kind: str) -> None:
            if kind == "close_channel":  # the producer's exchange deleted: its next publish gets a 404
                amqp.wait_for(
                    lambda cb: channel.exchange_delete(exchange, callback=cb), "exchange.delete", channel=channel
                )
            elif kind == "restore":
                restore()
            else:
                raise AssertionError(kind)

        def make(producer: str, duration_s: float = 1.0) -> Publishing:
            if exchange in producer:
                restore()
            return Publishing(base / f"{queue}.yaml", queue, producer, open_link, duration_s, fault)

        return make

    producer, consumer = producer_checks, consumer_checks
    checks = [  # (name, check, the harness for its queue, more arguments)
        (
            "confirm-window",
            producer.check_the_confirm_window_bounds_what_is_unconfirmed_and_every_publish_is_confirmed,
            producing_in,
            (),
        ),
        ("buffered", consumer.check_buffered_deliveries_are_processed_in_order_and_acked, consuming_in, ()),
        (
            "prefetch-consumer",
            consumer.check_a_prefetch_change_resubscribes_per_consumer_scope,
            consuming_in,
            ("consumer",),
        ),
        (
            "prefetch-channel",
            consumer.check_a_prefetch_change_resubscribes_per_consumer_scope,
            consuming_in,
            ("channel",),
        ),
        ("crash", consumer.check_a_crash_settles_nothing_it_holds_and_the_broker_keeps_it, consuming_in, ()),
        (
            "producer-channel-closed",
            producer.check_a_channel_closed_by_the_broker_traces_what_it_left_unconfirmed_and_the_producer_reopens,
            producing_in,
            (),
        ),
        (
            "consumer-channel-closed",
            consumer.check_a_channel_closed_by_the_broker_requeues_what_the_consumer_held_and_it_rejoins,
            consuming_in,
            (),
        ),
        (
            "consumer-cancelled",
            consumer.check_a_cancel_from_the_broker_settles_the_buffer_and_the_consumer_rejoins,
            consuming_in,
            (),
        ),
    ]
    failed = 0
    for name, check, harness, args in checks:
        queue = f"sojourn.it.consumer-link.{name}.{uuid.uuid4().hex[:8]}"
        amqp.wait_for(lambda cb, q=queue: channel.queue_declare(q, callback=cb), "queue.declare", channel=channel)
        try:
            check(harness(queue), *args)
            print(f"ok {name}")
        except Exception:  # noqa: BLE001 - reported, and the exit status says so
            failed += 1
            print(f"FAILED {name}\n{traceback.format_exc()}")
        finally:
            amqp.wait_for(lambda cb, q=queue: channel.queue_delete(q, callback=cb), "queue.delete", channel=channel)
            if name == "producer-channel-closed":
                amqp.wait_for(
                    lambda cb: channel.exchange_delete(producer_checks.EXCHANGE, callback=cb),
                    "exchange.delete",
                    channel=channel,
                )
    control.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
