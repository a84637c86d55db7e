"""The scenario's topology sections: `queue` (with `type` and checked arguments), `exchanges` and
`bindings`, and which exchanges the run must find on the broker because the scenario uses them
without declaring them. Pure: the checks follow what RabbitMQ 3.10 accepts (docs/scenarios.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from loadgen.scenario.checks import Check, Reader, amqp_name, boolean, choice, fail, integer, sub
from loadgen.scenario.errors import Invalid, show
from loadgen.scenario.fields import yaml
from loadgen.scenario.streams import STREAM_ARGUMENT_CHECKS, STREAM_REFUSES

__all__ = [
    "FrozenMapping",
    "QueueSpec",
    "ExchangeSpec",
    "BindingSpec",
    "arguments",
    "read_queue",
    "read_exchanges",
    "read_bindings",
    "required_exchanges",
    "QUEUE_TYPES",
    "EXCHANGE_TYPES",
]

QUEUE_TYPES = ("classic", "quorum", "stream")
EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
OVERFLOWS = ("drop-head", "reject-publish", "reject-publish-dlx")
HEADERS_MATCH = ("all", "any", "all-with-x", "any-with-x")
RESERVED_PREFIX = "amq."


class FrozenMapping(Mapping[str, Any]):
    """A read-only, hashable dict (queue arguments); `dict(m)` gives a plain copy."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMapping({self._data!r})"


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"expected a string, got {show(value)}")
    return value


# Queue arguments whose values decide what the broker discards: checked here so a typo is a
# scenario error before the run, not a 406 from the broker (or, for a string where a number
# belongs, a limit the broker never applies). Other arguments pass through unchecked.
_ARGUMENT_CHECKS: dict[str, Check] = {
    "x-max-length": integer(0),
    "x-max-length-bytes": integer(0),
    "x-overflow": choice(*OVERFLOWS),
    "x-message-ttl": integer(0),
    "x-max-priority": integer(1, 255),
    "x-delivery-limit": integer(1),
    "x-dead-letter-exchange": amqp_name(),
    "x-dead-letter-routing-key": amqp_name(),
    "x-queue-type": choice(*QUEUE_TYPES),
    "x-single-active-consumer": boolean,
    **STREAM_ARGUMENT_CHECKS,
}

# What a quorum queue refuses (RabbitMQ 3.10), with what to do instead.
_QUORUM_REFUSES = {
    "x-max-priority": "quorum queues have no message priorities in RabbitMQ 3.10 (use a classic queue)",
    "x-queue-mode": "x-queue-mode is a classic-queue setting; quorum queues refuse it",
}
_CLASSIC_REFUSES = {
    "x-delivery-limit": "only quorum queues count deliveries; the broker refuses x-delivery-limit on a "
    "classic queue (set queue.type: quorum)",
}


def arguments(value: Any) -> FrozenMapping:
    """A free mapping of AMQP arguments: string keys to string, number or boolean values."""
    if value is None:
        return FrozenMapping()
    if not isinstance(value, dict):
        raise Invalid(f"expected a mapping of argument name to value, got {show(value)}")
    for key, item in value.items():
        if not isinstance(key, str):
            raise Invalid(f"expected argument names to be strings, got {show(key)}", key, str(key))
        if not isinstance(item, (str, int, float, bool)):
            raise Invalid(f"expected a string, number or boolean, got {show(item)}", item, key)
    return FrozenMapping(value)


def _queue_arguments(value: Any) -> FrozenMapping:
    args = arguments(value)
    for key, check in _ARGUMENT_CHECKS.items():
        if key in args:
            sub(dict(args), key, check)
    return args


def _purge_on_start(value: Any) -> bool | None:
    """`queue.purge_on_start`: true, false, or absent/null (None: purge nothing, and refuse to start
    on a queue that existed before the run and holds messages; loadgen.run.broker_side)."""
    return None if value is None else boolean(value)


def _queue_type(value: Any) -> str | None:
    return None if value is None else cast(str, choice(*QUEUE_TYPES)(value))


