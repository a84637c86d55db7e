"""The blocks the deliveries' cube rolls up on the driver: the overall latencies and throughput,
`consumers`, `phases`, the per-second `windows`, the queueing model's inputs and the slow
consumers' activity (transforms.delivery_cube says what each name is). Plain Python over the
collected cells and histograms: every count, sum, minimum and maximum is exact, every percentile
comes from log buckets (analysis.buckets).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from pyspark.sql import DataFrame

from analysis.buckets import Histogram, merge
from analysis.cube import Cube, cube
from analysis.transforms._common import NS_PER_S
from analysis.transforms.codel import codel_state_cells
from analysis.transforms.delivery_cube import DELIVERY_HISTOGRAMS, delivery_cells, delivery_projections, window_cells
from analysis.transforms.phases import Segment
from analysis.transforms.slow_consumers import outstanding_cells
from analysis.transforms.stats import QUANTILES
from analysis.transforms.windows import COMPONENTS

__all__ = ["DeliveryRollup", "delivery_rollup"]


def _stats(h: Histogram, quantiles: Sequence[float] = ()) -> dict[str, Any]:
    """A stats struct (count, mean, p50, p95, p99, max, min; `quantiles` when asked) of `h`."""
    out = {**h.stats(), "min": h.min()}
    if quantiles:
        out["quantiles"] = h.quantiles(quantiles) if h.n else None
    return out


def _seconds(window: tuple[int, int]) -> float:
    start, end = window
    return (end - start) / NS_PER_S


def _rate(count: int, seconds: float) -> float | None:
    return count / seconds if seconds > 0 else None


def _ratio(part: Any, whole: Any) -> float | None:
    return part / whole if part is not None and whole else None


def _min(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _max(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _sum(values: Iterable[Any]) -> Any:
    """Spark's sum: null over no non-null value."""
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _utilisation(busy_ns: Any, wall_ns: Any) -> float | None:
    """Busy over wall time, a consumer's utilisation (0 for no processing): null for no positive wall time."""
    if wall_ns is None or wall_ns <= 0:
        return None
    return float(busy_ns or 0) / float(wall_ns)


def delivery_rollup(
    deliveries: DataFrame,
    t0_ns: int,
    segments: Sequence[Segment],
    window: tuple[int, int],
    sample_times: Sequence[int] = (),
) -> DeliveryRollup:
    """One Spark action: the deliveries' cube (transforms.delivery_cube) collected, ready to roll
    up. `deliveries`: with latency.with_delivery_latencies and warmup.mark_measured; `window`: the
    throughput's [start, end) in ns (throughput.measurement_window_ns); `sample_times`: the queue
    samples' times in order (for the slow consumers' `outstanding` rows, none without)."""
    projections = delivery_projections(t0_ns, segments)
    cells = [delivery_cells(t0_ns, segments, window), *window_cells(t0_ns), codel_state_cells()]
    if sample_times:
        cells.append(outstanding_cells(sample_times, t0_ns))
    return DeliveryRollup(cube(deliveries, projections, cells), t0_ns)


