"""The accounting's small collected inputs (the accounting itself: analysis/transforms/accounting.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F

from analysis.transforms.accounting import connection_loss_times

__all__ = ["connection_losses"]


def connection_losses(events: DataFrame) -> tuple[dict[str, int], int | None]:
    """Collected in one action: producer -> the time of its last traced connection loss
    (accounting.message_facts' `losses`), and the time of the run's last `broker_restart` event
    (accounting.classify's `restart_ns`), None without one."""
    restarts = (
        events.where(F.col("kind") == "broker_restart")
        .agg(F.max("ts_ns").alias("lost_ns"))
        .where(F.col("lost_ns").isNotNull())
        .select(F.lit(None).cast("string").alias("source"), "lost_ns")
    )
    rows = events.transform(connection_loss_times).unionByName(restarts).collect()
    restart = [int(r["lost_ns"]) for r in rows if r["source"] is None]
    return {r["source"]: int(r["lost_ns"]) for r in rows if r["source"] is not None}, (restart[0] if restart else None)