@dataclass(frozen=True)
class QueueSpec:
    """The scenario's queue; read by read_queue, which checks `type`, `durable`, `auto_delete` and
    the arguments against each other."""

    name: str = field(metadata=yaml(amqp_name(nonempty=True)))
    type: str | None = field(default=None, kw_only=True, metadata=yaml(_queue_type, written_after="delete_on_end"))
    """`queue.type` as given (classic or quorum), None when absent: shorthand for `x-queue-type`,
    kept apart from `arguments` so the resolved scenario reads back as written. Listed second in
    the YAML, written last by to_dict (where run.json has always had it); keyword-only."""
    durable: bool = field(metadata=yaml(boolean, False))  # a quorum queue's default is true: see read_queue
    auto_delete: bool = field(metadata=yaml(boolean, False))
    arguments: FrozenMapping = field(metadata=yaml(_queue_arguments, FrozenMapping(), layout="{}"))
    purge_on_start: bool | None = field(metadata=yaml(_purge_on_start, None))
    """What to do with messages a queue that existed before the run holds: True purges them, False
    keeps them and starts anyway, None (the key absent) refuses to start. A queue the run creates
    needs neither (docs/own-broker.md, "What sojourn does to a queue that was there before")."""
    delete_on_end: bool = field(metadata=yaml(boolean, False))

    @property
    def queue_type(self) -> str:
        """The type the broker makes: `type`, else the `x-queue-type` argument, else classic."""
        return self.type or str(self.arguments.get("x-queue-type", "classic"))

    @property
    def stream(self) -> bool:
        """Whether the queue is a stream: an append-only log every consumer group reads whole."""
        return self.queue_type == "stream"

    @property
    def single_active_consumer(self) -> bool:
        """Whether the broker delivers to one consumer at a time (`x-single-active-consumer: true`)."""
        return self.arguments.get("x-single-active-consumer") is True

    def declare_arguments(self) -> dict[str, Any]:
        """The arguments of queue.declare: `arguments` plus `x-queue-type` when `type` is given."""
        return {**self.arguments, "x-queue-type": self.type} if self.type else dict(self.arguments)


def read_queue(top: Reader) -> QueueSpec:
    """The `queue` section; `type` and the arguments are checked against each other."""
    q = top.section("queue", "queue", required=True)
    source = top.source
    name = q.field(QueueSpec, "name")
    args = q.field(QueueSpec, "arguments")
    given = q.field(QueueSpec, "type")
    explicit = args.get("x-queue-type")
    if given is not None and explicit is not None and explicit != given:
        fail(
            source,
            "queue.type",
            given,
            f"conflicts with queue.arguments.x-queue-type ({explicit!r}); give the type once",
        )
    kind = given or explicit or "classic"
    durable = q.field(QueueSpec, "durable", kind in ("quorum", "stream"))
    auto_delete = q.field(QueueSpec, "auto_delete")
    if kind == "stream":
        _stream_rules(source, q, durable, auto_delete, args)
    else:
        for key in STREAM_ARGUMENT_CHECKS:
            if key in args:
                fail(
                    source,
                    f"queue.arguments.{key}",
                    args[key],
                    f"a stream's argument, which a {kind} queue does not apply: set queue.type: stream, or remove it",
                )
    if kind == "quorum":
        if not durable:
            fail(
                source,
                "queue.durable",
                durable,
                "a quorum queue is always durable (the broker refuses "
                "durable: false); remove the key or set durable: true",
            )
        if auto_delete:
            fail(
                source,
                "queue.auto_delete",
                auto_delete,
                "quorum queues can not be auto-deleted "
                "(the broker refuses it); use delete_on_end: true to remove it after the run",
            )
        _refuse(source, args, _QUORUM_REFUSES)
        if args.get("x-overflow") == "reject-publish-dlx":
            fail(
                source,
                "queue.arguments.x-overflow",
                "reject-publish-dlx",
                "quorum queues do not support reject-publish-dlx in RabbitMQ 3.10: the broker accepts it "
                "and then drops from the head instead; use reject-publish (nacks) or drop-head "
                "(dead-letters)",
            )
    else:
        _refuse(source, args, _CLASSIC_REFUSES)
    return QueueSpec(
        **q.fields(QueueSpec, name=name, type=given, durable=durable, auto_delete=auto_delete, arguments=args)
    )


def _refuse(source: str, args: FrozenMapping, refuses: dict[str, str]) -> None:
    """Fail on the first argument of `refuses` (argument -> why this queue type refuses it) in `args`."""
    for key, why in refuses.items():
        if key in args:
            fail(source, f"queue.arguments.{key}", args[key], why)


def _stream_rules(source: str, q: Reader, durable: bool, auto_delete: bool, args: FrozenMapping) -> None:
    """What a stream refuses: to be transient or auto-deleted, the arguments of queues that remove
    messages (STREAM_REFUSES), and a purge (the broker can not purge a stream: it closes the
    connection with NOT_IMPLEMENTED)."""
    if not durable:
        fail(source, "queue.durable", durable, "a stream is always durable; remove the key or set durable: true")
    if auto_delete:
        fail(
            source,
            "queue.auto_delete",
            auto_delete,
            "a stream can not be auto-deleted; use delete_on_end: true to remove it after the run",
        )
    _refuse(source, args, STREAM_REFUSES)
    if q.raw.get("purge_on_start") is True:
        fail(
            source,
            "queue.purge_on_start",
            True,
            "RabbitMQ can not purge a stream; to start from an empty stream use a new queue.name, or "
            "delete the old stream (sojourn never does), or leave the key out and read from offset: next",
        )


