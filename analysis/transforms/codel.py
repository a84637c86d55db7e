"""CoDel on the consumers: nacks, time in the dropping state, sojourn before and after CoDel acted,
and where requeued messages ended up (definitions in docs/summary.md, "codel").

A consumer has CoDel on when its delivery rows carry controller state
(`codel_dropping` not null). A *drop* is a delivery the consumer nacked
(`nack_requeue` or `nack_discard`); its `start_ns` is when CoDel decided, as the
delivery left the buffer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, Window, WindowSpec, functions as F

from ._common import NS_PER_S, Transform, few, is_acked
from .stats import stats_struct

__all__ = [
    "NACK_OUTCOMES",
    "nacked",
    "requeue_handoffs",
    "codel_state",
    "requeue_takers",
    "codel_by_consumer",
    "codel_totals",
]

NACK_OUTCOMES = ("nack_requeue", "nack_discard")


def nacked() -> Column:
    """True for a delivery the consumer nacked (NACK_OUTCOMES)."""
    return F.col("outcome").isin(*NACK_OUTCOMES)


def requeue_handoffs(deliveries: DataFrame) -> DataFrame:
    """One row per message id that was nack-requeued at least once: `message_id`, `acker`
    (the consumer of its first ack, null if it was never acked) and `last_requeuer` (the
    consumer whose nack_requeue was the last one sent before that acked delivery was
    received; the last one of all if it was never acked; null if it was only requeued
    after its ack, a duplicate delivery).

    Only the acks of requeued ids are grouped: the requeued ids, a small share of the deliveries,
    go to every task (a broadcast semi-join), so the acked deliveries are neither shuffled nor
    grouped by id."""
    requeues = deliveries.where((F.col("outcome") == "nack_requeue") & F.col("message_id").isNotNull()).select(
        "message_id", F.col("consumer").alias("_requeuer"), F.col("settle_ns").alias("_requeue_ns")
    )
    acks = (
        deliveries.where(is_acked() & F.col("message_id").isNotNull())
        .join(few(requeues.select("message_id").distinct()), "message_id", "left_semi")
        .groupBy("message_id")
        .agg(F.min_by(F.struct("consumer", "receive_ns"), F.struct("settle_ns", "receive_ns")).alias("_ack"))
    )
    before_ack = F.col("_ack").isNull() | (F.col("_requeue_ns") <= F.col("_ack.receive_ns"))
    return (
        requeues.join(acks, "message_id", "left")
        .groupBy("message_id")
        .agg(
            F.first("_ack.consumer", ignorenulls=True).alias("acker"),
            F.max_by(F.when(before_ack, F.col("_requeuer")), F.when(before_ack, F.col("_requeue_ns"))).alias(
                "last_requeuer"
            ),
        )
    )


def _consumer_order() -> WindowSpec:
    return Window.partitionBy("consumer").orderBy("start_ns", "receive_ns", "delivery_tag")


def codel_state(deliveries: DataFrame) -> DataFrame:
    """One row per consumer: `first_drop_ns` (the start_ns of its first nack; null if it nacked none),
    `codel_on` (its delivery rows carry controller state) and `touched` (CoDel on, or it nacked)."""
    on = F.count_if(F.col("codel_dropping").isNotNull()) > 0
    return deliveries.groupBy("consumer").agg(
        F.min(F.when(nacked(), F.col("start_ns"))).alias("first_drop_ns"),
        on.alias("codel_on"),
        (on | (F.count_if(nacked()) > 0)).alias("touched"),
    )


def requeue_takers(handoffs: DataFrame) -> DataFrame:
    """Applied to requeue_handoffs: one row per consumer that acked a message another consumer
    requeued last, with how many (`acked_requeued_from_others`)."""
    return (
        handoffs.where(F.col("acker") != F.col("last_requeuer"))
        .groupBy(F.col("acker").alias("consumer"))
        .agg(F.count(F.lit(1)).alias("acked_requeued_from_others"))
    )


class _Kept(NamedTuple):
    """What codel_by_consumer and codel_by_consumer_of read from the collected state and takers."""

    on: list[str]  # the consumers with CoDel on
    taken: dict[str, int]  # consumer -> how many messages it acked that another consumer requeued last
    kept: list[str]  # the consumers listed: on, or taken from
    first_drops: dict[str, int]  # consumer -> the start_ns of its first nack


def _kept(state: Sequence[Sequence[Any]], takers: Sequence[Sequence[Any]]) -> _Kept:
    state = [row for row in state if row[0] is not None]  # a delivery without a consumer is no one's
    on = sorted(str(row[0]) for row in state if row[2])
    taken = {str(row[0]): int(row[1]) for row in takers if row[0] is not None}
    drops = {str(row[0]): int(row[1]) for row in state if row[1] is not None}
    return _Kept(on, taken, sorted(set(on) | set(taken)), drops)


def _among(names: Sequence[str]) -> Column:
    """True for a row of one of the consumers `names` (none: a literal false, which prunes a pass)."""
    return F.col("consumer").isin(*names) if names else F.lit(False)


def _by_name(values: Mapping[Any, int], otherwise: int | None) -> Column:
    """The row's consumer's value in `values` (a literal map keyed as the consumer column is), a long;
    `otherwise` for one not in it."""
    pairs = [c for name in sorted(values) for c in (F.lit(name), F.lit(values[name]).cast("long"))]
    found = F.create_map(*pairs)[F.col("consumer")] if values else F.lit(None)
    return F.coalesce(found, F.lit(otherwise)).cast("long")


def _finished(kept: _Kept, per_consumer: DataFrame, deliveries: DataFrame) -> DataFrame:
    """per_consumer's rows with the time dropping (an ordered pass over the rows of the consumers with
    CoDel on only: each decision needs its successor), codel_on and acked_requeued_from_others."""
    left_buffer = F.col("start_ns").isNotNull()
    dropping = (
        deliveries.where(_among(kept.on))  # none: no pass
        .withColumn(
            "_dropping_ns",
            F.when(
                left_buffer & F.col("codel_dropping"),
                F.lead("start_ns").over(_consumer_order()) - F.col("start_ns"),
            ),
        )
        .groupBy("consumer")
        .agg(F.sum("_dropping_ns").alias("_dropping_ns"))
    )
    codel_on = _among(kept.on)
    return (
        per_consumer.join(dropping, "consumer", "left")
        .withColumns(
            {
                "codel_on": codel_on,
                "dropping_s": F.when(codel_on, F.coalesce(F.col("_dropping_ns"), F.lit(0)) / F.lit(NS_PER_S)),
                "acked_requeued_from_others": _by_name(kept.taken, 0),
            }
        )
        .drop("_dropping_ns")
        .orderBy("consumer")
    )


def codel_by_consumer(state: Sequence[Sequence[Any]], takers: Sequence[Sequence[Any]]) -> Transform:
    """Applied to deliveries, with `state` the collected rows of deliveries.transform(codel_state)
    and `takers` those of handoffs.transform(requeue_takers): one row per consumer that had CoDel on
    or acked a message another consumer requeued. Both go in as literals (a few values per
    consumer), so the query neither aggregates a delivery for them nor joins one to them: the
    consumers kept are a list every row is tested against, a consumer's first drop a literal map
    looked up by name (10M deliveries, alternated in one JVM: 16.5, 13.1 and 13.2 s against 21.5,
    15.8 and 13.6 s with both as broadcast joins). With no consumer on CoDel it skips the ordered
    pass over their rows.

    Columns: consumer, group, codel_on, decided (deliveries that left its buffer),
    nacks, requeued, discarded, nack_share (nacks / decided), dropping_s (null with
    CoDel off), first_drop_ns, sojourn_before_ms / sojourn_after_ms (stats structs
    over `measured` deliveries that left the buffer before / from the consumer's
    first drop on; all of them are "before" if it never dropped) and
    acked_requeued_from_others. Deliveries need `sojourn_ms` and `measured`
    (latency.with_delivery_latencies, warmup.mark_measured).

    Time dropping: the sum, over the consumer's decisions taken in the dropping
    state, of the time to its next decision (delivery rows ordered by start_ns).
    """
    kept = _kept(state, takers)

    def _by_consumer(deliveries: DataFrame) -> DataFrame:
        left_buffer = F.col("start_ns").isNotNull()
        rows = deliveries.where(_among(kept.kept)).withColumn("first_drop_ns", _by_name(kept.first_drops, None))
        measured = F.col("measured") & left_buffer
        before = F.col("first_drop_ns").isNull() | (F.col("start_ns") < F.col("first_drop_ns"))
        nacks = F.count_if(nacked())
        decided = F.count_if(left_buffer)
        per_consumer = rows.groupBy("consumer", F.col("consumer_group").alias("group")).agg(  # group: fixed
            decided.alias("decided"),
            nacks.alias("nacks"),
            F.count_if(F.col("outcome") == "nack_requeue").alias("requeued"),
            F.count_if(F.col("outcome") == "nack_discard").alias("discarded"),
            F.when(decided > 0, nacks / decided).alias("nack_share"),
            F.first("first_drop_ns").alias("first_drop_ns"),
            stats_struct(F.when(measured & before, F.col("sojourn_ms"))).alias("sojourn_before_ms"),
            stats_struct(F.when(measured & ~before, F.col("sojourn_ms"))).alias("sojourn_after_ms"),
        )
        return _finished(kept, per_consumer, deliveries)

    return _by_consumer


def codel_totals(handoffs: DataFrame) -> Transform:
    """Applied to the codel_by_consumer frame: one row with nacks, requeued, discarded,
    nack_share and dropping_s over the consumers with CoDel on; and, from `handoffs`,
    requeued_messages (ids nack-requeued at least once), requeued_acked_by_other /
    requeued_acked_by_same (acked by a consumer other than / the same as the one that
    last requeued it) and requeued_not_acked (never acked)."""
    follow = handoffs.agg(
        F.count(F.lit(1)).alias("requeued_messages"),
        F.count_if(F.col("acker") != F.col("last_requeuer")).alias("requeued_acked_by_other"),
        F.count_if(F.col("acker") == F.col("last_requeuer")).alias("requeued_acked_by_same"),
        F.count_if(F.col("acker").isNull()).alias("requeued_not_acked"),
    )

    def _totals(by_consumer: DataFrame) -> DataFrame:
        on = by_consumer.where("codel_on")
        nacks, decided = F.coalesce(F.sum("nacks"), F.lit(0)), F.sum("decided")
        return on.agg(
            nacks.alias("nacks"),
            F.coalesce(F.sum("requeued"), F.lit(0)).alias("requeued"),
            F.coalesce(F.sum("discarded"), F.lit(0)).alias("discarded"),
            F.when(decided > 0, nacks / decided).alias("nack_share"),
            F.coalesce(F.sum("dropping_s"), F.lit(0.0)).alias("dropping_s"),
        ).crossJoin(follow)

    return _totals
