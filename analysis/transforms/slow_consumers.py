"""Slow consumers: per consumer and minute, the share of sampled seconds in which its prefetch
window was full while the queue had messages ready (docs/slow-consumers.md).

The broker's queue is sampled once a second (`queue_sample` events). At a sample time t a
consumer's outstanding deliveries are those it received at or before t and had not settled by
t (client-side stamps: receive_ns, settle_ns). Computed without a deliveries x samples join:
each delivery is a +1 at receive and a -1 at settle, a running sum per consumer gives the
outstanding count after every change, and the samples, put in the same ordered stream, read the
sum as of their time. An unsettled delivery (the channel closed first) counts until the
consumer's next leave (consumer_leave, connection_lost or consumer_crash event), when the broker
requeues it; without one, until the end of the run.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ._common import NS_PER_S

__all__ = ["queue_samples", "queue_depth_series", "consumer_spans", "slow_consumer_samples",
           "LEAVE_KINDS", "NS_PER_MINUTE"]

LEAVE_KINDS = ("consumer_leave", "connection_lost", "consumer_crash")
"""Events (name = consumer) after which its unsettled deliveries are no longer its own."""
NS_PER_MINUTE = 60 * NS_PER_S


def queue_samples(events: DataFrame) -> DataFrame:
    """The `queue_sample` events as ts_ns, ready, unacked (null without the management API),
    consumers, source, took_ms."""
    detail = F.col("detail")
    return (events.where(F.col("kind") == "queue_sample")
            .select("ts_ns",
                    F.col("value").cast("long").alias("ready"),
                    F.get_json_object(detail, "$.unacked").cast("long").alias("unacked"),
                    F.get_json_object(detail, "$.consumers").cast("long").alias("consumers"),
                    F.get_json_object(detail, "$.source").alias("source"),
                    F.get_json_object(detail, "$.took_ms").cast("double").alias("took_ms")))


def queue_depth_series(samples: DataFrame, t0_ns: int) -> DataFrame:
    """summary.json's `queue_depth`: t_s (seconds since t0), ready, unacked, consumers, in time order."""
    return (samples.select(((F.col("ts_ns") - F.lit(t0_ns)) / F.lit(float(NS_PER_S))).alias("t_s"),
                           "ready", "unacked", "consumers", "ts_ns")
            .orderBy("ts_ns").drop("ts_ns"))


def consumer_spans(deliveries: DataFrame, events: DataFrame) -> DataFrame:
    """Per consumer: group, why it is excluded (null: it has a window), and the span in which
    samples count for it: first join (or receive) to last leave (or receive/settle)."""
    by_delivery = deliveries.groupBy("consumer", F.col("consumer_group").alias("group")).agg(  # group: fixed
        F.bool_or(F.col("outcome") == "auto_ack").alias("auto_ack"),  # fixed per consumer
        F.max("prefetch").alias("max_prefetch"),
        F.min("receive_ns").alias("first_receive_ns"),
        F.greatest(F.max("receive_ns"), F.max("settle_ns")).alias("last_ns"))
    by_event = (events.where(F.col("kind").isin("consumer_join", *LEAVE_KINDS))
                .groupBy(F.col("name").alias("consumer")).agg(
                    F.min(F.when(F.col("kind") == "consumer_join", F.col("ts_ns"))).alias("first_join_ns"),
                    F.max(F.when(F.col("kind") != "consumer_join", F.col("ts_ns"))).alias("last_leave_ns")))
    return (by_delivery.join(by_event, "consumer", "left").select(
        "consumer", "group",
        F.when(F.col("auto_ack"), F.lit("auto_ack"))
         .when(F.col("max_prefetch") <= 0, F.lit("no prefetch limit")).alias("excluded"),
        F.least("first_join_ns", "first_receive_ns").alias("from_ns"),
        F.greatest("last_leave_ns", "last_ns").alias("to_ns")))


