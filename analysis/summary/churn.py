"""summary.json's `consumers_churn` block: transforms.churn's frames per consumer group and in total,
and the check that nothing a crashed or unsettled delivery held was lost (docs/summary.md).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, functions as F

from analysis.transforms._common import is_acked, local_rows
from analysis.transforms.churn import event_counts, held_messages, repeats, requeue_counts

__all__ = ["CHURN_FIELDS", "churn_block"]

_HELD_COLUMNS = ("group", "message_id", "account")

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
        held_messages(ids, classified),  # a row per held message and group: few
    ]
    rows: dict[str, dict[str, Any]] = {}
    held: set[tuple[str, str, str]] = set()
    # One Spark job for the five small frames: each row has its own frame's columns, null elsewhere.
    together = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    for r in together.collect():
        if r["message_id"] is not None:
            held.add((r["group"], r["message_id"], r["account"]))
        elif r["group"] is not None:
            counts = {k: int(v) for k, v in r.asDict().items() if k not in _HELD_COLUMNS and v is not None}
            rows.setdefault(r["group"], {}).update(counts)
    for group, _, account in held:
        then = rows.setdefault(group, {}).setdefault("held_then", {})
        then[account] = then.get(account, 0) + 1
    total_then = Counter(account for _, account in {(m, account) for _, m, account in held})
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