def _exchange_type(value: Any) -> str:
    if isinstance(value, str) and (value in EXCHANGE_TYPES or (value.startswith("x-") and len(value) > 2)):
        return value
    raise Invalid(
        f"expected one of {', '.join(EXCHANGE_TYPES)} or a plugin's x- type (e.g. x-consistent-hash), got {show(value)}"
    )


def _exchange_name(value: Any) -> str:
    name = amqp_name(nonempty=True)(value)
    if name.startswith(RESERVED_PREFIX):
        raise Invalid(
            f"names starting with {RESERVED_PREFIX!r} are the broker's own exchanges and can not be "
            "declared; to use one (e.g. amq.topic), name it in bindings or a producer's exchange "
            "without declaring it"
        )
    return str(name)


def _binding_exchange(value: Any) -> str:
    if value == "":
        raise Invalid(
            'the default exchange ("") reaches every queue by its name and can not be bound to; '
            'publish with exchange "" and routing_key the queue\'s name instead'
        )
    return cast(str, amqp_name(nonempty=True)(value))


@dataclass(frozen=True)
class ExchangeSpec:
    """An exchange the run declares before its queue (docs/scenarios.md, `exchanges`)."""

    name: str = field(metadata=yaml(_exchange_name))
    type: str = field(metadata=yaml(_exchange_type))
    durable: bool = field(default=True, metadata=yaml(boolean))
    auto_delete: bool = field(default=False, metadata=yaml(boolean))
    arguments: FrozenMapping = field(default_factory=FrozenMapping, metadata=yaml(arguments, layout="{}"))
    delete_on_end: bool = field(default=False, metadata=yaml(boolean))


@dataclass(frozen=True)
class BindingSpec:
    """A binding of the scenario's queue to `exchange`, made after the queue is declared."""

    exchange: str = field(metadata=yaml(_binding_exchange))
    routing_key: str = field(default="", metadata=yaml(amqp_name()))
    arguments: FrozenMapping = field(default_factory=FrozenMapping, metadata=yaml(arguments, layout="{}"))


def read_exchanges(top: Reader) -> tuple[ExchangeSpec, ...]:
    """The `exchanges` list, in declaration order; names are unique."""
    out: list[ExchangeSpec] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(top.items("exchanges")):
        x = top.at(raw, f"exchanges[{i}]", "exchange")
        name = x.field(ExchangeSpec, "name")
        if name in seen:
            fail(
                top.source,
                f"exchanges[{i}].name",
                name,
                f"duplicate name: exchanges[{seen[name]}] is also called {name!r}",
            )
        seen[name] = i
        out.append(ExchangeSpec(**x.fields(ExchangeSpec, name=name)))
    return tuple(out)


def read_bindings(top: Reader, exchanges: tuple[ExchangeSpec, ...]) -> tuple[BindingSpec, ...]:
    """The `bindings` list (the scenario's queue to each exchange); no binding twice."""
    declared = {x.name: x for x in exchanges}
    out: list[BindingSpec] = []
    seen: dict[BindingSpec, int] = {}
    for i, raw in enumerate(top.items("bindings")):
        b = top.at(raw, f"bindings[{i}]", "binding")
        binding = BindingSpec(**b.fields(BindingSpec))
        target = declared.get(binding.exchange)
        if target is not None and target.type == "headers" and "x-match" in binding.arguments:
            b.get("arguments", lambda v: sub(v, "x-match", choice(*HEADERS_MATCH)))
        if binding in seen:
            fail(top.source, f"bindings[{i}]", raw, f"the same binding as bindings[{seen[binding]}]")
        seen[binding] = i
        out.append(binding)
    return tuple(out)


def required_exchanges(scenario: Any) -> list[tuple[str, str]]:
    """(exchange, YAML path of its first use) for every exchange the scenario publishes to or binds
    to without declaring it: the run checks that each exists before it starts."""
    declared = {x.name for x in scenario.exchanges}
    uses = [(f"producers[{i}].exchange", p.exchange) for i, p in enumerate(scenario.producers)]
    uses += [(f"bindings[{i}].exchange", b.exchange) for i, b in enumerate(scenario.bindings)]
    out: dict[str, str] = {}
    for path, name in uses:
        if name and name not in declared and name not in out:
            out[name] = path
    return list(out.items())
