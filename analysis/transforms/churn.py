"""Consumer churn: consumers joining, leaving, crashing and losing connections, and what it cost.

A consumer that crashes (`leave: crash`, outcome `crashed`) or loses its connection (outcome
`unsettled`) leaves unacked deliveries behind; the broker requeues them and delivers them again
with `redelivered=true` (DOMAIN.md §4), so a message it had processed but not acked is processed
twice. This module counts that per consumer group and checks that nothing was lost: every message
one of those deliveries held must end in an accounting class other than `unaccounted`.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ._common import is_acked

__all__ = ["HELD_OUTCOMES", "CHURN_FIELDS", "churn_block"]

HELD_OUTCOMES = ("crashed", "unsettled")
"""Delivery outcomes the broker requeues because the consumer's connection went away."""

CHURN_FIELDS = ("joins", "rejoins", "clean_leaves", "crashes", "connections_lost", "requeued_crashed",
                "requeued_unsettled", "redelivered", "processed_twice", "acked_twice", "held_messages",
                "held_unaccounted")


def _group_of(column: str) -> Column:
    """`group/worker/slot` -> `group` (group names can not hold a '/')."""
    return F.substring_index(F.col(column), "/", 1)


def _event_counts(events: DataFrame, consumers: DataFrame) -> DataFrame:
    """Per consumer group: joins, rejoins (joins beyond the first of each consumer), clean leaves,
    crashes, and connections lost by its consumers (not by producers or the dead-letter capture)."""
    kind = F.col("kind")
    clean = F.get_json_object(F.col("detail"), "$.clean") == "true"
    mine = (events.where(kind.isin("consumer_join", "consumer_leave", "consumer_crash", "connection_lost"))
            .join(consumers, events["source"] == consumers["consumer"], "left_semi"))
    return (mine.groupBy(_group_of("source").alias("group")).agg(
        F.count_if(kind == "consumer_join").alias("joins"),
        F.count_distinct(F.when(kind == "consumer_join", F.col("source"))).alias("_joined"),
        F.count_if((kind == "consumer_leave") & F.coalesce(clean, F.lit(False))).alias("clean_leaves"),
        F.count_if(kind == "consumer_crash").alias("crashes"),
        F.count_if(kind == "connection_lost").alias("connections_lost"),
    ).select("group", "joins", (F.col("joins") - F.col("_joined")).alias("rejoins"),
             "clean_leaves", "crashes", "connections_lost"))


def _delivery_counts(deliveries: DataFrame) -> DataFrame:
    outcome = F.col("outcome")
    return deliveries.groupBy(F.col("consumer_group").alias("group")).agg(
        F.count_if(outcome == "crashed").alias("requeued_crashed"),
        F.count_if(outcome == "unsettled").alias("requeued_unsettled"),
        F.count_if(F.col("redelivered")).alias("redelivered"),
    )


def _repeats(deliveries: DataFrame, done: Column, at: str, name: str) -> DataFrame:
    """Per group: messages `done` on more than one delivery, each counted once, under the group of
    its earliest such delivery (the one whose work was repeated)."""
    rows = deliveries.where(done & F.col("message_id").isNotNull())
    # Counted by hashing on numbers alone (a string in an aggregate's buffer makes Spark sort every
    # row); the few repeated ids then find the group of their earliest delivery.
    repeated = (rows.groupBy("message_id").agg(F.count(F.lit(1)).alias("_n"), F.min(at).alias("_first"))
                .where(F.col("_n") > 1))
    first = rows.select("message_id", F.col(at).alias("_first"), F.col("consumer_group").alias("group"))
    return (repeated.join(first, ["message_id", "_first"]).groupBy("message_id").agg(F.min("group").alias("group"))
            .groupBy("group").agg(F.count(F.lit(1)).alias(name)))


def _held(deliveries: DataFrame, classified: DataFrame) -> DataFrame:
    """(group, message_id, account) for every message a crashed or unsettled delivery held; an id
    the accounting does not know counts as unaccounted."""
    held = (deliveries.where(F.col("outcome").isin(*HELD_OUTCOMES) & F.col("message_id").isNotNull())
            .select(F.col("consumer_group").alias("group"), "message_id").distinct())
    return (held.join(classified.select("message_id", "account"), "message_id", "left")
            .withColumn("account", F.coalesce(F.col("account"), F.lit("unaccounted"))))


def _held_counts(held: DataFrame, by: list[str]) -> list:
    return (held.groupBy(*by, "account").agg(F.count(F.lit(1)).alias("n")).collect())


def churn_block(deliveries: DataFrame, events: DataFrame, classified: DataFrame) -> dict[str, Any]:
    """summary.json's `consumers_churn` (docs/summary.md): per consumer group and in total, joins and
    leaves, crashes, lost connections, requeued and redelivered deliveries, messages processed or
    acked twice, and the messages requeued deliveries held by the class they ended in.
    `churn` is false when no consumer rejoined, crashed, lost a connection or had a redelivery."""
    consumers = (deliveries.select("consumer")
                 .unionByName(events.where(F.col("kind") == "consumer_join").select(F.col("source").alias("consumer")))
                 .distinct())
    processed = F.col("end_ns").isNotNull()
    frames = [_event_counts(events, consumers), _delivery_counts(deliveries),
              _repeats(deliveries, processed, "end_ns", "processed_twice"),
              _repeats(deliveries, is_acked(), "settle_ns", "acked_twice")]
    rows: dict[str, dict[str, Any]] = {}
    for frame in frames:
        for r in frame.collect():
            if r["group"] is not None:
                rows.setdefault(r["group"], {}).update({k: int(v) for k, v in r.asDict().items() if k != "group"})
    held = _held(deliveries, classified).cache()
    try:
        for r in _held_counts(held, ["group"]):
            then = rows.setdefault(r["group"], {}).setdefault("held_then", {})
            then[r["account"]] = then.get(r["account"], 0) + int(r["n"])
        total_then: dict[str, int] = {}
        for r in _held_counts(held.select("message_id", "account").distinct(), []):
            total_then[r["account"]] = total_then.get(r["account"], 0) + int(r["n"])
    finally:
        held.unpersist()
    groups = []
    for name in sorted(rows):
        row = {"group": name, **{f: rows[name].get(f, 0) for f in CHURN_FIELDS}}
        row["held_then"] = dict(sorted(rows[name].get("held_then", {}).items()))
        row["held_messages"] = sum(row["held_then"].values())
        row["held_unaccounted"] = row["held_then"].get("unaccounted", 0)
        groups.append(row)
    totals = {f: sum(g[f] for g in groups) for f in CHURN_FIELDS}
    totals["held_then"] = dict(sorted(total_then.items()))
    totals["held_messages"] = sum(total_then.values())  # distinct ids: one message may be held twice
    totals["held_unaccounted"] = total_then.get("unaccounted", 0)
    churn = any(totals[f] for f in ("rejoins", "crashes", "connections_lost", "requeued_crashed",
                                    "requeued_unsettled", "redelivered"))
    return {"churn": churn, "nothing_lost": totals["held_unaccounted"] == 0, "groups": groups, "totals": totals}
