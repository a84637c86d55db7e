"""The accounting's small collected inputs (the accounting itself: analysis/transforms/accounting.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from analysis.transforms.accounting import connection_loss_times

__all__ = ["connection_losses"]


def connection_losses(events: DataFrame) -> dict[str, int]:
    """Producer -> the time of its last traced connection loss (accounting.message_facts' `losses`)."""
    return {r["source"]: int(r["lost_ns"]) for r in events.transform(connection_loss_times).collect()}
