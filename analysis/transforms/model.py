"""The queueing-model check's inputs measured from the traces (DOMAIN.md §2), and the per-consumer
breakdowns beside it. The arithmetic on them, the definitions of p, R and R_p95,
and the regime rule are analysis.summary.model's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, GroupedData, functions as F
from pyspark.sql.types import IntegralType

from ._common import NS_PER_MS, NS_PER_S, Transform
from .stats import merged_stats, percentiles
from .utilisation import span_parts, utilisation, wall_between
from .windows import second_since

__all__ = [
    "model_inputs",
    "model_parts",
    "ack_to_delivery",
]


def model_parts() -> list[Column]:
    """Aggregates of a group's deliveries that model_inputs rolls up over coarser groupings, besides
    utilisation.span_parts: the prefetch range, the last processing end, whether it acked
    automatically, and the counts and sums behind the means over measured deliveries."""
    measured = F.col("measured")
    both = measured & F.col("processing_ms").isNotNull() & F.col("processing_ms_actual").isNotNull()
    return [
        F.min("prefetch").alias("prefetch_min"),
        F.max("prefetch").alias("prefetch_max"),
        F.max("end_ns").alias("_last_end_ns"),
        F.bool_or(F.col("outcome") == "auto_ack").alias("auto_ack"),
        F.count_if(measured).alias("_measured"),
        F.count_if(measured & (F.col("buffer_len") == 0)).alias("_empty"),
        F.count_if(measured & F.col("buffer_len").isNotNull()).alias("_with_buffer_len"),
        F.count_if(both).alias("_both"),
        F.sum(F.when(both, F.col("processing_ms"))).alias("_drawn_sum"),
        F.sum(F.when(both, F.col("processing_ms_actual"))).alias("_achieved_sum"),
    ]


def model_inputs(
    t0_ns: int,
    sets: Sequence[Sequence[str]] = (("consumer",),),
    partials: DataFrame | None = None,
    metrics: tuple[str, str, str] = ("processing", "broker_network", "sojourn_ms"),
) -> Transform:
    """One row per consumer with the measured inputs and outcomes of the model check.

    Over measured deliveries (warm-up excluded): p (mean processing), p99 processing,
    min broker_network, p95 of the per-second minima, mean sojourn, the share that arrived
    at an empty client buffer (`buffer_empty_share`), and over those with both the drawn and
    the achieved processing time, their means (`processing_drawn_ms`, `processing_achieved_ms`,
    `processing_count`); over all deliveries: min/max prefetch, whether the consumer acked
    automatically, throughput = acked per second of wall time (first receive to last settle),
    utilisation, and that span in seconds since t0 (`span_start_s`, `span_end_s`). Needs
    with_delivery_latencies and mark_measured.

    `sets`: the keys to group by, one grouping per set in the same pass over the deliveries, e.g.
    [("consumer",), ("consumer", "phase")] with the trace's phase column: every row has a column
    per key of any set, null for the keys its own set leaves out (the whole run's rows have a null
    phase; a delivery's phase is never null).

    `partials`: utilisation.consumer_partials of these deliveries with model_parts among its
    aggregates and, as its `metrics`, the processing time, broker_network and sojourn of measured
    deliveries (approximate percentiles only: their sketches merge). The sets are then rolled up
    from its rows, a few per consumer, and only the per-second minima read the deliveries again.
    """
    keys = list(dict.fromkeys(k for keyset in sets for k in keyset))

    def by(frame: DataFrame, *more: str) -> GroupedData:
        return frame.groupingSets([[*keyset, *more] for keyset in sets], *keys, *more)

    which = F.concat_ws(",", *[F.grouping(k).cast("string") for k in keys]).alias("_set")  # the row's set

    def _inputs(deliveries: DataFrame) -> DataFrame:
        measured = deliveries.where(F.col("measured"))
        # A row per key and second (the finest grain, a few per consumer and second), then each set's
        # minima from those rows: the grouping sets copy partial rows, not every delivery.
        seconds = (
            measured.where(F.col("broker_network_ms").isNotNull())
            .groupBy(*keys, second_since(t0_ns, "receive_ns").alias("_t_s"))
            .agg(F.min("broker_network_ms").alias("_min_bn"))
        )
        per_second = (
            by(seconds, "_t_s")
            .agg(F.min("_min_bn").alias("_min_bn"), which)
            .groupBy(*keys, "_set")
            .agg(F.percentile("_min_bn", 0.95).alias("transit_p95_ms"))
        )  # a row a second: exact
        if partials is None:
            both = F.col("processing_ms").isNotNull() & F.col("processing_ms_actual").isNotNull()
            # Apart from the grouping over every delivery: the percentile would make every aggregate of one
            # grouping an object-hash aggregate (10M messages: slower, tried twice).
            stats = by(measured).agg(
                F.avg("processing_ms_actual").alias("processing_mean_ms"),
                percentiles(F.col("processing_ms_actual"), [0.99])[0].alias("processing_p99_ms"),
                F.min("broker_network_ms").alias("transit_min_ms"),
                F.avg("sojourn_ms").alias("sojourn_mean_ms"),
                F.count(F.lit(1)).alias("measured_deliveries"),
                F.avg((F.col("buffer_len") == 0).cast("double")).alias("buffer_empty_share"),
                F.avg(F.when(both, F.col("processing_ms"))).alias("processing_drawn_ms"),
                F.avg(F.when(both, F.col("processing_ms_actual"))).alias("processing_achieved_ms"),
                F.count_if(both).alias("processing_count"),
                which,
            )
            # Per key of the finest grain, then per set from those rows, as the per-second minima.
            partial = deliveries.groupBy(*keys).agg(*span_parts(), *model_parts())
        else:
            missing = sorted({"prefetch_min", "_measured", "_both", *metrics} - set(partials.columns))
            if missing:  # a caller's mistake, not the traces': say what the partials lack
                raise ValueError(f"partials without {missing}: consumer_partials needs model_parts() and {metrics}")
            stats, partial = _rolled_up_stats(by(partials), keys, which, *metrics), partials
        overall = (
            by(partial)
            .agg(
                F.min("prefetch_min").alias("prefetch_min"),
                F.max("prefetch_max").alias("prefetch_max"),
                F.sum("_acked").alias("_acked"),
                F.max("_last_settle_ns").alias("_last_settle_ns"),
                F.max("_last_end_ns").alias("_last_end_ns"),
                F.max("_last_seen_ns").alias("_last_seen_ns"),
                F.min("_first_ns").alias("_first_ns"),
                F.sum("_busy_ns").alias("_busy_ns"),
                F.bool_or("auto_ack").alias("auto_ack"),
                which,
            )
            .withColumns(
                {
                    # throughput's wall: to the last settle or processing end
                    "_wall_ns": F.coalesce("_last_settle_ns", "_last_end_ns") - F.col("_first_ns"),
                    "_wall_all_ns": wall_between(F.col("_last_settle_ns"), F.col("_last_seen_ns"), F.col("_first_ns")),
                }
            )
            .select(
                *keys,
                "_set",
                "prefetch_min",
                "prefetch_max",
                "auto_ack",
                ((F.col("_first_ns") - F.lit(t0_ns)) / F.lit(float(NS_PER_S))).alias("span_start_s"),
                ((F.col("_first_ns") + F.col("_wall_all_ns") - F.lit(t0_ns)) / F.lit(float(NS_PER_S))).alias(
                    "span_end_s"
                ),
                F.when(F.col("_wall_ns") > 0, F.col("_acked") / (F.col("_wall_ns") / F.lit(1e9))).alias(
                    "throughput_per_s"
                ),
                utilisation(F.col("_busy_ns"), F.col("_wall_all_ns")).alias("utilisation"),
            )
        )
        # The three groupings' rows, a few per consumer, put side by side per group: a union grouped
        # rather than joins, which would need null-safe keys for the keys a set leaves out. Every group
        # of the other two is one of `overall`'s (they see a subset of its rows).
        parts = [overall, stats, per_second]
        values = [c for part in parts for c in part.columns if c not in (*keys, "_set")]
        return (
            functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)
            .groupBy(*keys, "_set")
            .agg(*[F.first(c, ignorenulls=True).alias(c) for c in values])
            .drop("_set")
            .orderBy(*keys)
        )

    return _inputs


def _rolled_up_stats(
    grouped: GroupedData, keys: Sequence[str], which: Column, processing: str, transit: str, sojourn: str
) -> DataFrame:
    """model_inputs' statistics over measured deliveries, from partial rows (consumer_partials with
    model_parts) grouped by the sets: the same columns as from the deliveries, null where a group
    had no measured delivery (the deliveries' grouping would have had no row for it)."""
    measured = F.sum("_measured")

    def ratio(part: str, whole: str) -> Column:
        return F.when(F.sum(whole) > 0, F.sum(part) / F.sum(whole))

    processing_stats, sojourn_stats = F.col("_processing"), F.col("_sojourn")
    return grouped.agg(
        merged_stats(processing, ("mean", "p99")).alias("_processing"),
        merged_stats(sojourn, ("mean",)).alias("_sojourn"),
        F.min(F.col(transit)["min"]).alias("transit_min_ms"),
        F.when(measured > 0, measured).alias("measured_deliveries"),
        ratio("_empty", "_with_buffer_len").alias("buffer_empty_share"),
        ratio("_drawn_sum", "_both").alias("processing_drawn_ms"),
        ratio("_achieved_sum", "_both").alias("processing_achieved_ms"),
        F.when(measured > 0, F.sum("_both")).alias("processing_count"),
        which,
    ).select(  # in the order of the deliveries' grouping
        *keys,
        processing_stats["mean"].alias("processing_mean_ms"),
        processing_stats["p99"].alias("processing_p99_ms"),
        "transit_min_ms",
        sojourn_stats["mean"].alias("sojourn_mean_ms"),
        "measured_deliveries",
        "buffer_empty_share",
        "processing_drawn_ms",
        "processing_achieved_ms",
        "processing_count",
        "_set",
    )


_TAG_BITS = 40
"""ack_to_delivery's packed key: a consumer's code in the bits above these, the delivery tag in them (a
channel's tags stay below 2^40: a trillion deliveries)."""


def ack_to_delivery(deliveries: DataFrame) -> DataFrame:
    """Per consumer and phase, and per consumer (phase null): the time from an ack to the delivery
    it drew, over measured deliveries: count, min, p50 and p95 (`ack_to_delivery_*`).

    With prefetch n and acks in delivery order, the broker sends a channel's k-th delivery only
    once the ack of its (k-n)-th has arrived; if the message was already published when that ack
    was sent, it was waiting in the broker and went out as soon as the ack got there: receive_k -
    settle_(k-n) is then the wire time of the round trip, ack out plus delivery back (R - p).
    Deliveries published after the ack (the queue was empty), redeliveries (their publish time
    says nothing of when they were requeued), auto-ack and unlimited prefetch draw nothing.
    A consumer that joined again numbers its deliveries from 1 on its new channel: the ack paired
    is the latest of that number at or before the delivery (its own channel's).

    One join of two narrow projections of the deliveries on (consumer, delivery tag) (one long where the
    consumer is a code, as in the job's cache: a map of longs instead of one of byte strings), hashed
    rather than sorted (pairing rows by tag needs a shuffle; no grouping the job already does is
    keyed so); the latest-ack pick groups on the join's own partitioning (no second shuffle); the
    two grouping sets shuffle only their partial aggregates.
    """
    windowed = F.col("outcome") != "auto_ack"
    packed = isinstance(deliveries.schema["consumer"].dataType, IntegralType)
    # A consumer given as its code (the job's cached deliveries) pairs by one long, the code above the
    # tag, which Spark hashes in a map of longs; a name pairs by (consumer, tag).
    keys = ["_key"] if packed else ["consumer", "_tag"]

    def keyed(tag: Column) -> list[Column]:
        if not packed:
            return [F.col("consumer"), tag.alias("_tag")]
        return [F.shiftleft(F.col("consumer").cast("long"), _TAG_BITS).bitwiseOR(tag).alias("_key")]

    acks = deliveries.where(windowed & F.col("settle_ns").isNotNull()).select(
        *keyed(F.col("delivery_tag")), F.col("settle_ns").alias("_ack_ns")
    )
    drawn_tag = F.col("delivery_tag") - F.col("prefetch")
    drawn = deliveries.where(
        F.col("measured")
        & windowed
        & ~F.col("redelivered")
        & F.col("publish_ns").isNotNull()
        & (F.col("prefetch") > 0)
        & (drawn_tag > 0)  # a channel's tags start at 1: the first deliveries were drawn by no ack
    ).select(*keyed(drawn_tag), "phase", "receive_ns", "publish_ns")
    consumer = F.shiftright("_key", _TAG_BITS).cast("int").alias("consumer") if packed else "consumer"
    pairs = (
        drawn.join(acks.hint("shuffle_hash"), keys)
        # published by the ack (else nothing was waiting), before the delivery; filtered ahead of the
        # latest-ack pick, which it does not change (an older ack of the tag fails it too)
        .where((F.col("publish_ns") <= F.col("_ack_ns")) & (F.col("_ack_ns") <= F.col("receive_ns")))
        .groupBy(*keys, "receive_ns", "phase", "publish_ns")
        .agg(F.max("_ack_ns").alias("_ack_ns"))
        .select(consumer, "phase", ((F.col("receive_ns") - F.col("_ack_ns")) / F.lit(NS_PER_MS)).alias("_gap_ms"))
    )
    gap = F.col("_gap_ms")
    q = percentiles(gap, [0.5, 0.95])
    return (
        # (consumer, phase) and (consumer): a rollup would add the grand total, a third sketch per pair
        pairs.groupingSets([["consumer", "phase"], ["consumer"]], "consumer", "phase")
        .agg(
            F.grouping("phase").alias("_whole_run"),
            F.count(gap).alias("ack_to_delivery_count"),
            F.min(gap).alias("ack_to_delivery_min_ms"),
            q[0].alias("ack_to_delivery_p50_ms"),
            q[1].alias("ack_to_delivery_p95_ms"),
        )
        .select(
            "consumer",
            F.when(F.col("_whole_run") == 0, F.col("phase")).alias("phase"),
            "ack_to_delivery_count",
            "ack_to_delivery_min_ms",
            "ack_to_delivery_p50_ms",
            "ack_to_delivery_p95_ms",
        )  # unordered: the summary looks rows up by (consumer, phase), and a sort is one more Spark job
    )
