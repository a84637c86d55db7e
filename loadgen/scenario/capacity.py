"""The capacity check before a run: per phase and consumer group, what the producers offer, what the
consumers can take by the queueing arithmetic (docs/queueing.md; analysis.queueing.predict, the rule
the report's model check uses after the run), how busy that makes them, and the buffer sojourn the
arithmetic predicts. `sojourn validate` and `sojourn run` print it; a phase that offers more than its
consumers can take gets a warning naming the phase, the group and how fast the backlog grows.

Per consumer: throughput = min(prefetch / R, 1 / p), with R = p + the network's round trip (the
proxy's latency both ways and half its jitter each way, plus LOOPBACK_ROUND_TRIP_MS for the
machine's own hop); the groups on the queue share what the producers offer, except on a stream,
where every group reads every message and so must take all of it alone. A saturated group's
deliveries wait about (prefetch - R/p) x p in the buffer; an unsaturated one keeps no standing
backlog (its waits come from bursts of arrivals, which the arithmetic leaves out).
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.queueing import predict
from loadgen.scenario.model import Scenario

__all__ = [
    "LOOPBACK_ROUND_TRIP_MS",
    "GroupCapacity",
    "capacity_rows",
    "capacity_lines",
    "capacity_warnings",
    "capacity_records",
]

LOOPBACK_ROUND_TRIP_MS = 0.2
"""The network part of R without a proxy: a delivery's way out and the ack's way back on one machine
or a LAN (tenths of a millisecond); a scenario with a `network` section adds its latencies."""


@dataclass(frozen=True)
class GroupCapacity:
    """One consumer group in one phase (`phase` "base" outside the timeline's phases)."""

    phase: str
    start_s: float
    end_s: float
    group: str
    consumers: int
    prefetch: int
    processing_ms: float
    round_trip_ms: float  # R = p + the network's round trip
    offered_per_s: float | None  # every producer's rate together (None: a replay, known from its file only)
    capacity_per_s: float | None  # this group's consumers together (None: no bound, prefetch 0 or auto-ack)
    queue_capacity_per_s: float | None  # every group's on the queue together (on a stream: this group's)
    buffer_wait_ms: float | None  # predicted buffer sojourn while saturated; 0 unsaturated
    reads_all: bool = False  # a stream's group: it reads every message, sharing none with the others

    @property
    def utilisation(self) -> float | None:
        """Offered over what every group can take (the groups share the queue's messages)."""
        if self.offered_per_s is None or not self.queue_capacity_per_s:
            return None
        return self.offered_per_s / self.queue_capacity_per_s

    @property
    def backlog_growth_per_s(self) -> float:
        """How fast the queue grows: offered less what every group takes (0 when they keep up)."""
        if self.offered_per_s is None or self.queue_capacity_per_s is None:
            return 0.0
        return max(0.0, self.offered_per_s - self.queue_capacity_per_s)


def _windows(scenario: Scenario) -> list[tuple[str, float, float]]:
    """The run cut at every phase boundary: (phase name, start, end)."""
    times = [*scenario.boundaries(), scenario.run.duration_s]
    return [(scenario.phase_at(a), a, b) for a, b in zip(times, times[1:]) if b > a]


def _rate_at(points: tuple[tuple[float, float], ...], t: float) -> float:
    """A rate profile at `t`: linear between points, held before the first and after the last."""
    if t <= points[0][0]:
        return points[0][1]
    for (t0, r0), (t1, r1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return r1 if t1 == t0 else r0 + (r1 - r0) * (t - t0) / (t1 - t0)
    return points[-1][1]


def _offered(scenario: Scenario, start_s: float, end_s: float) -> float | None:
    """Every producer's rate together in [start, end): the peak of a profile; None with a replay."""
    total = 0.0
    for group in scenario.settings_at(start_s).producers:
        if group.count == 0:
            continue
        if group.replay is not None:
            return None
        if isinstance(group.rate, tuple):
            inside = [r for t, r in group.rate if start_s < t < end_s]
            rate = max([_rate_at(group.rate, start_s), _rate_at(group.rate, end_s), *inside])
        else:
            rate = float(group.rate)
        total += group.count * rate
    return total


def _network_round_trip_ms(scenario: Scenario, t: float) -> float:
    network = scenario.settings_at(t).network
    extra = 0.0
    if network is not None:
        for link in (network.upstream, network.downstream):
            extra += link.latency_ms + link.jitter_ms / 2
    return LOOPBACK_ROUND_TRIP_MS + extra


def capacity_rows(scenario: Scenario) -> list[GroupCapacity]:
    """The check for every phase window of the run and every consumer group in it."""
    rows: list[GroupCapacity] = []
    single_active = scenario.queue.single_active_consumer
    reads_all = scenario.queue.stream
    for phase, start_s, end_s in _windows(scenario):
        settings = scenario.settings_at(start_s)
        offered = _offered(scenario, start_s, end_s)
        network_ms = _network_round_trip_ms(scenario, start_s)
        groups = []
        for group in settings.consumers:
            p = group.processing.mean_ms
            r = p + network_ms
            bounded = group.prefetch > 0 and group.ack_mode == "manual"
            model = predict(group.prefetch, r, p) if bounded else None
            consumers = min(group.count, 1) if single_active else group.count  # x-single-active-consumer
            if consumers == 0:
                capacity: float | None = 0.0
            elif p <= 0:
                capacity = None  # no processing time: the arithmetic sets no bound worth the name
            elif model is not None:
                capacity = consumers * model["throughput_per_s"]
            else:
                capacity = consumers * 1000.0 / p  # no prefetch bound: the processing alone limits it
            if capacity is not None and group.outcomes is not None:
                capacity *= 1.0 - group.outcomes.requeue  # a requeued delivery comes back: work, no message
            groups.append((group, p, r, capacity, None if model is None else model["buffer_wait_ms"]))
        caps = [c for *_, c, _w in groups]
        if any(c is None for c in caps):
            queue_capacity = None
        elif single_active:  # one consumer at a time: the fastest that may be the active one
            queue_capacity = max((c for c in caps if c is not None), default=0.0)
        else:
            queue_capacity = sum(c for c in caps if c is not None)
        for group, p, r, capacity, wait in groups:
            if reads_all:
                queue_capacity = capacity
            saturated = offered is not None and queue_capacity is not None and offered >= queue_capacity - 1e-9
            rows.append(
                GroupCapacity(
                    phase=phase,
                    start_s=start_s,
                    end_s=end_s,
                    group=group.name,
                    consumers=group.count,
                    prefetch=group.prefetch,
                    processing_ms=p,
                    round_trip_ms=r,
                    offered_per_s=offered,
                    capacity_per_s=capacity,
                    queue_capacity_per_s=queue_capacity,
                    buffer_wait_ms=(wait if saturated else 0.0) if wait is not None and group.count else None,
                    reads_all=reads_all,
                )
            )
    return rows


def _num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}{unit}" if abs(x) >= 100 else f"{x:.3g}{unit}"


def capacity_lines(rows: list[GroupCapacity]) -> list[str]:
    """The check as a console table, a line per phase window and group."""
    lines = [
        "capacity check (docs/queueing.md: per consumer min(prefetch / R, 1 / p), R = p + network round trip):",
        f"  {'phase':<14} {'window':>13} {'group':<12} {'offered/s':>10} {'capacity/s':>10} "
        f"{'utilisation':>11} {'buffer wait':>12}",
    ]
    for row in rows:
        window = f"{row.start_s:g}-{row.end_s:g} s"
        utilisation = row.utilisation
        lines.append(
            f"  {row.phase:<14} {window:>13} {row.group:<12} {_num(row.offered_per_s):>10} "
            f"{_num(row.capacity_per_s):>10} {_num(None if utilisation is None else utilisation * 100, ' %'):>11} "
            f"{_num(row.buffer_wait_ms, ' ms'):>12}"
        )
    return lines


def capacity_warnings(rows: list[GroupCapacity]) -> list[str]:
    """A warning for each phase window whose producers offer more than its consumers can take."""
    out = []
    seen: set[tuple[str, float]] = set()
    for row in rows:
        growth = row.backlog_growth_per_s
        if growth > 0 and row.reads_all and row.consumers == 0:
            out.append(
                f"phase {row.phase} ({row.start_s:g}-{row.end_s:g} s): consumer group {row.group} reads nothing "
                f"(count 0): it reads the {_num(growth * (row.end_s - row.start_s))} messages published meanwhile "
                "only if it starts from an offset before them (offset: first, or an offset or time)"
            )
            continue
        if growth > 0 and row.reads_all:
            out.append(
                f"phase {row.phase} ({row.start_s:g}-{row.end_s:g} s): the producers offer "
                f"{_num(row.offered_per_s)} msg/s to the stream, more than consumer group {row.group} can read "
                f"({_num(row.capacity_per_s)} msg/s): it falls behind by {_num(growth)} msg/s, "
                f"{_num(growth * (row.end_s - row.start_s))} messages by the phase's end"
            )
            continue
        if growth <= 0 or (row.phase, row.start_s) in seen:
            continue
        seen.add((row.phase, row.start_s))
        groups = [r for r in rows if (r.phase, r.start_s) == (row.phase, row.start_s)]
        names = ", ".join(f"{r.group} ({_num(r.capacity_per_s)}/s)" for r in groups)
        out.append(
            f"phase {row.phase} ({row.start_s:g}-{row.end_s:g} s): the producers offer "
            f"{_num(row.offered_per_s)} msg/s, "
            f"more than consumer group(s) {names} can take ({_num(row.queue_capacity_per_s)} msg/s together): "
            f"the backlog grows by {_num(growth)} msg/s, {_num(growth * (row.end_s - row.start_s))} messages by the "
            "phase's end"
        )
    return out


def capacity_records(rows: list[GroupCapacity]) -> list[dict[str, float | int | str | None]]:
    """The check as run.json keeps it (`capacity`), for the report to set beside what was measured."""
    return [
        {
            "phase": r.phase,
            "start_s": r.start_s,
            "end_s": r.end_s,
            "group": r.group,
            "consumers": r.consumers,
            "prefetch": r.prefetch,
            "processing_ms": r.processing_ms,
            "round_trip_ms": r.round_trip_ms,
            "offered_per_s": r.offered_per_s,
            "capacity_per_s": r.capacity_per_s,
            "queue_capacity_per_s": r.queue_capacity_per_s,
            "utilisation": r.utilisation,
            "buffer_wait_ms": r.buffer_wait_ms,
            "backlog_growth_per_s": r.backlog_growth_per_s,
            "reads_all": r.reads_all,
        }
        for r in rows
    ]