def slow_consumer_samples(deliveries: DataFrame, events: DataFrame, t0_ns: int) -> DataFrame:
    """One row per (windowed consumer, queue sample in its span): consumer, group, ts_ns, minute
    (of run time since t0), ready, outstanding, prefetch, slow."""
    consumers = consumer_spans(deliveries, events).where(F.col("excluded").isNull())
    mine = deliveries.join(consumers.select("consumer"), "consumer", "left_semi")
    leaves = (events.where(F.col("kind").isin(*LEAVE_KINDS))
              .select(F.col("name").alias("consumer"), "ts_ns")
              .join(consumers.select("consumer"), "consumer", "left_semi"))

    # An unsettled delivery leaves the window at the consumer's next leave (ties: the leave after).
    after = Window.partitionBy("consumer").orderBy("ts_ns", "is_leave").rowsBetween(
        Window.currentRow, Window.unboundedFollowing)
    unsettled_ends = (
        mine.where(F.col("settle_ns").isNull()).select("consumer", F.col("receive_ns").alias("ts_ns"),
                                                       F.lit(0).alias("is_leave"))
        .unionByName(leaves.select("consumer", "ts_ns", F.lit(1).alias("is_leave")))
        .withColumn("next_leave_ns", F.first(F.when(F.col("is_leave") == 1, F.col("ts_ns")),
                                             ignorenulls=True).over(after))
        .where((F.col("is_leave") == 0) & F.col("next_leave_ns").isNotNull()))

    def _change(ts, delta: int, prefetch) -> list:
        return [ts.alias("ts_ns"), F.lit(delta).alias("delta"), prefetch.cast("int").alias("prefetch"),
                F.lit(0).alias("is_sample"), F.lit(None).cast("long").alias("ready")]

    no_prefetch = F.lit(None)
    prefetch_events = (events.where(F.col("kind").isin("consumer_join", "prefetch_change"))
                       .join(consumers.select(F.col("consumer").alias("name")), "name", "left_semi")
                       .select(F.col("name").alias("consumer"), *_change(
                           F.col("ts_ns"), 0,
                           F.when(F.col("kind") == "prefetch_change", F.col("value"))
                            .otherwise(F.get_json_object("detail", "$.prefetch")))))
    samples = queue_samples(events)
    sample_rows = (consumers.join(samples, (samples.ts_ns >= consumers.from_ns)
                                  & (consumers.to_ns.isNull() | (samples.ts_ns <= consumers.to_ns)))
                   .select("consumer", "ts_ns", F.lit(0).alias("delta"),
                           F.lit(None).cast("int").alias("prefetch"), F.lit(1).alias("is_sample"), "ready"))
    stream = (mine.select("consumer", *_change(F.col("receive_ns"), 1, F.col("prefetch")))
              .unionByName(mine.where(F.col("settle_ns").isNotNull())
                           .select("consumer", *_change(F.col("settle_ns"), -1, no_prefetch)))
              .unionByName(unsettled_ends.select("consumer", *_change(F.col("next_leave_ns"), -1, no_prefetch)))
              .unionByName(prefetch_events)
              .unionByName(sample_rows))
    # Samples sort after the changes at the same instant: "received at or before t, not settled by t".
    upto = Window.partitionBy("consumer").orderBy("ts_ns", "is_sample").rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    return (stream
            .withColumn("outstanding", F.sum("delta").over(upto))
            .withColumn("prefetch", F.last("prefetch", ignorenulls=True).over(upto))
            .where(F.col("is_sample") == 1)
            .join(consumers.select("consumer", "group"), "consumer")
            .select("consumer", "group", "ts_ns",
                    F.floor((F.col("ts_ns") - F.lit(t0_ns)) / F.lit(NS_PER_MINUTE)).cast("int").alias("minute"),
                    "ready", "outstanding", "prefetch",
                    ((F.col("prefetch") > 0) & (F.col("outstanding") >= F.col("prefetch"))
                     & (F.col("ready") > 0)).alias("slow")))
