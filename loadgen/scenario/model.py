"""The scenario as frozen, typed objects, already validated by the loader; plus the YAML layout.

A `Scenario` is the base configuration and its timeline; `Scenario.at(t)` gives the effective
settings at elapsed time `t` (base plus the active phase's `set`). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from analysis.slo import SloError, parse_slo
from loadgen.redact import mask_url
from loadgen.scenario import arrivals
from loadgen.scenario.arrivals import Bursts, RatePoints, ReplaySpec
from loadgen.scenario.broker import Broker, ManagedSpec
from loadgen.scenario.buffers import CoDelSpec, EgressSpec, codel, egress
from loadgen.scenario.checks import (
    MAX_SIZE_BYTES,
    amqp_name,
    boolean,
    choice,
    identifier,
    integer,
    number,
    optional_number,
    text,
)
from loadgen.scenario.errors import Invalid, show
from loadgen.scenario.fields import LEAF, declared, layout, plain_dict, yaml
from loadgen.scenario.handler import HandlerSpec
from loadgen.scenario.outcomes import OutcomeRates, outcomes
from loadgen.scenario.processing import PROCESSING_LAYOUT, PROCESSING_PARAMS, Processing, processing
from loadgen.scenario.streams import stream_offset
from loadgen.scenario.topology import BindingSpec, ExchangeSpec, FrozenMapping, QueueSpec

__all__ = [
    "BASE_PHASE",
    "YAML_LAYOUT",
    "PROCESSING_PARAMS",
    "PHASE_SETTABLE",
    "LEAF",
    "NETWORK_PATHS",
    "FrozenMapping",
    "Processing",
    "ManagedSpec",
    "Broker",
    "QueueSpec",
    "ExchangeSpec",
    "BindingSpec",
    "RunSpec",
    "ProducerGroup",
    "Bursts",
    "ReplaySpec",
    "CoDelSpec",
    "EgressSpec",
    "OutcomeRates",
    "HandlerSpec",
    "ConsumerGroup",
    "LinkSpec",
    "NetworkSpec",
    "Phase",
    "Scenario",
]

BASE_PHASE = "base"
"""The name of the implicit phase: time not covered by any timeline phase."""

GroupKind = Literal["producers", "consumers"]


@dataclass(frozen=True)
class RunSpec:
    duration_s: float = field(metadata=yaml(number(0, strict=True)))  # a replay may supply it, see loader
    warmup_s: float = field(metadata=yaml(number(0), 0.0))  # < duration_s, see loader
    drain_timeout_s: float = field(metadata=yaml(number(0), 30.0))
    beyond_limits: bool = field(default=False, metadata=yaml(boolean))
    """loadgen/scenario/limits.py: run values beyond LIMITS anyway."""


@dataclass(frozen=True)
class ProducerGroup:
    """`count` producers, each publishing at `rate` msg/s (per producer, not per group).

    `rate` is a number or a profile of (at_s, rate) points: linear ramps between points, a step
    where two points share a time. With `replay`, times, sizes and keys come from the file and
    `rate`, `arrival`, `bursts` do not apply (`rate` is 0.0 there)."""

    name: str = field(metadata=yaml(identifier))
    count: int = field(metadata=yaml(integer(0), 1))
    rate: float | RatePoints = field(metadata=yaml(arrivals.rate, None))  # None: given or a replay, see loader
    arrival: str = field(metadata=yaml(choice("constant", "poisson"), "constant"))
    size_bytes: int = field(metadata=yaml(integer(0, MAX_SIZE_BYTES), 100))
    persistent: bool = field(metadata=yaml(boolean, False))
    confirms: bool = field(metadata=yaml(boolean, True))
    confirm_window: int = field(metadata=yaml(integer(1), 100))
    exchange: str = field(metadata=yaml(amqp_name(), ""))
    routing_key: str = field(metadata=yaml(amqp_name(nullable=True), None))  # None: the queue's name
    bursts: Bursts | None = field(default=None, metadata=yaml(arrivals.bursts, layout="bursts"))
    replay: ReplaySpec | None = field(default=None, metadata=yaml(None, layout="replay"))  # checked in the loader
    mandatory: bool = field(default=False, metadata=yaml(boolean))
    """basic.publish mandatory: the broker returns a message no queue takes (outcome `returned`)."""
    priority: tuple[tuple[int, float], ...] | None = field(default=None, metadata=yaml(arrivals.priority))
    """The AMQP priority mix: (priority, probability) pairs summing to 1; None: no priority."""
    max_blocked_wait_s: float | None = field(
        default=None, metadata=yaml(optional_number(0, strict=True, null_means="wait as long as it takes"))
    )
    """While the broker blocks the connection (a resource alarm), a publish waits at most this
    long, then is given up (outcome `blocked_timeout`); None: it waits as long as it takes."""

    def rate_text(self) -> str:
        """How the rate reads in a console line: '150', or '50 -> 500 (profile)'."""
        if self.replay is not None:
            return f"replay of {self.replay.path}"
        if isinstance(self.rate, tuple):
            return f"{' -> '.join(f'{r:g}' for _, r in self.rate)} (profile)"
        return f"{self.rate:g}"

    def to_dict(self) -> dict[str, Any]:
        return plain_dict(self)


def _optional_offset(value: Any) -> str | int | None:
    return None if value is None else stream_offset(value)


@dataclass(frozen=True)
class ConsumerGroup:
    name: str = field(metadata=yaml(identifier))
    count: int = field(metadata=yaml(integer(0), 1))
    prefetch: int = field(metadata=yaml(integer(0, 65535), 100))
    prefetch_scope: str = field(metadata=yaml(choice("consumer", "channel"), "consumer"))
    ack_mode: str = field(metadata=yaml(choice("manual", "auto"), "manual"))
    processing: Processing = field(metadata=yaml(processing, Processing.fixed(0.0), "processing_ms", "processing"))
    codel: CoDelSpec | None = field(default=None, metadata=yaml(codel, layout="codel"))
    """None: CoDel off."""
    leave: str = field(default="clean", metadata=yaml(choice("clean", "crash")))
    """How a consumer goes when its slot drops out of `count`: "clean" (cancel, process and ack its
    buffer, close) or "crash" (process the delivery in hand without acking it, then drop the TCP
    connection without a word, so the broker requeues every unacked delivery)."""
    egress: EgressSpec | None = field(default=None, metadata=yaml(egress, layout="egress"))
    """None: the client buffer is one unbounded FIFO (bounded only by the prefetch)."""
    outcomes: OutcomeRates | None = field(default=None, metadata=yaml(outcomes, layout="outcomes"))
    """None: every processed delivery is acked (loadgen/scenario/outcomes.py)."""
    handler: HandlerSpec | None = field(default=None, metadata=yaml(None, layout="handler"))
    """None: simulated processing (`processing`); else the user's function (loadgen/scenario/handler.py),
    checked by the loader, which imports it from the scenario's directory."""
    offset: str | int | None = field(default=None, metadata=yaml(_optional_offset))
    """Where a stream consumer starts reading (`x-stream-offset`, loadgen/scenario/streams.py): first,
    last, next, an offset or an ISO 8601 timestamp; None on a queue that is not a stream, and on a
    stream the broker's default, next."""

    def to_dict(self) -> dict[str, Any]:
        return plain_dict(self)


