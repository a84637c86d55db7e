"""The queueing-model check's round trip as the traces show it: the time from an ack to the delivery
it drew, paired per row and aggregated into a cube of its own (one Spark action; the driver rolls
it up in summary.model.ack_to_delivery_rows). Its other inputs roll up from the deliveries' cube
(summary.deliveries); the arithmetic on them, the definitions of p, R and R_p95, and the regime rule
are analysis.summary.model's.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F
from pyspark.sql.types import IntegralType

from analysis.cube import Projection

from ._common import NS_PER_MS

__all__ = [
    "ack_to_delivery",
    "ack_to_delivery_projections",
]


_TAG_BITS = 40
"""ack_to_delivery's packed key: a consumer's code in the bits above these, the delivery tag in them (a
channel's tags stay below 2^40: a trillion deliveries)."""


def ack_to_delivery(deliveries: DataFrame) -> DataFrame:
    """Each measured delivery an ack drew: its `consumer`, `phase` and `gap_ms`, the time from the ack
    to the delivery (aggregated by ack_to_delivery_projections).

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
    keyed so); the latest-ack pick groups on the join's own partitioning (no second shuffle).
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
    return (
        drawn.join(acks.hint("shuffle_hash"), keys)
        # published by the ack (else nothing was waiting), before the delivery; filtered ahead of the
        # latest-ack pick, which it does not change (an older ack of the tag fails it too)
        .where((F.col("publish_ns") <= F.col("_ack_ns")) & (F.col("_ack_ns") <= F.col("receive_ns")))
        .groupBy(*keys, "receive_ns", "phase", "publish_ns")
        .agg(F.max("_ack_ns").alias("_ack_ns"))
        .select(consumer, "phase", ((F.col("receive_ns") - F.col("_ack_ns")) / F.lit(NS_PER_MS)).alias("gap_ms"))
    )


def ack_to_delivery_projections() -> list[Projection]:
    """The cube of ack_to_delivery's pairs: the gaps' log-bucket histogram per (consumer, phase), of
    which the driver merges a consumer's whole run (summary.model.ack_to_delivery_rows)."""
    return [Projection("ack_to_delivery", F.lit(True), [F.col("consumer"), F.col("phase")], F.col("gap_ms"))]
