"""The accounting's small collected inputs (the accounting itself: analysis/transforms/accounting.py)."""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import DataFrame, functions as F

from analysis.transforms.accounting import connection_loss_times

__all__ = ["AccountingInputs", "accounting_inputs"]


class AccountingInputs(NamedTuple):
    losses: dict[str, int]
    """producer -> the time of its last traced connection loss (accounting.message_facts' `losses`)"""
    restart_ns: int | None
    """the time of the run's last `broker_restart` event (accounting.classify's `restart_ns`), None without one"""
    returned_events: bool
    """some `publish_returned` event names a message id: only then does the accounting look ids up
    in the events (accounting.classify's `events`), a join of every message id otherwise"""


def accounting_inputs(events: DataFrame) -> AccountingInputs:
    """What the accounting needs of the events, collected in one action."""
    restarts = (
        events.where(F.col("kind") == "broker_restart")
        .agg(F.max("ts_ns").alias("lost_ns"))
        .where(F.col("lost_ns").isNotNull())
        .select(F.lit("restart").alias("_what"), F.lit(None).cast("string").alias("source"), "lost_ns")
    )
    returned = (
        events.where((F.col("kind") == "publish_returned") & F.col("name").isNotNull())
        .limit(1)
        .select(
            F.lit("returned").alias("_what"),
            F.lit(None).cast("string").alias("source"),
            F.lit(None).cast("long").alias("lost_ns"),
        )
    )
    losses = events.transform(connection_loss_times).select(F.lit("loss").alias("_what"), "source", "lost_ns")
    rows = losses.unionByName(restarts).unionByName(returned).collect()
    restart = [int(r["lost_ns"]) for r in rows if r["_what"] == "restart"]
    return AccountingInputs(
        losses={r["source"]: int(r["lost_ns"]) for r in rows if r["_what"] == "loss"},
        restart_ns=restart[0] if restart else None,
        returned_events=any(r["_what"] == "returned" for r in rows),
    )
