"""What the overall, per-consumer, per-phase and queueing-model blocks need of every delivery and
publish, as one cube each (analysis.cube): the histograms of the latencies, the per-second minima
of the wire time, and the cells of plain aggregates that the driver rolls up
(analysis.summary.deliveries). Each name below is read there.

The cells group the deliveries by consumer, its group, the trace's phase (at receive), the
timeline segment (at start) and whether the delivery is measured (after the warm-up): every
coarser block is a sum, minimum or maximum over them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import functions as F

from analysis.cube import Cells, Projection

from ._common import is_acked
from .phases import Segment, segment_index
from .throughput import in_window
from .windows import COMPONENTS, second_since

__all__ = ["DELIVERY_HISTOGRAMS", "delivery_projections", "window_projections", "delivery_cells", "publish_projections"]

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
    Applied to deliveries with the columns of
    latency.with_delivery_latencies and warmup.mark_measured."""
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
    """The per-second windows' projections of every delivery, warm-up included, each by the second
    of its own time: `delivered_per_s` (receive), `acked_per_s` (the settle of an ack),
    `sojourn_per_s` (processing start; the sojourn its value), `end_to_end_per_s` (processing end;
    the end-to-end time its value) and, not bucketed, `<component>_mean_per_s` for each of
    windows.COMPONENTS (processing end; their sums give the means)."""
    end = F.col("end_ns").isNotNull()
    return [
        Projection("delivered_per_s", F.col("receive_ns").isNotNull(), [second_since(t0_ns, "receive_ns")]),
        Projection("acked_per_s", is_acked() & F.col("settle_ns").isNotNull(), [second_since(t0_ns, "settle_ns")]),
        Projection(
            "sojourn_per_s", F.col("start_ns").isNotNull(), [second_since(t0_ns, "start_ns")], F.col("sojourn_ms")
        ),
        Projection("end_to_end_per_s", end, [second_since(t0_ns, "end_ns")], F.col("end_to_end_ms")),
        *[
            Projection(
                f"{name}_mean_per_s",
                end & F.col(column).isNotNull(),
                [second_since(t0_ns, "end_ns")],
                F.col(column),
                bucketed=False,
            )
            for name, column in COMPONENTS.items()
        ],
    ]


def delivery_cells(t0_ns: int, segments: Sequence[Segment], window: tuple[int, int]) -> Cells:
    """The deliveries' plain aggregates per consumer, group, phase, segment and measured: counts,
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
        },
    )


def publish_projections(t0_ns: int, segments: Sequence[Segment], window: tuple[int, int]) -> list[Projection]:
    """What the same blocks need of every publish: `confirm`, the histogram of the confirm latency
    of measured publishes; `published_in_window`, the rows published in `window` (by publish_ns;
    id-less rows too); `published_by_segment`, the rows per timeline segment of their intended
    time; `published_per_s`, the rows per second of their publish_ns (the per-second windows).
    Applied to publishes with latency.with_confirm_latency and warmup.mark_measured."""
    start, end = window
    segment = segment_index(segments, t0_ns, "intended_ns")
    return [
        Projection("confirm", F.col("measured") & F.col("confirm_ms").isNotNull(), value=F.col("confirm_ms")),
        Projection("published_in_window", in_window("publish_ns", start, end)),
        Projection("published_by_segment", segment.isNotNull(), [segment]),
        Projection("published_per_s", F.col("publish_ns").isNotNull(), [second_since(t0_ns, "publish_ns")]),
    ]
