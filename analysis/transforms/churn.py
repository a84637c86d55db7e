"""Consumer churn: consumers joining, leaving, crashing and losing connections, and what it cost.

A consumer that crashes (`leave: crash`, outcome `crashed`) or loses its connection (outcome
`unsettled`) leaves unacked deliveries behind; the broker requeues them and delivers them again
with `redelivered=true` (DOMAIN.md §4), so a message it had processed but not acked is processed
twice. These frames count that per consumer group and find the class every message one of those
deliveries held ended in; analysis.summary.churn checks that none is `unaccounted`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, functions as F

from ._common import HELD_OUTCOMES, few

__all__ = ["HELD_OUTCOMES", "event_counts", "requeue_counts", "repeats", "held_messages"]


def _group_of(column: str) -> Column:
    """`group/worker/slot` -> `group` (group names can not hold a '/')."""
    return F.substring_index(F.col(column), "/", 1)


def event_counts(events: DataFrame, consumers: DataFrame) -> DataFrame:
    """Per consumer group: joins, rejoins (joins beyond the first of each consumer), clean leaves,
    crashes, and connections lost by its consumers (not by producers or the dead-letter capture)."""
    kind = F.col("kind")
    clean = F.get_json_object(F.col("detail"), "$.clean") == "true"
    mine = events.where(kind.isin("consumer_join", "consumer_leave", "consumer_crash", "connection_lost")).join(
        consumers, events["source"] == consumers["consumer"], "left_semi"
    )
    return (
        mine.groupBy(_group_of("source").alias("group"))
        .agg(
            F.count_if(kind == "consumer_join").alias("joins"),
            F.count_distinct(F.when(kind == "consumer_join", F.col("source"))).alias("_joined"),
            F.count_if((kind == "consumer_leave") & F.coalesce(clean, F.lit(False))).alias("clean_leaves"),
            F.count_if(kind == "consumer_crash").alias("crashes"),
            F.count_if(kind == "connection_lost").alias("connections_lost"),
        )
        .select(
            "group",
            "joins",
            (F.col("joins") - F.col("_joined")).alias("rejoins"),
            "clean_leaves",
            "crashes",
            "connections_lost",
        )
    )


def requeue_counts(deliveries: DataFrame) -> DataFrame:
    """Per consumer group: deliveries requeued because the consumer crashed (`requeued_crashed`) or
    its connection went (`requeued_unsettled`), and deliveries flagged `redelivered`."""
    outcome = F.col("outcome")
    return deliveries.groupBy(F.col("consumer_group").alias("group")).agg(
        F.count_if(outcome == "crashed").alias("requeued_crashed"),
        F.count_if(outcome == "unsettled").alias("requeued_unsettled"),
        F.count_if(F.col("redelivered")).alias("redelivered"),
    )


def repeats(deliveries: DataFrame, done: Column, at: str, name: str, candidates: DataFrame | None = None) -> DataFrame:
    """Per group: messages `done` on more than one delivery, each counted once, under the group of
    its earliest such delivery (the one whose work was repeated).

    `candidates`: message ids among which every repeated one is (e.g. the ids the per-message
    facts count more than one acked or processed delivery for); a small frame, sent to every task,
    so that only their deliveries are shuffled and sorted by id, in one pass over the deliveries.
    Without it every delivery is."""
    rows = deliveries.where(done & F.col("message_id").isNotNull())
    if candidates is not None:
        rows = rows.join(few(candidates.select("message_id")), "message_id", "left_semi")
    by_id = Window.partitionBy("message_id")
    return (
        rows.select("message_id", F.col(at).alias("_at"), F.col("consumer_group").alias("group"))
        .withColumns({"_n": F.count(F.lit(1)).over(by_id), "_first": F.min("_at").over(by_id)})
        .where((F.col("_n") > 1) & (F.col("_at") == F.col("_first")))
        .groupBy("message_id")
        .agg(F.min("group").alias("group"))
        .groupBy("group")
        .agg(F.count(F.lit(1)).alias(name))
    )


def held_messages(deliveries: DataFrame, classified: DataFrame) -> DataFrame:
    """(group, message_id, account) for every message a crashed or unsettled delivery held; an id
    the accounting does not know counts as unaccounted. The held ids are few: they go to every
    task to pick their classes out of `classified`, which is never shuffled."""
    held = (
        deliveries.where(F.col("outcome").isin(*HELD_OUTCOMES) & F.col("message_id").isNotNull())
        .select(F.col("consumer_group").alias("group"), "message_id")
        .distinct()
    )
    accounts = classified.select("message_id", "account").join(
        few(held.select("message_id").distinct()), "message_id", "left_semi"
    )
    return held.join(accounts, "message_id", "left").withColumn(
        "account", F.coalesce(F.col("account"), F.lit("unaccounted"))
    )