class DeliveryRollup:
    """The deliveries' cube (delivery_projections, delivery_cells and window_cells) and the publishes'
    cube (publish_projections and publish_cells), rolled up per block."""

    def __init__(self, deliveries: Cube, t0_ns: int) -> None:
        self._cells = deliveries.cells()
        self._t0 = t0_ns
        # name -> (k1, k2, k3) -> histogram, the keys of DELIVERY_HISTOGRAMS then None
        self._hist = {name: deliveries.histograms(name, by=3) for name in DELIVERY_HISTOGRAMS}
        self._transit = deliveries.totals("transit_per_s", by=3)
        self._cube = deliveries

    # -- the pieces ---------------------------------------------------------
    def cells(self, name: str = "cells") -> list[dict[str, Any]]:
        """The deliveries' grouping `name`: `cells` (delivery_cells), `codel_state`
        (transforms.codel.codel_state_cells), `outstanding` (transforms.slow_consumers.outstanding_cells,
        none without queue samples) or a window_cells one."""
        return self._cube.cells(name)

    def histogram(self, name: str, **where: Any) -> Histogram:
        """The merged histogram of `name` over the keys that match `where` (key name -> value)."""
        names = _KEY_NAMES[name]
        positions = {names.index(k): v for k, v in where.items()}
        return merge(*[h for key, h in self._hist[name].items() if all(key[i] == v for i, v in positions.items())])

    def _cells_where(self, **where: Any) -> list[dict[str, Any]]:
        return [c for c in self._cells if all(c[k] == v for k, v in where.items())]

    def _by_consumer(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Each consumer, by name, with its cells."""
        for consumer in sorted({c["consumer"] for c in self._cells}):
            yield consumer, self._cells_where(consumer=consumer)

    # -- the blocks ---------------------------------------------------------
    def overall(self, window: tuple[int, int]) -> dict[str, Any]:
        """The whole run's deliveries: `sojourn_ms` (with its min) and the other delivery latencies as
        stats structs, the delivery and ack rates over `window` ([start, end) ns) and `redelivered`
        (delivery rows with the flag)."""
        seconds = _seconds(window)
        return {
            **{name: _stats(self.histogram(name)) for name in DELIVERY_HISTOGRAMS},
            "deliver_per_s": _rate(sum(c["received_in_window"] for c in self._cells), seconds),
            "ack_per_s": _rate(sum(c["acked_in_window"] for c in self._cells), seconds),
            "redelivered": sum(c["redelivered"] for c in self._cells),
        }

    @staticmethod
    def overall_publishes(publishes: Cube, window: tuple[int, int]) -> dict[str, Any]:
        """The whole run's publishes (their cube of publish_projections): `confirm` as a stats struct
        and the publish rate over `window`."""
        published = publishes.counts("published_in_window").get(None, 0)
        return {
            "confirm": _stats(publishes.histograms("confirm").get(None, Histogram.empty())),
            "publish_per_s": _rate(published, _seconds(window)),
        }

    def consumers(self) -> list[dict[str, Any]]:
        """A row per consumer, by name: delivered, acked, utilisation (processing time over its wall
        time, _wall), and over measured deliveries the sojourn (with its QUANTILES) and end-to-end
        stats (summary.blocks.consumer_row)."""
        rows = []
        for consumer, cells in self._by_consumer():
            wall = _wall(cells, "last_seen_ns")
            rows.append(
                {
                    "consumer": consumer,
                    "group": cells[0]["group"],
                    "delivered": sum(c["delivered"] for c in cells),
                    "acked": sum(c["acked"] for c in cells),
                    "utilisation": _utilisation(_sum(c["busy_ns"] for c in cells), wall),
                    "sojourn_ms": _stats(self.histogram("sojourn_ms", consumer=consumer), QUANTILES),
                    "end_to_end_ms": _stats(self.histogram("end_to_end", consumer=consumer)),
                }
            )
        return rows

    def windows(self, publishes: Cube) -> list[dict[str, Any]]:
        """A row per second since t0 (summary.blocks.window_row), from the first to the last second
        with any activity, warm-up and drain included: publishes by publish time (their cube of
        publish_projections), deliveries by receive, acks by settle, the sojourn stats of the
        deliveries that started processing in the second, the end-to-end stats and the means of
        windows.COMPONENTS of those that ended in it. A quiet second has counts of 0 and null stats."""
        published = _by_second({r["t_s"]: r["rows"] for r in publishes.cells("published_per_s")})
        delivered = _by_second({r["t_s"]: r["rows"] for r in self._cube.cells("received_per_s")})
        acked = _by_second({r["t_s"]: r["rows"] for r in self._cube.cells("acked_per_s")})
        ended = _by_second({r["t_s"]: r for r in self._cube.cells("ended_per_s")})
        started = _by_second(self._cube.counts("sojourn_per_s"))
        sojourn = _by_second(self._cube.histograms("sojourn_per_s"))
        end_to_end = _by_second(self._cube.histograms("end_to_end_per_s"))
        seconds = set(published) | set(delivered) | set(acked) | set(started) | set(ended)
        if not seconds:
            return []
        rows = []
        for t in range(min(seconds), max(seconds) + 1):
            rows.append(
                {
                    "t_s": t,
                    "published": published.get(t, 0),
                    "delivered": delivered.get(t, 0),
                    "acked": acked.get(t, 0),
                    "sojourn_ms": _stats(sojourn.get(t, Histogram.empty())),
                    "latency_ms": _stats(end_to_end.get(t, Histogram.empty())),
                    "components_ms": {name: ended[t][name] if t in ended else None for name in COMPONENTS},
                }
            )
        return rows

    def activity(self) -> list[dict[str, Any]]:
        """A row per consumer, by name, of what its slow-consumer span needs (summary.slow_consumers):
        whether it acked automatically, its largest prefetch, its first receive and its last receive
        or settle."""
        rows = []
        for consumer, cells in self._by_consumer():
            rows.append(
                {
                    "consumer": consumer,
                    "group": cells[0]["group"],
                    "auto_ack": any(c["auto_acks"] for c in cells),
                    "max_prefetch": _max(c["prefetch_max"] for c in cells),
                    "first_receive_ns": _min(c["first_ns"] for c in cells),
                    "last_ns": _max([*(c["last_receive_ns"] for c in cells), *(c["last_settle_ns"] for c in cells)]),
                }
            )
        return rows

    def phases(self, publishes: Cube, segments: Sequence[Segment]) -> list[dict[str, Any]]:
        """A row per timeline segment (summary.blocks.phase_row): publishes by intended
        time (their cube of publish_projections), acked deliveries and the measured deliveries'
        latencies by start time."""
        published = publishes.counts("published_by_segment")
        rows = []
        for i, seg in enumerate(segments):
            length = float(seg.end_s) - float(seg.start_s)
            n_published = published.get(str(i), 0)
            acked = sum(c["acked"] for c in self._cells_where(segment=i))
            rows.append(
                {
                    "segment": i,
                    "phase": seg.phase,
                    "start_s": float(seg.start_s),
                    "end_s": float(seg.end_s),
                    "published": n_published,
                    "acked": acked,
                    "publish_per_s": n_published / length,
                    "ack_per_s": acked / length,
                    "sojourn_ms": _stats(self.histogram("sojourn_ms", segment=str(i))),
                    "end_to_end_ms": _stats(self.histogram("end_to_end", segment=str(i))),
                }
            )
        return rows

    def model_inputs(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The queueing-model check's inputs (summary.model), a row per consumer and a row per consumer
        and phase (the trace's phase at receive), each sorted by its keys.

        Over measured deliveries (warm-up excluded): p (mean processing), p99 processing, min
        broker_network, p95 of the per-second minima, mean sojourn, the share that arrived at an empty
        client buffer (`buffer_empty_share`), and over those with both the drawn and the achieved
        processing time, their means (`processing_drawn_ms`, `processing_achieved_ms`,
        `processing_count`); all of them None without a measured delivery. Over all deliveries:
        min/max prefetch, whether the consumer acked automatically, throughput = acked per second of
        wall time (first receive to last settle, else to the last processing end), utilisation, and
        its span in seconds since t0 (`span_start_s`, `span_end_s`)."""
        by_consumer = [self._model_row(consumer, None) for consumer, _ in self._by_consumer()]
        phases = sorted({(c["consumer"], c["phase"]) for c in self._cells})
        by_phase = [self._model_row(consumer, phase) for consumer, phase in phases]
        return by_consumer, by_phase

    def _model_row(self, consumer: str, phase: str | None) -> dict[str, Any]:
        where = {"consumer": consumer} if phase is None else {"consumer": consumer, "phase": phase}
        cells = self._cells_where(**where)
        first = _min(c["first_ns"] for c in cells)
        acked, busy = sum(c["acked"] for c in cells), _sum(c["busy_ns"] for c in cells)
        wall_all = _wall(cells, "last_seen_ns")
        wall = _wall(cells, "last_end_ns")  # throughput's wall: to the last settle or processing end
        row: dict[str, Any] = {
            "consumer": consumer,
            "phase": phase,
            "prefetch_min": _min(c["prefetch_min"] for c in cells),
            "prefetch_max": _max(c["prefetch_max"] for c in cells),
            "auto_ack": any(c["auto_acks"] for c in cells),
            "span_start_s": (first - self._t0) / float(NS_PER_S) if first is not None else None,
            "span_end_s": (first + wall_all - self._t0) / float(NS_PER_S) if wall_all is not None else None,
            "throughput_per_s": acked / (wall / 1e9) if wall is not None and wall > 0 else None,
            "utilisation": _utilisation(busy, wall_all),
        }
        measured = [c for c in cells if c["measured"]]
        n = sum(c["delivered"] for c in measured)
        if not n:  # no measured delivery: the measured inputs are unknown
            return {**row, **dict.fromkeys(_MEASURED_INPUTS)}
        processing = self.histogram("processing", **where)
        transit = self.histogram("broker_network", **where)
        both = sum(c["both"] for c in measured)
        minima = self._transit_minima(consumer, phase)
        return {
            **row,
            "processing_mean_ms": processing.mean(),
            "processing_p99_ms": processing.quantiles([0.99])[0],
            "transit_min_ms": transit.min(),
            "sojourn_mean_ms": self.histogram("sojourn_ms", **where).mean(),
            "measured_deliveries": n,
            "buffer_empty_share": _ratio(
                sum(c["buffer_empty"] for c in measured), sum(c["with_buffer_len"] for c in measured)
            ),
            "processing_drawn_ms": _ratio(_sum(c["drawn_sum"] for c in measured), both),
            "processing_achieved_ms": _ratio(_sum(c["achieved_sum"] for c in measured), both),
            "processing_count": both,
            "transit_p95_ms": float(np.percentile(minima, 95)) if minima else None,
        }

    def _transit_minima(self, consumer: str, phase: str | None) -> list[float]:
        """The least broker_network of each second (of receive) in which the consumer (in `phase`)
        had a measured delivery with one."""
        per_second: dict[Any, float] = {}
        for (c, p, second), (_rows, _total, least, _most) in self._transit.items():
            if c == consumer and (phase is None or p == phase) and least is not None:
                per_second[second] = least if second not in per_second else min(per_second[second], least)
        return list(per_second.values())


def _by_second(values: Mapping[Any, Any]) -> dict[int, Any]:
    """Values keyed by second (a projection's keys are strings, a grouping's ints), the null key left out."""
    return {int(k): v for k, v in values.items() if k is not None}


def _wall(cells: Sequence[Mapping[str, Any]], fallback: str) -> Any:
    """A consumer's wall time: first receive to last settle; one that never settled anything (it died
    first) up to the cells' latest `fallback` time."""
    first = _min(c["first_ns"] for c in cells)
    last = _max(c["last_settle_ns"] for c in cells)
    if last is None:
        last = _max(c[fallback] for c in cells)
    return last - first if last is not None and first is not None else None


_KEY_NAMES = {name: keys for name, (_column, keys) in DELIVERY_HISTOGRAMS.items()}

_MEASURED_INPUTS = (
    "processing_mean_ms",
    "processing_p99_ms",
    "transit_min_ms",
    "sojourn_mean_ms",
    "measured_deliveries",
    "buffer_empty_share",
    "processing_drawn_ms",
    "processing_achieved_ms",
    "processing_count",
    "transit_p95_ms",
)