@dataclass(frozen=True)
class LinkSpec:
    """One direction of the delay-line proxy: a fixed delay, a uniform extra delay per chunk
    (order is kept) and a bandwidth cap in bytes per second (None: unlimited)."""

    latency_ms: float = field(metadata=yaml(number(0), 0.0))
    jitter_ms: float = field(metadata=yaml(number(0), 0.0))
    bandwidth_bytes_per_s: float | None = field(
        metadata=yaml(optional_number(0, strict=True, null_means="unlimited"), None)
    )

    @classmethod
    def unimpaired(cls) -> LinkSpec:
        return cls(0.0, 0.0, None)


@dataclass(frozen=True)
class NetworkSpec:
    """The delay-line proxy between the workers and the broker (see docs/network.md).

    `upstream` is client -> broker, `downstream` broker -> client (Toxiproxy's names).
    `down`: connections are cut and new ones refused while true. `reset_peer`: established
    connections are reset when it becomes true. Both are levels; acting on the change is the
    proxy's job.
    """

    listen_port: int = field(metadata=yaml(integer(0, 65535), 0))
    upstream: LinkSpec = field(metadata=yaml(None, layout="link"))  # a section: see sections.read_network
    downstream: LinkSpec = field(metadata=yaml(None, layout="link"))
    down: bool = field(metadata=yaml(boolean, False))
    reset_peer: bool = field(metadata=yaml(boolean, False))

    def with_settings(self, settings: Mapping[str, Any]) -> NetworkSpec:
        """A copy with {path below `network.`: value} applied, e.g. {"upstream.latency_ms": 50}."""
        top: dict[str, Any] = {}
        links: dict[str, dict[str, Any]] = {}
        for path, value in settings.items():
            link, dot, key = path.partition(".")
            if dot:
                links.setdefault(link, {})[key] = value
            else:
                top[path] = value
        for link, changes in links.items():
            top[link] = replace(getattr(self, link), **changes)
        return replace(self, **top)


