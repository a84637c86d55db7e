"""Queue declaration, purge, depth and deletion on an open channel."""
from __future__ import annotations

from typing import Any, Mapping

from loadgen.amqp.connection import wait_for

__all__ = ["declare_queue", "queue_depth", "purge_queue", "delete_queue"]


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
    frame = wait_for(lambda cb: channel.queue_declare(name, passive=True, callback=cb),
                     f"queue.declare passive {name!r}", timeout_s, channel=channel)
    return frame.method.message_count


def purge_queue(channel, name: str, timeout_s: float = 10.0) -> int:
    frame = wait_for(lambda cb: channel.queue_purge(name, callback=cb),
                     f"queue.purge {name!r}", timeout_s, channel=channel)
    return frame.method.message_count


def delete_queue(channel, name: str, timeout_s: float = 10.0) -> None:
    wait_for(lambda cb: channel.queue_delete(name, callback=cb),
             f"queue.delete {name!r}", timeout_s, channel=channel)
