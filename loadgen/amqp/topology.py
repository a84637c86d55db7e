"""Queue and exchange declaration, binding, purge, depth and deletion on an open channel, and
TopologyError: a refused declaration worded for the user (which object, the broker's reply, what to do)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from loadgen.amqp.connection import wait_for
from loadgen.errors import BrokerOperationFailed

__all__ = [
    "declare_queue",
    "declare_queue_counts",
    "queue_depth",
    "queue_counts",
    "queue_exists",
    "purge_queue",
    "delete_queue",
    "exchange_exists",
    "declare_exchange",
    "delete_exchange",
    "bind_queue",
    "TopologyError",
    "refused",
    "missing_exchange",
]

NOT_FOUND = 404
PRECONDITION_FAILED = 406
ACCESS_REFUSED = 403
COMMAND_INVALID = 503


class TopologyError(BrokerOperationFailed):
    """The broker refused to declare or bind part of the run's topology. `what` says where the
    scenario asks for it (`scenarios/x.yaml: exchanges[0]`), `operation` names the object
    (`exchange.declare 'orders'`), `advice` what the user can do; `str()` gives all of it with
    the broker's reply."""

    def __init__(self, what: str, operation: str, reply_code: int | None, reply_text: str, advice: str):
        super().__init__(operation, reply_code, reply_text)
        self.what = what
        self.advice = advice
        code = f"{reply_code} " if reply_code is not None else ""
        reply = f": the broker refused {operation}: {code}{reply_text}" if reply_text else ""
        self.args = (f"{what}{reply}\n  {advice}",)

    def __str__(self) -> str:
        return self.args[0]


def refused(exc: BrokerOperationFailed, kind: str, name: str, where: str) -> TopologyError:
    """`exc` from declaring the `kind` ("queue", "exchange") `name`, or binding the queue to exchange
    `name` ("binding"), as a TopologyError saying what to do; `where` is "<scenario file>: <YAML path>"."""
    text = exc.reply_text or ""
    if exc.reply_code == PRECONDITION_FAILED and "inequivalent" in text:
        if kind == "queue":
            advice = (
                f"The queue already exists with other settings. Delete it with `rabbitmqctl delete_queue "
                f"{name}` (its messages go with it), or change the scenario's queue section to match it "
                f"(`rabbitmqctl list_queues name type durable auto_delete arguments` shows them)."
            )
        else:
            advice = (
                f"The exchange already exists with another type or settings. Delete it with `rabbitmqadmin "
                f"delete exchange name={name}` (needs the management plugin; any AMQP client's "
                f"exchange.delete does the same, and its bindings go with it), or change the scenario's "
                f"exchange to match it (`rabbitmqctl list_exchanges name type durable auto_delete "
                f"arguments` shows them)."
            )
    elif exc.reply_code == PRECONDITION_FAILED:
        advice = f"The broker does not accept these {kind} settings: change them in the scenario."
    elif exc.reply_code == COMMAND_INVALID and "exchange type" in text:
        advice = (
            "The broker does not know this exchange type: enable the plugin that provides it "
            "(`rabbitmq-plugins list`, `rabbitmq-plugins enable ...`) or use direct, fanout, topic or headers."
        )
    elif exc.reply_code == ACCESS_REFUSED:
        advice = f"The broker's user may not do this: use another {kind} name or grant the permission."
    elif exc.reply_code == NOT_FOUND and kind == "binding":
        advice = "The exchange does not exist: declare it in the scenario's exchanges section or create it first."
    else:
        advice = "See the broker's reply above; nothing was run."
    return TopologyError(where, exc.operation, exc.reply_code, text, advice)


def missing_exchange(name: str, where: str) -> TopologyError:
    """A producer or binding names an exchange that is neither declared by the scenario nor on the broker."""
    return TopologyError(
        f"{where}: exchange {name!r} does not exist on the broker",
        f"exchange.declare passive {name!r}",
        NOT_FOUND,
        "",
        f"Add it to the scenario's exchanges section (e.g. exchanges: [{{name: {name}, type: topic}}]) or create "
        f"it before the run.",
    )


def declare_queue(
    channel, name: str, *, durable: bool, auto_delete: bool, arguments: Mapping[str, Any], timeout_s: float = 10.0
) -> int:
    """Declare the queue and return its ready-message count. Raises BrokerOperationFailed
    (e.g. 406 PRECONDITION_FAILED when it exists with other arguments)."""
    return declare_queue_counts(
        channel, name, durable=durable, auto_delete=auto_delete, arguments=arguments, timeout_s=timeout_s
    )[0]


