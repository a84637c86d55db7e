"""Slow consumers: per consumer and minute, the share of sampled seconds in which its prefetch
window was full while the queue had messages ready (docs/slow-consumers.md).

The broker's queue is sampled once a second (`queue_sample` events). At a sample time t a
consumer's outstanding deliveries are those it received at or before t and had not settled by
t (client-side stamps: receive_ns, settle_ns). Computed without a deliveries x samples join:
each delivery is a +1 at receive and a -1 at settle; the changes are summed per consumer and
per sample they precede (no sort of the deliveries), and a running sum over those few rows per
consumer gives the outstanding count each sample reads. An unsettled delivery (the channel
closed first) counts until the consumer's next leave (consumer_leave, connection_lost or
consumer_crash event), when the broker requeues it; without one, until the end of the run.
"""

from __future__ import annotations

import warnings

from pyspark.sql import Column, DataFrame, Window, functions as F

from ._common import NS_PER_S, Transform, few
from .windows import second_since

# The two windows below without a partition order the queue samples (a row a second, read by one
# task): the Spark Connect client warns of every such window as the plan is sent, which a user
# running `sojourn analyze` would read as a problem of theirs.
warnings.filterwarnings("ignore", message="WARN WindowExpression: No Partition Defined", category=UserWarning)

__all__ = [
    "queue_samples",
    "slow_consumer_samples",
    "SPANS_SCHEMA",
    "LEAVE_KINDS",
    "NS_PER_MINUTE",
]

LEAVE_KINDS = ("consumer_leave", "connection_lost", "consumer_crash")
"""Events (name = consumer) after which its unsettled deliveries are no longer its own."""
NS_PER_MINUTE = 60 * NS_PER_S


def queue_samples(events: DataFrame) -> DataFrame:
    """The `queue_sample` events as ts_ns, ready, unacked (null without the management API),
    consumers, source, took_ms: events.queue.queue_samples's reading, in Spark for the join with the
    deliveries (it goes with this module's move to the delivery aggregation, issue 47)."""
    detail = F.col("detail")
    return events.where(F.col("kind") == "queue_sample").select(
        "ts_ns",
        F.col("value").cast("long").alias("ready"),
        F.get_json_object(detail, "$.unacked").cast("long").alias("unacked"),
        F.get_json_object(detail, "$.consumers").cast("long").alias("consumers"),
        F.get_json_object(detail, "$.source").alias("source"),
        F.get_json_object(detail, "$.took_ms").cast("double").alias("took_ms"),
    )


SPANS_SCHEMA = "consumer string, group string, excluded string, from_ns long, to_ns long"
"""The spans' columns (summary.slow_consumers.consumer_spans), for a frame of their rows."""