def _phase_end(value: Any) -> float | None:
    return None if value is None else number(0)(value)


@dataclass(frozen=True)
class Phase:
    """A window [start_s, end_s) whose `set` replaces base fields.

    `set` holds (canonical path, validated value) pairs sorted by path; paths read
    `producers.<group name>.<field>` with YAML field names (`processing_ms` -> Processing),
    or `network.<path>` with a path from PHASE_SETTABLE["network"] (`network.down`).
    """

    name: str = field(metadata=yaml(identifier))  # not "base", and unique: see loader
    start_s: float = field(metadata=yaml(number(0)))  # < run.duration_s, and no overlap: see loader
    end_s: float = field(metadata=yaml(_phase_end, None))
    """The YAML's end_s; absent or null (None): the next phase's start, else the run's end (loader)."""
    set: tuple[tuple[str, Any], ...] = field(metadata=yaml(None, (), layout="{set}"))
    """Each path's check depends on the groups and the network: the loader's _phase_set."""


def _description(value: Any) -> str:
    return text(nullable=True)(value) or ""  # null: none


def _slo(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Invalid(f"expected a list, got {show(value)}")
    for i, expr in enumerate(value):
        try:
            parse_slo(expr)
        except SloError as err:
            raise Invalid(str(err), expr, f"[{i}]") from None
    return tuple(value)


@dataclass(frozen=True)
class Scenario:
    """A resolved scenario. Equality ignores `source_path` and `overrides` (where it came from).

    `overrides` are the `--set` texts as given; they may hold a broker password, so mask
    them (`loadgen.redact.mask_text`) before writing them anywhere.
    """

    name: str = field(metadata=yaml(identifier))
    description: str = field(metadata=yaml(_description, ""))
    source_path: str = field(compare=False)
    overrides: tuple[str, ...] = field(compare=False)
    # The sections (check None) are read by the loader, each by its own reader, in the order their
    # dependencies set (loader._build); their layout names what lies below each key. broker, queue
    # and run declare no default: the loader says what their absence means (queue is required).
    broker: Broker = field(metadata=yaml(None, layout="broker"))
    queue: QueueSpec = field(metadata=yaml(None, layout="queue"))
    run: RunSpec = field(metadata=yaml(None, layout="run"))
    producers: tuple[ProducerGroup, ...] = field(metadata=yaml(None, (), layout="[producer]"))
    consumers: tuple[ConsumerGroup, ...] = field(metadata=yaml(None, (), layout="[consumer]"))
    timeline: tuple[Phase, ...] = field(metadata=yaml(None, (), layout="[phase]"))
    slo: tuple[str, ...] = field(metadata=yaml(_slo, (), layout="[]"))
    network: NetworkSpec | None = field(default=None, metadata=yaml(None, layout="network"))
    """None: workers talk to the broker directly, no delay-line proxy."""
    exchanges: tuple[ExchangeSpec, ...] = field(
        default=(), metadata=yaml(None, layout="[exchange]", written_after="queue")
    )
    """Declared before the queue, in this order. Listed last in the YAML layout, written after the
    queue by to_dict (as run.json has always had them)."""
    bindings: tuple[BindingSpec, ...] = field(
        default=(), metadata=yaml(None, layout="[binding]", written_after="exchanges")
    )
    """The queue's bindings, made after it is declared."""

    def __post_init__(self) -> None:
        # Not dataclass fields: a per-phase memo, and (on effective copies) the base scenario.
        object.__setattr__(self, "_effective", {})
        object.__setattr__(self, "_base", None)

    def phase_at(self, t_s: float) -> str:
        """The name of the phase active at elapsed time `t_s`, or `"base"`."""
        for phase in self.timeline:
            if phase.start_s <= t_s < phase.end_s:
                return phase.name
        return BASE_PHASE

    def at(self, t_s: float) -> Scenario:
        """The effective settings at elapsed time `t_s`: the base plus the active phase's set."""
        base: Scenario = self._base or self  # type: ignore[attr-defined]
        name = base.phase_at(t_s)
        if name == BASE_PHASE:
            return base
        memo: dict[str, Scenario] = base._effective  # type: ignore[attr-defined]
        if name not in memo:
            phase = next(p for p in base.timeline if p.name == name)
            effective = base._with_phase(phase)
            object.__setattr__(effective, "_base", base)
            memo[name] = effective
        return memo[name]

    def _with_phase(self, phase: Phase) -> Scenario:
        changes: dict[tuple[str, str], dict[str, Any]] = {}
        network: dict[str, Any] = {}
        for path, value in phase.set:
            kind, _, rest = path.partition(".")
            if kind == "network":
                network[rest] = value
                continue
            group, _, fieldname = rest.rpartition(".")
            attr = "processing" if fieldname == "processing_ms" else fieldname
            changes.setdefault((kind, group), {})[attr] = value
        producers = tuple(replace(g, **changes.get(("producers", g.name), {})) for g in self.producers)
        consumers = tuple(replace(g, **changes.get(("consumers", g.name), {})) for g in self.consumers)
        # The loader refuses network paths in a phase when the scenario has no network section.
        changed_network = self.network.with_settings(network) if network and self.network else self.network
        return replace(self, producers=producers, consumers=consumers, network=changed_network)

    def producer(self, name: str) -> ProducerGroup:
        for group in self.producers:
            if group.name == name:
                return group
        raise KeyError(f"no producer group {name!r}; groups: {[g.name for g in self.producers]}")

    def consumer(self, name: str) -> ConsumerGroup:
        for group in self.consumers:
            if group.name == name:
                return group
        raise KeyError(f"no consumer group {name!r}; groups: {[g.name for g in self.consumers]}")

    def max_count(self, kind: GroupKind, group: str) -> int:
        """The largest `count` of a group over the base and every phase (how many to start)."""
        base = self.producer(group) if kind == "producers" else self.consumer(group)
        counts = [base.count]
        for phase in self.timeline:
            counts += [value for path, value in phase.set if path == f"{kind}.{group}.count"]
        return max(counts)

    def participant_count(self) -> int:
        """How many producers and consumers the run starts (one Locust user each): every group's
        max_count, since a slot a phase leaves idle is still started and waits."""
        return sum(max(0, self.max_count(kind, g.name)) for kind, groups in self.groups() for g in groups)

    def groups(self) -> tuple[tuple[GroupKind, tuple[Any, ...]], tuple[GroupKind, tuple[Any, ...]]]:
        return (("producers", tuple(self.producers)), ("consumers", tuple(self.consumers)))

    def phase_windows(self) -> list[tuple[str, float, float]]:
        return [(p.name, p.start_s, p.end_s) for p in self.timeline]

    def change_times(self) -> list[float]:
        """Sorted distinct times strictly inside (0, duration) where a phase starts or ends."""
        times = {t for p in self.timeline for t in (p.start_s, p.end_s)}
        return sorted(t for t in times if 0 < t < self.run.duration_s)

    def boundaries(self) -> list[float]:
        """0.0 and then change_times(): every time from which new settings may hold (0, because the
        start-up before t0 runs on the first settings and a phase may start at 0)."""
        return [0.0, *self.change_times()]

    def settings_over_time(self) -> list[Scenario]:
        """The effective settings from each boundary on (at(t) for t in boundaries()): every
        combination of settings the run goes through, for checks that must hold in all of them."""
        return [self.at(t) for t in self.boundaries()]

    def in_run(self, t_s: float) -> float:
        """`t_s`, or the run's last moment when later: the drain keeps the run's final conditions."""
        return min(t_s, self.run.duration_s - 1e-9)

    def settings_at(self, t_s: float) -> Scenario:
        """The settings in force at elapsed time `t_s`, the drain included (at(in_run(t_s)))."""
        return self.at(self.in_run(t_s))

    def with_broker_url(self, url: str) -> Scenario:
        """This scenario on the broker at `url` (a private node standing in for an unreachable
        default broker), as `--set broker.url=URL` would give it: the override is recorded too."""
        broker = replace(self.broker, url=url, url_is_default=False)
        return replace(self, broker=broker, overrides=(*self.overrides, f"broker.url={url}"))

    def to_dict(self, mask_password: bool = True) -> dict[str, Any]:
        """The resolved scenario as plain data in the YAML layout; loader.load_resolved reads it back
        into an equal Scenario (tests/unit/test_resolved_scenario.py)."""
        out = plain_dict(self)
        if mask_password:
            out["broker"]["url"] = mask_url(self.broker.url)
        return out


# Which keys each YAML section allows and what lies below each key: LEAF (a value),
# another section's name (a mapping), "[section]" (a list of named groups), "[]" (a list
# of values), "{}" (a free mapping) or "{set}" (a phase's path -> value mapping).
# `layout(cls)`: the keys declared on the fields of `cls` (fields.py), in field order. `processing`
# is not a dataclass of its keys (they depend on the distribution): its layout follows from
# PROCESSING_PARAMS, as its parser and to_dict do.
YAML_LAYOUT: dict[str, dict[str, str]] = {
    "scenario": layout(Scenario),
    "broker": layout(Broker),
    "managed": layout(ManagedSpec),
    "queue": layout(QueueSpec),
    "exchange": layout(ExchangeSpec),
    "binding": layout(BindingSpec),
    "run": layout(RunSpec),
    "producer": layout(ProducerGroup),
    "bursts": layout(Bursts),
    "replay": layout(ReplaySpec),
    "consumer": layout(ConsumerGroup),
    "egress": layout(EgressSpec),
    "codel": layout(CoDelSpec),
    "outcomes": layout(OutcomeRates),
    "handler": layout(HandlerSpec),
    "network": layout(NetworkSpec),
    "link": layout(LinkSpec),
    "phase": layout(Phase),
    "processing": PROCESSING_LAYOUT,
}

# Every leaf of the network section, as a path below `network.`, in field order.
NETWORK_PATHS: tuple[str, ...] = tuple(
    path
    for _, spec in declared(NetworkSpec)
    for path in ([f"{spec.key}.{key}" for key in YAML_LAYOUT["link"]] if spec.layout == "link" else [spec.key])
)

# The only fields a timeline phase may change: per group kind (YAML names, below
# `<kind>.<group>.`), and for the network (paths below `network.`). Listed here, not on the fields:
# the order is not field order and shows in error messages ("a phase may set ...").
PHASE_SETTABLE: dict[str, tuple[str, ...]] = {
    "producers": ("rate", "count", "size_bytes", "arrival"),
    "consumers": ("count", "processing_ms", "prefetch", "leave", "outcomes"),
    "network": tuple(path for path in NETWORK_PATHS if path != "listen_port"),
}