def declare_queue_counts(
    channel, name: str, *, durable: bool, auto_delete: bool, arguments: Mapping[str, Any], timeout_s: float = 10.0
) -> tuple[int, int]:
    """Declare the queue and return (messages ready, consumers) from its declare-ok, as declare_queue."""
    frame = wait_for(
        lambda cb: channel.queue_declare(
            name, durable=durable, auto_delete=auto_delete, arguments=dict(arguments) or None, callback=cb
        ),
        f"queue.declare {name!r}",
        timeout_s,
        channel=channel,
    )
    return frame.method.message_count, frame.method.consumer_count


def queue_depth(channel, name: str, timeout_s: float = 10.0) -> int:
    """Messages ready in the queue (not counting delivered-but-unacked ones)."""
    return queue_counts(channel, name, timeout_s)[0]


def queue_counts(channel, name: str, timeout_s: float = 10.0) -> tuple[int, int]:
    """(messages ready, consumers) of the queue, from a passive declare."""
    frame = wait_for(
        lambda cb: channel.queue_declare(name, passive=True, callback=cb),
        f"queue.declare passive {name!r}",
        timeout_s,
        channel=channel,
    )
    return frame.method.message_count, frame.method.consumer_count


def queue_exists(channel, name: str, timeout_s: float = 10.0) -> bool:
    """Passive queue.declare. A missing queue makes the broker close the channel (404
    NOT_FOUND), so pass a channel of its own; other refusals raise."""
    return _found(lambda: queue_counts(channel, name, timeout_s))


def _found(passive_declare: Callable[[], Any]) -> bool:
    """False when the passive declaration is refused with 404 NOT_FOUND; other refusals raise."""
    try:
        passive_declare()
    except BrokerOperationFailed as exc:
        if exc.reply_code == NOT_FOUND:
            return False
        raise
    return True


def purge_queue(channel, name: str, timeout_s: float = 10.0) -> int:
    frame = wait_for(
        lambda cb: channel.queue_purge(name, callback=cb), f"queue.purge {name!r}", timeout_s, channel=channel
    )
    return frame.method.message_count


def delete_queue(channel, name: str, timeout_s: float = 10.0) -> None:
    wait_for(lambda cb: channel.queue_delete(name, callback=cb), f"queue.delete {name!r}", timeout_s, channel=channel)


def exchange_exists(channel, name: str, timeout_s: float = 10.0) -> bool:
    """Passive exchange.declare. A missing exchange makes the broker close the channel
    (404 NOT_FOUND), so pass a channel of its own; other refusals raise."""
    return _found(
        lambda: wait_for(
            lambda cb: channel.exchange_declare(name, passive=True, callback=cb),
            f"exchange.declare passive {name!r}",
            timeout_s,
            channel=channel,
        )
    )


def declare_exchange(
    channel,
    name: str,
    *,
    exchange_type: str,
    durable: bool,
    auto_delete: bool = False,
    arguments: Mapping[str, Any] | None = None,
    timeout_s: float = 10.0,
) -> None:
    """Declare the exchange. Raises BrokerOperationFailed (e.g. 406 PRECONDITION_FAILED when it
    exists with another type, 503 COMMAND_INVALID for an exchange type no plugin provides)."""
    wait_for(
        lambda cb: channel.exchange_declare(
            name,
            exchange_type=exchange_type,
            durable=durable,
            auto_delete=auto_delete,
            arguments=dict(arguments or {}) or None,
            callback=cb,
        ),
        f"exchange.declare {name!r}",
        timeout_s,
        channel=channel,
    )


def delete_exchange(channel, name: str, timeout_s: float = 10.0) -> None:
    """Delete the exchange (and its bindings); deleting one that does not exist is not an error."""
    wait_for(
        lambda cb: channel.exchange_delete(name, callback=cb), f"exchange.delete {name!r}", timeout_s, channel=channel
    )


def bind_queue(
    channel,
    queue: str,
    exchange: str,
    routing_key: str,
    arguments: Mapping[str, Any] | None = None,
    timeout_s: float = 10.0,
) -> None:
    wait_for(
        lambda cb: channel.queue_bind(
            queue, exchange, routing_key=routing_key, arguments=dict(arguments or {}) or None, callback=cb
        ),
        f"queue.bind {queue!r} to {exchange!r} with {routing_key!r}",
        timeout_s,
        channel=channel,
    )