def slow_consumer_samples(deliveries: DataFrame, events: DataFrame, t0_ns: int, spans: DataFrame) -> DataFrame:
    """One row per (windowed consumer, queue sample in its span): consumer, group, ts_ns, minute
    (of run time since t0), ready, outstanding, prefetch, slow.

    `spans`: the consumers' spans (SPANS_SCHEMA), a frame of a few rows: the query below reads
    them five times."""
    consumers = spans.where(F.col("excluded").isNull())
    mine = deliveries.join(consumers.select("consumer"), "consumer", "left_semi")
    leaves = (
        events.where(F.col("kind").isin(*LEAVE_KINDS))
        .select(F.col("name").alias("consumer"), "ts_ns")
        .join(consumers.select("consumer"), "consumer", "left_semi")
    )

    # An unsettled delivery leaves the window at the consumer's next leave (ties: the leave after).
    after = (
        Window.partitionBy("consumer")
        .orderBy("ts_ns", "is_leave")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    unsettled_ends = (
        mine.where(F.col("settle_ns").isNull())
        .select("consumer", F.col("receive_ns").alias("ts_ns"), F.lit(0).alias("is_leave"))
        .unionByName(leaves.select("consumer", "ts_ns", F.lit(1).alias("is_leave")))
        .withColumn(
            "next_leave_ns", F.first(F.when(F.col("is_leave") == 1, F.col("ts_ns")), ignorenulls=True).over(after)
        )
        .where((F.col("is_leave") == 0) & F.col("next_leave_ns").isNotNull())
    )

    def _change(ts: Column, delta: int, prefetch: Column) -> list[Column]:
        return [ts.alias("ts_ns"), F.lit(delta).alias("delta"), prefetch.cast("int").alias("prefetch")]

    no_prefetch = F.lit(None)
    prefetch_events = (
        events.where(F.col("kind").isin("consumer_join", "prefetch_change"))
        .join(consumers.select(F.col("consumer").alias("name")), "name", "left_semi")
        .select(
            F.col("name").alias("consumer"),
            *_change(
                F.col("ts_ns"),
                0,
                F.when(F.col("kind") == "prefetch_change", F.col("value")).otherwise(
                    F.get_json_object("detail", "$.prefetch")
                ),
            ),
        )
    )
    changes = (
        mine.select("consumer", *_change(F.col("receive_ns"), 1, F.col("prefetch")))
        .unionByName(
            mine.where(F.col("settle_ns").isNotNull()).select("consumer", *_change(F.col("settle_ns"), -1, no_prefetch))
        )
        .unionByName(unsettled_ends.select("consumer", *_change(F.col("next_leave_ns"), -1, no_prefetch)))
        .unionByName(prefetch_events)
    )
    # Sample j (0-based, in time order) sees the changes at or before its time: those whose `slot`,
    # the number of samples strictly before the change, is at most j. Summing each consumer's changes
    # per slot first leaves a few rows per consumer and sampled second to put in order.
    samples = queue_samples(events).withColumn("slot", (F.rank().over(Window.orderBy("ts_ns")) - 1).cast("long"))
    per_slot = (
        changes.transform(_slot_of(samples, t0_ns))
        .groupBy("consumer", "slot")
        .agg(
            F.sum("delta").alias("delta"),
            F.max_by(F.col("prefetch"), F.when(F.col("prefetch").isNotNull(), F.col("ts_ns"))).alias("prefetch"),
        )
        .select(
            "consumer",
            "slot",
            "delta",
            "prefetch",
            F.lit(0).alias("is_sample"),
            F.lit(None).cast("long").alias("ts_ns"),
            F.lit(None).cast("long").alias("ready"),
        )
    )
    sample_rows = consumers.join(
        samples, (samples.ts_ns >= consumers.from_ns) & (consumers.to_ns.isNull() | (samples.ts_ns <= consumers.to_ns))
    ).select(
        "consumer",
        "slot",
        F.lit(0).cast("long").alias("delta"),
        F.lit(None).cast("int").alias("prefetch"),
        F.lit(1).alias("is_sample"),
        "ts_ns",
        "ready",
    )
    upto = (
        Window.partitionBy("consumer")
        .orderBy("slot", "is_sample")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        per_slot.unionByName(sample_rows)
        .withColumn("outstanding", F.sum("delta").over(upto))
        .withColumn("prefetch", F.last("prefetch", ignorenulls=True).over(upto))
        .where(F.col("is_sample") == 1)
        .join(consumers.select("consumer", "group"), "consumer")
        .select(
            "consumer",
            "group",
            "ts_ns",
            F.floor((F.col("ts_ns") - F.lit(t0_ns)) / F.lit(NS_PER_MINUTE)).cast("int").alias("minute"),
            "ready",
            "outstanding",
            "prefetch",
            ((F.col("prefetch") > 0) & (F.col("outstanding") >= F.col("prefetch")) & (F.col("ready") > 0)).alias(
                "slow"
            ),
        )
    )


_LISTED_TIMES = 3


def _slot_of(samples: DataFrame, t0_ns: int) -> Transform:
    """Add `slot` to rows with `ts_ns`: how many of `samples` (ts_ns) are strictly earlier.

    Without a sort of the rows: each whole second since t0 from the first sample's to the last's
    knows how many samples came before it and its own sample times (a frame of a row a second,
    sent to every task); a row adds those of its second that are earlier. Rows before the first
    sample's second count 0, after the last one's all."""
    second = second_since(t0_ns, "ts_ns")
    counts = samples.groupBy(second.alias("_second")).agg(
        F.count(F.lit(1)).alias("_n"), F.collect_list("ts_ns").alias("_times")
    )
    bounds = samples.agg(
        F.min(second).alias("_first_second"), F.max(second).alias("_last_second"), F.count(F.lit(1)).alias("_samples")
    )
    earlier = Window.orderBy("_second").rowsBetween(Window.unboundedPreceding, -1)
    per_second = (
        bounds.select(F.explode(F.sequence("_first_second", "_last_second")).alias("_second"))
        .join(counts, "_second", "left")
        .select(
            "_second",
            F.coalesce(F.sum("_n").over(earlier), F.lit(0)).alias("_before"),
            F.coalesce("_n", F.lit(0)).alias("_n"),
            *[F.get("_times", i).alias(f"_t{i}") for i in range(_LISTED_TIMES)],
            F.coalesce("_times", F.array().cast("array<long>")).alias("_times"),
        )
    )
    bounds = bounds.drop("_last_second")
    listed = [f"_t{i}" for i in range(_LISTED_TIMES)]

    def _slot(rows: DataFrame) -> DataFrame:
        ts = F.col("ts_ns")
        # A second holds one sample, sometimes two: compared one by one (generated code); the
        # list is filtered (a function evaluated row by row) only for a second that holds more.
        earlier_listed = sum((F.coalesce(F.col(t) < ts, F.lit(False)).cast("int") for t in listed), F.lit(0))
        earlier_any = F.size(F.filter("_times", lambda t: t < ts))
        within = F.col("_before") + F.when(F.col("_n") <= _LISTED_TIMES, earlier_listed).otherwise(earlier_any)
        outside = F.when(F.col("_second") < F.col("_first_second"), F.lit(0)).otherwise(F.col("_samples"))
        return (
            rows.withColumn("_second", second)
            .join(few(per_second), "_second", "left")
            .crossJoin(few(bounds))
            .withColumn("slot", F.when(F.col("_n").isNotNull(), within).otherwise(outside).cast("long"))
            .drop("_second", "_before", "_n", *listed, "_times", "_first_second", "_samples")
        )

    return _slot
