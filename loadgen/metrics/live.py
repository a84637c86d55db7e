"""The run's live metrics: the trace rows folded into Prometheus counters and histograms as the trace
writer's process receives them, and the gauges the run's process sends beside them.

Pure bookkeeping on a `prometheus_client` registry (no sockets here: loadgen.metrics.endpoint
serves it). Everything a counter or histogram says comes from a trace row, the record the analysis
reads too, so a live figure and the summary's count the same messages; they differ only in time
(a row reaches this process at the trace writer's next flush, about a second after its message was
settled) and where the analysis sees more than one row does: the summary's accounting is the final
word on why a message was discarded (docs/metrics.md lists the differences).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from loadgen.trace.rows import index

__all__ = ["LiveMetrics", "LATENCY_BUCKETS_S", "PUBLISH_DISCARDS", "DELIVERY_DISCARDS", "PUBLISHED_OUTCOMES"]

# Seconds: 100 us to 2 min, about three buckets a decade (buffer sojourn spans both ends).
LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)

# A publish row's outcome -> the discard reason the summary's accounting gives it (analysis.schema's
# PUBLISH_OUTCOMES say which outcomes end a message); a delivery row's likewise.
PUBLISH_DISCARDS = {
    "nacked": "publish_nacked",
    "returned": "unroutable",
    "failed": "publish_failed",
    "blocked_timeout": "publish_failed_blocked",
    "channel_closed": "channel_closed",
}
DELIVERY_DISCARDS = {"nack_discard": "consumer_nack_discard", "egress_discard": "egress_discard"}
# Outcomes of a publish that reached the socket (what `published` counts, as the run's console does).
PUBLISHED_OUTCOMES = frozenset({"confirmed", "sent", "nacked", "unconfirmed", "returned", "channel_closed"})
ACKED_OUTCOMES = frozenset({"ack", "auto_ack"})

_P_GROUP, _P_OUTCOME = index("publish", "producer_group"), index("publish", "outcome")
_D_CONSUMER, _D_GROUP = index("delivery", "consumer"), index("delivery", "consumer_group")
_D_PUBLISH, _D_RECEIVE = index("delivery", "publish_ns"), index("delivery", "receive_ns")
_D_START, _D_SETTLE = index("delivery", "start_ns"), index("delivery", "settle_ns")
_D_OUTCOME = index("delivery", "outcome")
_DL_REASON = index("deadletter", "reason")


class LiveMetrics:
    """Counters, histograms and gauges of one process's part of a run, in their own registry."""

    def __init__(self, run_id: str, worker: str, registry: CollectorRegistry | None = None):
        self.registry = registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        Gauge(
            "sojourn_run_info", "the run this endpoint serves (always 1)", ["run_id", "worker"], registry=registry
        ).labels(run_id, worker).set(1)
        self.published = Counter(
            "sojourn_published", "publishes that reached the socket, by producer group", ["group"], registry=registry
        )
        self.confirmed = Counter(
            "sojourn_confirmed", "publishes the broker confirmed, by producer group", ["group"], registry=registry
        )
        self.delivered = Counter(
            "sojourn_delivered", "deliveries settled or given up (redeliveries too), by consumer group", ["group"],
            registry=registry,
        )  # fmt: skip
        self.acked = Counter(
            "sojourn_acked", "deliveries processed and acked (or auto-acked), by consumer group", ["group"],
            registry=registry,
        )  # fmt: skip
        self.discarded = Counter(
            "sojourn_discarded",
            "messages discarded, by group (producer or consumer) and the reason the accounting gives",
            ["group", "reason"],
            registry=registry,
        )
        self.dead_lettered = Counter(
            "sojourn_dead_lettered", "messages the dead-letter capture took, by x-death reason", ["reason"],
            registry=registry,
        )  # fmt: skip
        self.buffer_sojourn = Histogram(
            "sojourn_buffer_sojourn_seconds",
            "time a delivery waited in its consumer's buffer before processing started, by consumer and group",
            ["consumer", "group"],
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.end_to_end = Histogram(
            "sojourn_end_to_end_seconds",
            "publish to ack of an acked delivery, by consumer and group (clocks of two hosts when the producer "
            "runs on another)",
            ["consumer", "group"],
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.buffer_depth = Gauge(
            "sojourn_consumer_buffer_depth",
            "deliveries waiting in the consumer's buffer (received, not yet processing)",
            ["consumer", "group"],
            registry=registry,
        )
        self.in_flight = Gauge(
            "sojourn_consumer_in_flight",
            "deliveries the consumer holds unsettled (buffered, processing)",
            ["consumer", "group"],
            registry=registry,
        )
        self.phase = Gauge(
            "sojourn_phase", "1 for the run's current phase (starting, base or a timeline phase, drain, ended)",
            ["phase"], registry=registry,
        )  # fmt: skip
        self.elapsed = Gauge("sojourn_elapsed_seconds", "seconds since the run's start (t0)", registry=registry)
        self._consumers: set[tuple[str, str]] = set()

    def observe(self, kind: str, rows: Iterable[tuple]) -> None:
        """Fold a batch of `kind`'s trace rows (the writer's tuples: a kind's own columns) in."""
        if kind == "publish":
            self._publishes(rows)
        elif kind == "delivery":
            self._deliveries(rows)
        elif kind == "deadletter":
            for row in rows:
                self.dead_lettered.labels(row[_DL_REASON] or "unknown").inc()

    def _publishes(self, rows: Iterable[tuple]) -> None:
        counts: dict[tuple[str, str], int] = {}
        for row in rows:
            key = (row[_P_GROUP], row[_P_OUTCOME])
            counts[key] = counts.get(key, 0) + 1
        for (group, outcome), n in counts.items():
            if outcome in PUBLISHED_OUTCOMES:
                self.published.labels(group).inc(n)
            if outcome == "confirmed":
                self.confirmed.labels(group).inc(n)
            reason = PUBLISH_DISCARDS.get(outcome)
            if reason is not None:
                self.discarded.labels(group, reason).inc(n)

    def _deliveries(self, rows: Iterable[tuple]) -> None:
        counts: dict[tuple[str, str], int] = {}
        for row in rows:
            consumer, group, outcome = row[_D_CONSUMER], row[_D_GROUP], row[_D_OUTCOME]
            key = (group, outcome)
            counts[key] = counts.get(key, 0) + 1
            start, receive = row[_D_START], row[_D_RECEIVE]
            if start is not None and receive is not None:
                self.buffer_sojourn.labels(consumer, group).observe(max(start - receive, 0) / 1e9)
            if outcome in ACKED_OUTCOMES:
                settle, published = row[_D_SETTLE], row[_D_PUBLISH]
                if settle is not None and published is not None:
                    self.end_to_end.labels(consumer, group).observe(max(settle - published, 0) / 1e9)
        for (group, outcome), n in counts.items():
            self.delivered.labels(group).inc(n)
            if outcome in ACKED_OUTCOMES:
                self.acked.labels(group).inc(n)
            reason = DELIVERY_DISCARDS.get(outcome)
            if reason is not None:
                self.discarded.labels(group, reason).inc(n)

    def set_live(self, live: Mapping[str, Any]) -> None:
        """The run process's own state: {"phase": str, "elapsed_s": float, "consumers":
        [[consumer, group, buffered, in_flight], ...]}; a consumer no longer listed is dropped."""
        phase = live.get("phase")
        if phase:
            self.phase.clear()
            self.phase.labels(phase).set(1)
        if live.get("elapsed_s") is not None:
            self.elapsed.set(live["elapsed_s"])
        consumers = {(c, g): (buffered, held) for c, g, buffered, held in live.get("consumers", ())}
        for gone in self._consumers - consumers.keys():
            self.buffer_depth.remove(*gone)
            self.in_flight.remove(*gone)
        for (consumer, group), (buffered, held) in consumers.items():
            self.buffer_depth.labels(consumer, group).set(buffered)
            self.in_flight.labels(consumer, group).set(held)
        self._consumers = set(consumers)
