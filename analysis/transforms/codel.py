"""CoDel on the consumers: nacks, time in the dropping state, sojourn before and after CoDel acted,
and where requeued messages ended up (definitions in docs/summary.md, "codel").

A consumer has CoDel on when its delivery rows carry controller state
(`codel_dropping` not null). A *drop* is a delivery the consumer nacked
(`nack_requeue` or `nack_discard`); its `start_ns` is when CoDel decided, as the
delivery left the buffer.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ._common import NS_PER_S, is_acked
from .stats import stats_block, stats_struct

__all__ = ["NACK_OUTCOMES", "requeue_handoffs", "codel_by_consumer", "codel_totals", "codel_block"]

NACK_OUTCOMES = ("nack_requeue", "nack_discard")


def _nacked() -> Column:
    return F.col("outcome").isin(*NACK_OUTCOMES)


def requeue_handoffs(deliveries: DataFrame) -> DataFrame:
    """One row per acked message that had been requeued before its ack: `message_id`,
    `acker` (the consumer of its first ack) and `last_requeuer` (the consumer whose
    nack_requeue was the last one sent before that delivery was received)."""
    requeues = (deliveries.where((F.col("outcome") == "nack_requeue") & F.col("message_id").isNotNull())
                .select("message_id", F.col("consumer").alias("_requeuer"), F.col("settle_ns").alias("_requeue_ns")))
    acks = (deliveries.where(is_acked() & F.col("message_id").isNotNull())
            .groupBy("message_id")
            .agg(F.min_by(F.struct("consumer", "receive_ns"), F.struct("settle_ns", "receive_ns")).alias("_ack")))
    return (
        acks.join(requeues, "message_id")
        .where(F.col("_requeue_ns") <= F.col("_ack.receive_ns"))
        .groupBy("message_id")
        .agg(F.first("_ack.consumer").alias("acker"),
             F.max_by("_requeuer", "_requeue_ns").alias("last_requeuer"))
    )


def _dropping_ns() -> Column:
    """Per row: time until the consumer's next decision if this one left CoDel dropping."""
    order = Window.partitionBy("consumer").orderBy("start_ns", "receive_ns", "delivery_tag")
    until_next = F.lead("start_ns").over(order) - F.col("start_ns")
    return F.when(F.col("start_ns").isNotNull() & F.col("codel_dropping"), until_next)


def codel_by_consumer(deliveries: DataFrame) -> DataFrame:
    """One row per consumer that had CoDel on or acked a message another consumer requeued.

    Columns: consumer, group, codel_on, decided (deliveries that left its buffer),
    nacks, requeued, discarded, nack_share (nacks / decided), dropping_s (null with
    CoDel off), first_drop_ns, sojourn_before_ms / sojourn_after_ms (stats structs
    over `measured` deliveries that left the buffer before / from the consumer's
    first drop on; all of them are "before" if it never dropped) and
    acked_requeued_from_others. Needs `sojourn_ms` and `measured`
    (latency.with_delivery_latencies, warmup.mark_measured).
    """
    handoffs = (requeue_handoffs(deliveries).where(F.col("acker") != F.col("last_requeuer"))
                .groupBy(F.col("acker").alias("consumer"))
                .agg(F.count(F.lit(1)).alias("acked_requeued_from_others")))
    first_drop = (deliveries.groupBy("consumer")
                  .agg(F.min(F.when(_nacked(), F.col("start_ns"))).alias("first_drop_ns")))
    rows = deliveries.join(first_drop, "consumer").withColumn("_dropping_ns", _dropping_ns())
    left_buffer = F.col("start_ns").isNotNull()
    measured = F.col("measured") & left_buffer
    before = F.col("first_drop_ns").isNull() | (F.col("start_ns") < F.col("first_drop_ns"))
    codel_on = F.count_if(F.col("codel_dropping").isNotNull()) > 0
    nacks = F.count_if(_nacked())
    decided = F.count_if(left_buffer)
    per_consumer = rows.groupBy("consumer").agg(
        F.first("consumer_group", ignorenulls=True).alias("group"),
        codel_on.alias("codel_on"),
        decided.alias("decided"),
        nacks.alias("nacks"),
        F.count_if(F.col("outcome") == "nack_requeue").alias("requeued"),
        F.count_if(F.col("outcome") == "nack_discard").alias("discarded"),
        F.when(decided > 0, nacks / decided).alias("nack_share"),
        F.when(codel_on, F.coalesce(F.sum("_dropping_ns"), F.lit(0)) / F.lit(NS_PER_S)).alias("dropping_s"),
        F.first("first_drop_ns").alias("first_drop_ns"),
        stats_struct(F.when(measured & before, F.col("sojourn_ms"))).alias("sojourn_before_ms"),
        stats_struct(F.when(measured & ~before, F.col("sojourn_ms"))).alias("sojourn_after_ms"),
    )
    return (
        per_consumer.join(handoffs, "consumer", "left")
        .withColumn("acked_requeued_from_others", F.coalesce("acked_requeued_from_others", F.lit(0)))
        .where(F.col("codel_on") | (F.col("acked_requeued_from_others") > 0))
        .orderBy("consumer")
    )


