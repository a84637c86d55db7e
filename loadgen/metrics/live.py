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

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

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
DELIVERY_DISCARDS = {
    "nack_discard": "consumer_nack_discard",
    "reject": "consumer_reject",
    "egress_discard": "egress_discard",
}
# Outcomes of a publish that reached the socket (what `published` counts, as the run's console does).
PUBLISHED_OUTCOMES = frozenset({"confirmed", "sent", "nacked", "unconfirmed", "returned", "channel_closed"})
ACKED_OUTCOMES = frozenset({"ack", "auto_ack"})

_P_GROUP, _P_OUTCOME = index("publish", "producer_group"), index("publish", "outcome")
_D_CONSUMER, _D_GROUP = index("delivery", "consumer"), index("delivery", "consumer_group")
_D_PUBLISH, _D_RECEIVE = index("delivery", "publish_ns"), index("delivery", "receive_ns")
_D_START, _D_SETTLE = index("delivery", "start_ns"), index("delivery", "settle_ns")
_D_OUTCOME = index("delivery", "outcome")
_DL_REASON = index("deadletter", "reason")


class _Histogram:
    """One label set's observations: a count per bucket (the last one past every bound) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_S) + 1)
        self.total = 0.0

    def observe(self, ns: int) -> None:
        """One value in nanoseconds (a negative one, clocks of two hosts apart, counts as 0)."""
        ns = max(ns, 0)
        self.counts[bisect_left(_BOUNDS_NS, ns)] += 1
        self.total += ns / 1e9

    def family_args(self) -> tuple[list[tuple[str, int]], float]:
        running, buckets = 0, []
        for bound, n in zip((*map(repr, LATENCY_BUCKETS_S), "+Inf"), self.counts):
            running += n
            buckets.append((bound, running))
        return buckets, self.total


class LiveMetrics(Collector):
    """One process's part of a run, as plain counts folded from its trace rows and the state its run
    process sends, exposed in Prometheus's types when scraped (`registry`). Plain numbers rather than
    prometheus_client's own metric objects: theirs take a lock per call and a histogram scans its
    buckets in Python, about 8 us of a core per delivery in the loop benchmark; these take a dict
    lookup and a bisect."""

    def __init__(self, run_id: str, worker: str, registry: CollectorRegistry | None = None):
        self.run_id, self.worker = run_id, worker
        self.published: dict[str, int] = {}  # group ->
        self.confirmed: dict[str, int] = {}
        self.delivered: dict[str, int] = {}
        self.acked: dict[str, int] = {}
        self.discarded: dict[tuple[str, str], int] = {}  # (group, reason) ->
        self.dead_lettered: dict[str, int] = {}  # reason ->
        self.buffer_sojourn: dict[tuple[str, str], _Histogram] = {}  # (consumer, group) ->
        self.end_to_end: dict[tuple[str, str], _Histogram] = {}
        self.consumers: dict[tuple[str, str], tuple[int, int]] = {}  # (consumer, group) -> buffered, in flight
        self.phase: str | None = None
        self.elapsed_s: float | None = None
        self._lock = threading.Lock()  # a batch is folded whole before a scrape reads it (another thread)
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # -- folding ------------------------------------------------------------
    def observe(self, kind: str, rows: Iterable[tuple]) -> None:
        """Fold a batch of `kind`'s trace rows (the writer's tuples: a kind's own columns) in."""
        with self._lock:
            if kind == "publish":
                self._publishes(rows)
            elif kind == "delivery":
                self._deliveries(rows)
            elif kind == "deadletter":
                for row in rows:
                    _add(self.dead_lettered, row[_DL_REASON] or "unknown", 1)

    def _publishes(self, rows: Iterable[tuple]) -> None:
        counts: dict[tuple[str, str], int] = {}
        for row in rows:
            key = (row[_P_GROUP], row[_P_OUTCOME])
            counts[key] = counts.get(key, 0) + 1
        for (group, outcome), n in counts.items():
            if outcome in PUBLISHED_OUTCOMES:
                _add(self.published, group, n)
            if outcome == "confirmed":
                _add(self.confirmed, group, n)
            reason = PUBLISH_DISCARDS.get(outcome)
            if reason is not None:
                _add(self.discarded, (group, reason), n)

    def _deliveries(self, rows: Iterable[tuple]) -> None:
        counts: dict[tuple[str, str], int] = {}
        waits, e2e = self.buffer_sojourn, self.end_to_end
        for row in rows:
            consumer, group, outcome = row[_D_CONSUMER], row[_D_GROUP], row[_D_OUTCOME]
            key = (group, outcome)
            counts[key] = counts.get(key, 0) + 1
            start, receive = row[_D_START], row[_D_RECEIVE]
            if start is not None and receive is not None:
                (waits.get((consumer, group)) or waits.setdefault((consumer, group), _Histogram())).observe(
                    start - receive
                )
            if outcome in ACKED_OUTCOMES:
                settle, published = row[_D_SETTLE], row[_D_PUBLISH]
                if settle is not None and published is not None:
                    (e2e.get((consumer, group)) or e2e.setdefault((consumer, group), _Histogram())).observe(
                        settle - published
                    )
        for (group, outcome), n in counts.items():
            _add(self.delivered, group, n)
            if outcome in ACKED_OUTCOMES:
                _add(self.acked, group, n)
            reason = DELIVERY_DISCARDS.get(outcome)
            if reason is not None:
                _add(self.discarded, (group, reason), n)

    def set_live(self, live: Mapping[str, Any]) -> None:
        """The run process's own state: {"phase": str, "elapsed_s": float, "consumers":
        [[consumer, group, buffered, in_flight], ...]}; a consumer no longer listed is dropped."""
        consumers = {(c, g): (buffered, held) for c, g, buffered, held in live.get("consumers", ())}
        with self._lock:
            self.phase = live.get("phase") or self.phase
            self.elapsed_s = live.get("elapsed_s")
            self.consumers = consumers

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            return iter(list(self._families()))

    # -- exposing -----------------------------------------------------------
    def _families(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "sojourn_run_info", "the run this endpoint serves (always 1)", labels=["run_id", "worker"]
        )
        info.add_metric([self.run_id, self.worker], 1)
        yield info
        for name, text, values in (
            ("sojourn_published", "publishes that reached the socket, by producer group", self.published),
            ("sojourn_confirmed", "publishes the broker confirmed, by producer group", self.confirmed),
            (
                "sojourn_delivered",
                "deliveries settled or given up (redeliveries too), by consumer group",
                self.delivered,
            ),
            ("sojourn_acked", "deliveries processed and acked (or auto-acked), by consumer group", self.acked),
        ):
            yield _counter(name, text, ["group"], {(g,): n for g, n in values.items()})
        yield _counter(
            "sojourn_discarded",
            "messages discarded, by group (producer or consumer) and the reason the accounting gives",
            ["group", "reason"],
            self.discarded,
        )
        yield _counter(
            "sojourn_dead_lettered",
            "messages the dead-letter capture took, by x-death reason",
            ["reason"],
            {(r,): n for r, n in self.dead_lettered.items()},
        )
        for name, text, histograms in (
            (
                "sojourn_buffer_sojourn_seconds",
                "time a delivery waited in its consumer's buffer before processing started, by consumer and group",
                self.buffer_sojourn,
            ),
            (
                "sojourn_end_to_end_seconds",
                "publish to ack of an acked delivery, by consumer and group (clocks of two hosts when the "
                "producer runs on another)",
                self.end_to_end,
            ),
        ):
            family = HistogramMetricFamily(name, text, labels=["consumer", "group"])
            for labels, h in sorted(histograms.items()):
                buckets, total = h.family_args()
                family.add_metric(list(labels), buckets, total)
            yield family
        depth = GaugeMetricFamily(
            "sojourn_consumer_buffer_depth",
            "deliveries waiting in the consumer's buffer (received, not yet processing)",
            labels=["consumer", "group"],
        )
        in_flight = GaugeMetricFamily(
            "sojourn_consumer_in_flight",
            "deliveries the consumer holds unsettled (buffered, processing)",
            labels=["consumer", "group"],
        )
        for labels, (buffered, held) in sorted(self.consumers.items()):
            depth.add_metric(list(labels), buffered)
            in_flight.add_metric(list(labels), held)
        yield depth
        yield in_flight
        phase = GaugeMetricFamily(
            "sojourn_phase",
            "1 for the run's current phase (starting, base or a timeline phase, drain, ended)",
            labels=["phase"],
        )
        if self.phase:
            phase.add_metric([self.phase], 1)
        yield phase
        elapsed = GaugeMetricFamily("sojourn_elapsed_seconds", "seconds since the run's start (t0)")
        if self.elapsed_s is not None:
            elapsed.add_metric([], self.elapsed_s)
        yield elapsed


_BOUNDS_NS = [round(b * 1e9) for b in LATENCY_BUCKETS_S]  # bisect_left: a value on a bound is in its bucket


def _add(counts: dict, key: Any, n: int) -> None:
    counts[key] = counts.get(key, 0) + n


def _counter(name: str, text: str, labels: list[str], values: Mapping[tuple, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, text, labels=labels)
    for key, n in sorted(values.items()):
        family.add_metric(list(key), n)
    return family
