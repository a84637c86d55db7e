"""summary.json's `codel` block: the CoDel frames of transforms.codel, collected per consumer and in total."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, functions as F

from analysis.transforms.codel import (
    codel_by_consumer,
    codel_state,
    codel_totals,
    nacked,
    requeue_handoffs,
    requeue_takers,
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


def codel_block(deliveries: DataFrame, with_ids: DataFrame | None = None) -> dict[str, Any]:
    """summary.json's `codel` block: {"consumers": [...], "totals": {...}}.

    `consumers` is empty when no consumer had CoDel on and none acked a requeued
    message; a run without CoDel costs one cheap probe, not the whole computation.
    `with_ids`: the deliveries with their message ids, for the requeues' hand-offs, when `deliveries`
    leaves the ids out (the job's cache: analysis.job); those of every requeued id are enough.
    """
    touched = deliveries.where(F.col("codel_dropping").isNotNull() | nacked())
    if not touched.limit(1).collect():
        return untouched()
    state = [tuple(r) for r in deliveries.transform(codel_state).collect()]  # a row per consumer
    handoffs = (deliveries if with_ids is None else with_ids).transform(requeue_handoffs).cache()
    takers = [tuple(r) for r in handoffs.transform(requeue_takers).collect()]  # a row per consumer at most
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
