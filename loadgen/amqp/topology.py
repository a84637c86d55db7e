"""Queue and exchange declaration, binding, purge, depth and deletion on an open channel."""
from __future__ import annotations

from typing import Any, Mapping

from loadgen.amqp.connection import wait_for
from loadgen.errors import BrokerOperationFailed

__all__ = ["declare_queue", "queue_depth", "queue_counts", "purge_queue", "delete_queue", "exchange_exists",
           "declare_exchange", "bind_queue"]

NOT_FOUND = 404


def declare_queue(channel, name: str, *, durable: bool, auto_delete: bool,
                  arguments: Mapping[str, Any], timeout_s: float = 10.0) -> int:
    """Declare the queue and return its ready-message count. Raises BrokerOperationFailed
    (e.g. 406 PRECONDITION_FAILED when it exists with other arguments)."""
    frame = wait_for(lambda cb: channel.queue_declare(
        name, durable=durable, auto_delete=auto_delete, arguments=dict(arguments) or None,
        callback=cb), f"queue.declare {name!r}", timeout_s, channel=channel)
    return frame.method.message_count


def queue_depth(channel, name: str, timeout_s: float = 10.0) -> int:
    """Messages ready in the queue (not counting delivered-but-unacked ones)."""
    return queue_counts(channel, name, timeout_s)[0]


def queue_counts(channel, name: str, timeout_s: float = 10.0) -> tuple[int, int]:
    """(messages ready, consumers) of the queue, from a passive declare."""
    frame = wait_for(lambda cb: channel.queue_declare(name, passive=True, callback=cb),
                     f"queue.declare passive {name!r}", timeout_s, channel=channel)
    return frame.method.message_count, frame.method.consumer_count


def purge_queue(channel, name: str, timeout_s: float = 10.0) -> int:
    frame = wait_for(lambda cb: channel.queue_purge(name, callback=cb),
                     f"queue.purge {name!r}", timeout_s, channel=channel)
    return frame.method.message_count


def delete_queue(channel, name: str, timeout_s: float = 10.0) -> None:
    wait_for(lambda cb: channel.queue_delete(name, callback=cb),
             f"queue.delete {name!r}", timeout_s, channel=channel)


def exchange_exists(channel, name: str, timeout_s: float = 10.0) -> bool:
    """Passive exchange.declare. A missing exchange makes the broker close the channel
    (404 NOT_FOUND), so pass a channel of its own; other refusals raise."""
    try:
        wait_for(lambda cb: channel.exchange_declare(name, passive=True, callback=cb),
                 f"exchange.declare passive {name!r}", timeout_s, channel=channel)
    except BrokerOperationFailed as exc:
        if exc.reply_code == NOT_FOUND:
            return False
        raise
    return True


def declare_exchange(channel, name: str, *, exchange_type: str, durable: bool,
                     timeout_s: float = 10.0) -> None:
    wait_for(lambda cb: channel.exchange_declare(name, exchange_type=exchange_type, durable=durable,
                                                 callback=cb),
             f"exchange.declare {name!r}", timeout_s, channel=channel)


def bind_queue(channel, queue: str, exchange: str, routing_key: str, timeout_s: float = 10.0) -> None:
    wait_for(lambda cb: channel.queue_bind(queue, exchange, routing_key=routing_key, callback=cb),
             f"queue.bind {queue!r} to {exchange!r} with {routing_key!r}", timeout_s, channel=channel)
