"""summary.json's `codel` block: the CoDel frames of transforms.codel, collected per consumer and in total."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, functions as F

from analysis.transforms.codel import (
    AFTER_FIRST_DROP,
    codel_by_consumer,
    codel_by_consumer_of,
    codel_state,
    codel_state_of,
    codel_totals,
    nacked,
    requeue_handoffs,
    requeue_takers,
    state_first_drops,
)

from ._stats import stats_block

__all__ = ["codel_block", "untouched"]

_CONSUMER_FIELDS = (
    "consumer",
    "group",
    "codel_on",
    "decided",
    "nacks",
    "requeued",
    "discarded",
    "nack_share",
    "dropping_s",
    "acked_requeued_from_others",
)
_TOTAL_FIELDS = (
    "nacks",
    "requeued",
    "discarded",
    "nack_share",
    "dropping_s",
    "requeued_messages",
    "requeued_acked_by_other",
    "requeued_acked_by_same",
    "requeued_not_acked",
)
_EMPTY_TOTALS = {**dict.fromkeys(_TOTAL_FIELDS, 0), "nack_share": None, "dropping_s": 0.0}


def untouched() -> dict[str, Any]:
    """The block of a run in which no consumer had CoDel on and none nacked."""
    return {"consumers": [], "totals": dict(_EMPTY_TOTALS)}


def codel_block(
    deliveries: DataFrame,
    partials: DataFrame | None = None,
    with_ids: DataFrame | None = None,
    split_at: Mapping[str, int] | None = None,
    sojourn: str = "sojourn_ms",
) -> dict[str, Any]:
    """summary.json's `codel` block: {"consumers": [...], "totals": {...}}.

    `consumers` is empty when no consumer had CoDel on and none acked a requeued
    message; a run without CoDel costs one cheap probe, not the whole computation.
    `partials`: utilisation.consumer_partials of the deliveries with codel_parts among its
    aggregates; each consumer's CoDel state is then rolled up from its few rows, and the probe is
    that state (10M deliveries: the probe and the state read every delivery, 1.2 and 4.5 s).
    `split_at`: the first drops (consumer -> start_ns) at which the partials were split
    (codel.after_first_drop), their metric `sojourn` the sojourn of measured deliveries: when they
    are the first drops of the state, the per-consumer rows roll up from the partials too
    (codel_by_consumer_of); otherwise they aggregate the deliveries.
    `with_ids`: the deliveries with their message ids, for the requeues' hand-offs, when `deliveries`
    leaves the ids out (the job's cache: analysis.job); those of every requeued id are enough.
    """
    if partials is None:
        touched = deliveries.where(F.col("codel_dropping").isNotNull() | nacked())
        if not touched.limit(1).collect():
            return untouched()
        state = [tuple(r) for r in deliveries.transform(codel_state).collect()]  # a row per consumer
    else:
        state = [tuple(r) for r in partials.transform(codel_state_of).collect()]
        if not any(r[3] for r in state):  # touched: CoDel on, or a nack
            return untouched()
    handoffs = (deliveries if with_ids is None else with_ids).transform(requeue_handoffs).cache()
    takers = [tuple(r) for r in handoffs.transform(requeue_takers).collect()]  # a row per consumer at most
    if partials is not None and AFTER_FIRST_DROP in partials.columns and split_at == state_first_drops(state):
        by_consumer = partials.transform(codel_by_consumer_of(state, takers, deliveries, sojourn)).cache()
    else:
        by_consumer = deliveries.transform(codel_by_consumer(state, takers)).cache()
    try:
        consumers = []
        for r in by_consumer.collect():
            row = {f: r[f] for f in _CONSUMER_FIELDS}
            row["sojourn_before_ms"] = stats_block(r["sojourn_before_ms"])
            row["sojourn_after_ms"] = stats_block(r["sojourn_after_ms"])
            consumers.append(row)
        totals = by_consumer.transform(codel_totals(handoffs)).first()
        assert totals is not None  # aggregates without grouping, cross-joined: exactly one row
    finally:
        by_consumer.unpersist()
        handoffs.unpersist()
    return {
        "consumers": consumers,
        "totals": {f: (totals[f] if f in ("nack_share", "dropping_s") else int(totals[f] or 0)) for f in _TOTAL_FIELDS},
    }
