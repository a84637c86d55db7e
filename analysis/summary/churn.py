"""summary.json's `consumers_churn` block: transforms.churn's frames per consumer group and in total,
and the check that nothing a crashed or unsettled delivery held was lost (docs/summary.md).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, functions as F

from analysis.transforms._common import is_acked, local_rows
from analysis.transforms.churn import event_counts, held_messages, repeats, requeue_counts

__all__ = ["CHURN_FIELDS", "churn_block"]

CHURN_FIELDS = (
    "joins",
    "rejoins",
    "clean_leaves",
    "crashes",
    "connections_lost",
    "requeued_crashed",
    "requeued_unsettled",
    "redelivered",
    "processed_twice",
    "acked_twice",
    "held_messages",
    "held_unaccounted",
)


def _held_counts(held: DataFrame, by: list[str]) -> list:
    return held.groupBy(*by, "account").agg(F.count(F.lit(1)).alias("n")).collect()


def churn_block(
    deliveries: DataFrame,
    events: DataFrame,
    classified: DataFrame,
    facts: DataFrame | None = None,
    consumers: Sequence[str] | None = None,
    with_ids: DataFrame | None = None,
) -> dict[str, Any]:
    """summary.json's `consumers_churn` (docs/summary.md): per consumer group and in total, joins and
    leaves, crashes, lost connections, requeued and redelivered deliveries, messages processed or
    acked twice, and the messages requeued deliveries held by the class they ended in.
    `churn` is false when no consumer rejoined, crashed, lost a connection or had a redelivery.
    `facts` (accounting.message_facts or its ledger, when the job has it) names the ids with more than one
    processed or acked delivery, so that only theirs are grouped by id. `consumers`: the names of the
    consumers with deliveries, when the caller has them (the job: from the consumer rows it collected),
    so that they are not found again by a grouping of every delivery. `with_ids`: the deliveries with
    their message ids, when `deliveries` leaves the ids out (the job's cache), or those of the ids
    `facts` holds (the job's, which holds every id a repeat or a held message has)."""
    named = (
        local_rows(deliveries.sparkSession, [(c,) for c in consumers], "consumer string")
        if consumers is not None
        else deliveries.select("consumer")
    )
    joined = events.where(F.col("kind") == "consumer_join").select(F.col("source").alias("consumer"))
    every_consumer = named.unionByName(joined).distinct()
    processed = F.col("end_ns").isNotNull()
    twice = (None, None) if facts is None else (facts.where(F.col("_processed") > 1), facts.where(F.col("_acks") > 1))
    ids = deliveries if with_ids is None else with_ids
    frames = [
        event_counts(events, every_consumer),
        requeue_counts(deliveries),
        repeats(ids, processed, "end_ns", "processed_twice", twice[0]),
        repeats(ids, is_acked(), "settle_ns", "acked_twice", twice[1]),
    ]
    rows: dict[str, dict[str, Any]] = {}
    # One Spark job for the four small frames: each row has its own frame's columns, null elsewhere.
    together = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    for r in together.collect():
        if r["group"] is not None:
            counts = {k: int(v) for k, v in r.asDict().items() if k != "group" and v is not None}
            rows.setdefault(r["group"], {}).update(counts)
    held = held_messages(ids, classified).cache()
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
    churn = any(
        totals[f]
        for f in ("rejoins", "crashes", "connections_lost", "requeued_crashed", "requeued_unsettled", "redelivered")
    )
    return {"churn": churn, "nothing_lost": totals["held_unaccounted"] == 0, "groups": groups, "totals": totals}
