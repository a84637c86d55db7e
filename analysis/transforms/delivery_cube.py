"""What the overall, per-consumer, per-phase, per-second and queueing-model blocks need of every
delivery and publish, as one cube each (analysis.cube): the histograms of the latencies, the
per-second minima of the wire time, and the groupings of plain aggregates (the cells, the
per-second counts and means) that the driver rolls up (analysis.summary.deliveries). Each name
below is read there.

The cells group the deliveries by consumer, its group, the trace's phase (at receive), the
timeline segment (at start) and whether the delivery is measured (after the warm-up): every
coarser block is a sum, minimum or maximum over them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, functions as F

from analysis.cube import Cells, Projection

from ._common import is_acked
from .phases import Segment, segment_index
from .throughput import in_window
from .windows import COMPONENTS, second_since

__all__ = [
    "DELIVERY_HISTOGRAMS",
    "delivery_projections",
    "window_projections",
    "window_cells",
    "delivery_cells",
    "publish_projections",
    "publish_cells",
]

DELIVERY_HISTOGRAMS = {
    # name: (trace column, keys); the keys are among consumer, phase and segment
    "sojourn_ms": ("sojourn_ms", ("consumer", "phase", "segment")),
    "end_to_end": ("end_to_end_ms", ("consumer", "segment")),
    "processing": ("processing_ms_actual", ("consumer", "phase")),
    "broker_network": ("broker_network_ms", ("consumer", "phase")),
    "socket_wait": ("socket_wait_ms", ()),
    "ack_delay": ("ack_delay_ms", ()),
}
"""The latency histograms over measured deliveries, each keyed only as finely as a block reads it."""


def delivery_projections(t0_ns: int, segments: Sequence[Segment]) -> list[Projection]:
    """The histograms of DELIVERY_HISTOGRAMS over measured deliveries with a value, and
    `transit_per_s`: per consumer, phase and second of receive, the least broker_network of the
    measured deliveries (not bucketed: exact); and the per-second windows' (window_projections).
    Applied to deliveries with the columns of latency.with_delivery_latencies and
    warmup.mark_measured."""
    measured = F.col("measured")
    key = {
        "consumer": F.col("consumer"),
        "phase": F.col("phase"),
        "segment": segment_index(segments, t0_ns, "start_ns"),
    }
    return [
        *[
            Projection(name, measured & F.col(column).isNotNull(), [key[k] for k in keys], F.col(column))
            for name, (column, keys) in DELIVERY_HISTOGRAMS.items()
        ],
        Projection(
            "transit_per_s",
            measured & F.col("broker_network_ms").isNotNull(),
            [F.col("consumer"), F.col("phase"), second_since(t0_ns, "receive_ns")],
            F.col("broker_network_ms"),
            bucketed=False,
        ),
        *window_projections(t0_ns),
    ]


def window_projections(t0_ns: int) -> list[Projection]:
    """The per-second windows' histograms of every delivery, warm-up included: `sojourn_per_s`, the
    sojourn by the second of its processing start, `end_to_end_per_s`, the end-to-end time by the
    second of its processing end (each counts the deliveries that started or ended in the second,
    a null value too)."""
    return [
        Projection(
            "sojourn_per_s", F.col("start_ns").isNotNull(), [second_since(t0_ns, "start_ns")], F.col("sojourn_ms")
        ),
        Projection(
            "end_to_end_per_s", F.col("end_ns").isNotNull(), [second_since(t0_ns, "end_ns")], F.col("end_to_end_ms")
        ),
    ]


def window_cells(t0_ns: int) -> list[Cells]:
    """The per-second windows' plain groupings of every delivery, warm-up included, each keyed by the
    second (`t_s`) of its own time, null where that time is: `received_per_s` (deliveries by
    receive), `acked_per_s` (acks by settle) and `ended_per_s` (by processing end, with the mean of
    each of windows.COMPONENTS)."""
    return [
        Cells({"t_s": second_since(t0_ns, "receive_ns")}, {"rows": F.count(F.lit(1))}, name="received_per_s"),
        Cells(
            {"t_s": F.when(is_acked(), second_since(t0_ns, "settle_ns"))},
            {"rows": F.count(F.lit(1))},
            name="acked_per_s",
        ),
        Cells(
            {"t_s": second_since(t0_ns, "end_ns")},
            {name: F.avg(column) for name, column in COMPONENTS.items()},
            name="ended_per_s",
        ),
    ]


def delivery_cells(t0_ns: int, segments: Sequence[Segment], window: tuple[int, int]) -> Cells:
    """The deliveries' plain aggregates per consumer, group, phase, segment and measured: counts (the
    crashed and unsettled ones for churn among them),
    the busy time and the first and last times in ns (exact), the prefetch range, the counts and
    sums behind the model's means, and the throughput window's counts (`window`: [start, end) ns)."""
    start, end = window
    both = F.col("processing_ms").isNotNull() & F.col("processing_ms_actual").isNotNull()
    return Cells(
        keys={
            "consumer": F.col("consumer"),
            "group": F.col("consumer_group"),
            "phase": F.col("phase"),
            "segment": segment_index(segments, t0_ns, "start_ns"),
            "measured": F.col("measured"),
        },
        aggregates={
            "delivered": F.count(F.lit(1)),
            "acked": F.count_if(is_acked()),
            "redelivered": F.count_if(F.col("redelivered")),
            "crashed": F.count_if(F.col("outcome") == "crashed"),
            "unsettled": F.count_if(F.col("outcome") == "unsettled"),
            "busy_ns": F.sum(F.col("end_ns") - F.col("start_ns")),
            "first_ns": F.min("receive_ns"),
            "last_settle_ns": F.max("settle_ns"),
            "last_end_ns": F.max("end_ns"),
            "last_seen_ns": F.max(F.greatest("receive_ns", "start_ns", "end_ns")),
            "last_receive_ns": F.max("receive_ns"),
            "prefetch_min": F.min("prefetch"),
            "prefetch_max": F.max("prefetch"),
            "auto_acks": F.count_if(F.col("outcome") == "auto_ack"),
            "buffer_empty": F.count_if(F.col("buffer_len") == 0),
            "with_buffer_len": F.count("buffer_len"),
            "both": F.count_if(both),
            "drawn_sum": F.sum(F.when(both, F.col("processing_ms"))),
            "achieved_sum": F.sum(F.when(both, F.col("processing_ms_actual"))),
            "received_in_window": F.count_if(in_window("receive_ns", start, end)),
            "acked_in_window": F.count_if(is_acked() & in_window("settle_ns", start, end)),
            **outcome_aggregates(),
        },
    )


_SETTLED_AFTER_PROCESSING = ("ack", "nack_requeue", "nack_discard", "reject")


def outcome_aggregates() -> dict[str, Column]:
    """The outcomes block's counts (analysis.summary.outcomes): deliveries processed and then
    settled by the consumer (`outcome_decided`), those of them nack-requeued, nack-discarded and
    rejected (not CoDel's nacks, which come before processing), the handler's calls and errors."""
    outcome, by = F.col("outcome"), F.col("settled_by")
    after = F.col("end_ns").isNotNull()
    return {
        "outcome_decided": F.count_if(after & outcome.isin(*_SETTLED_AFTER_PROCESSING)),
        "outcome_requeued": F.count_if(after & (outcome == "nack_requeue")),
        "outcome_discarded": F.count_if(after & (outcome == "nack_discard")),
        "outcome_rejected": F.count_if(after & (outcome == "reject")),
        "handler_calls": F.count_if(by.isin("handler", "handler_error")),
        "handler_errors": F.count_if(by == "handler_error"),
    }


def publish_projections(t0_ns: int, segments: Sequence[Segment], window: tuple[int, int]) -> list[Projection]:
    """What the same blocks need of every publish: `confirm`, the histogram of the confirm latency
    of measured publishes; `published_in_window`, the rows published in `window` (by publish_ns;
    id-less rows too); `published_by_segment`, the rows per timeline segment of their intended
    time. Applied to publishes with latency.with_confirm_latency and warmup.mark_measured."""
    start, end = window
    segment = segment_index(segments, t0_ns, "intended_ns")
    return [
        Projection("confirm", F.col("measured") & F.col("confirm_ms").isNotNull(), value=F.col("confirm_ms")),
        Projection("published_in_window", in_window("publish_ns", start, end)),
        Projection("published_by_segment", segment.isNotNull(), [segment]),
    ]


def publish_cells(t0_ns: int) -> list[Cells]:
    """The per-second windows' grouping of every publish row: `published_per_s`, the rows by the second
    (`t_s`) of their publish_ns (null where it is)."""
    return [Cells({"t_s": second_since(t0_ns, "publish_ns")}, {"rows": F.count(F.lit(1))}, name="published_per_s")]