def codel_totals(deliveries: DataFrame) -> DataFrame:
    """One row over the consumers with CoDel on: nacks, requeued, discarded, nack_share,
    dropping_s; and over message ids: requeued_messages (ids nack-requeued at least
    once), requeued_acked_by_other / requeued_acked_by_same (acked by a consumer other
    than / the same as the one that last requeued it), requeued_not_acked."""
    on = (deliveries.groupBy("consumer")
          .agg((F.count_if(F.col("codel_dropping").isNotNull()) > 0).alias("_on")))
    rows = deliveries.join(on, "consumer").where("_on").withColumn("_dropping_ns", _dropping_ns())
    nacks = F.count_if(_nacked())
    decided = F.count_if(F.col("start_ns").isNotNull())
    per_row = rows.agg(
        nacks.alias("nacks"),
        F.count_if(F.col("outcome") == "nack_requeue").alias("requeued"),
        F.count_if(F.col("outcome") == "nack_discard").alias("discarded"),
        F.when(decided > 0, nacks / decided).alias("nack_share"),
        (F.coalesce(F.sum("_dropping_ns"), F.lit(0)) / F.lit(NS_PER_S)).alias("dropping_s"),
    )
    requeued_ids = (deliveries.where((F.col("outcome") == "nack_requeue") & F.col("message_id").isNotNull())
                    .agg(F.count_distinct("message_id").alias("requeued_messages")))
    handoffs = requeue_handoffs(deliveries).agg(
        F.count_if(F.col("acker") != F.col("last_requeuer")).alias("requeued_acked_by_other"),
        F.count_if(F.col("acker") == F.col("last_requeuer")).alias("requeued_acked_by_same"),
    )
    return (per_row.crossJoin(requeued_ids).crossJoin(handoffs)
            .withColumn("requeued_not_acked", F.col("requeued_messages") - F.col("requeued_acked_by_other")
                        - F.col("requeued_acked_by_same")))


# --- the summary block ----------------------------------------------------------------

_CONSUMER_FIELDS = ("consumer", "group", "codel_on", "decided", "nacks", "requeued", "discarded",
                    "nack_share", "dropping_s", "acked_requeued_from_others")
_TOTAL_FIELDS = ("nacks", "requeued", "discarded", "nack_share", "dropping_s", "requeued_messages",
                 "requeued_acked_by_other", "requeued_acked_by_same", "requeued_not_acked")


def codel_block(deliveries: DataFrame) -> dict[str, Any]:
    """summary.json's `codel` block: {"consumers": [...], "totals": {...}}.

    `consumers` is empty when no consumer had CoDel on and none acked a requeued message.
    """
    consumers = []
    for r in deliveries.transform(codel_by_consumer).collect():
        row = {f: r[f] for f in _CONSUMER_FIELDS}
        row["sojourn_before_ms"] = stats_block(r["sojourn_before_ms"])
        row["sojourn_after_ms"] = stats_block(r["sojourn_after_ms"])
        consumers.append(row)
    totals = deliveries.transform(codel_totals).first()
    return {"consumers": consumers,
            "totals": {f: (totals[f] if f in ("nack_share", "dropping_s") else int(totals[f] or 0))
                       for f in _TOTAL_FIELDS}}
