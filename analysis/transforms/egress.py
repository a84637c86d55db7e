"""Egress classes (the Solace model, loadgen/rules/egress.py): per consumer group and class, what was
delivered, discarded and left, how full the class got, and how long deliveries waited in it.

Only delivery rows with an `egress_class` count (groups without `egress` have none). One cube (one
Spark action): the counts and depth figures a grouping of its cells, the wait a projection's
log-bucket histogram. The summary block, with the scenario's limits and class order, is
analysis.summary.egress.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F

from analysis.cube import Cells, Cube, Projection, cube

__all__ = ["egress_cube"]

_KEYS = ("consumer_group", "egress_class")


def egress_cube(deliveries: DataFrame) -> Cube:
    """The deliveries' egress figures per (consumer_group, egress_class).

    Cells `egress`, one row per group and class:
    - `delivered`: rows that left the buffer to the application (`start_ns` set: processed, or
      taken and nacked by CoDel); `discards`: outcome `egress_discard`; `in_buffer_at_end`: rows
      that never left (unsettled or crashed: the connection went first).
    - `high_water_messages` / `_units`: the largest `egress_length` / `egress_units`, over the
      group's consumers (each has a buffer of its own); `mean_length_messages` / `_units`: their
      mean over admissions, i.e. how full a class was as each delivery joined it (itself included).
    - `discard_indications`: rows that carried the discard indication.
    Projection `egress_sojourn` keyed by group and class: `start_ns - receive_ns` (ms) of delivered
    rows after the warm-up (`measured`, when present).
    """
    egress = deliveries.where(F.col("egress_class").isNotNull())
    left = F.col("start_ns").isNotNull()
    measured = F.col("measured") if "measured" in deliveries.columns else F.lit(True)
    sojourn_ms = (F.col("start_ns") - F.col("receive_ns")) / F.lit(1e6)
    cells = Cells(
        {k: F.col(k) for k in _KEYS},
        {
            "consumers": F.countDistinct("consumer"),
            "delivered": F.count_if(left),
            "discards": F.count_if(F.col("outcome") == "egress_discard"),
            "in_buffer_at_end": F.count_if(~left & (F.col("outcome") != "egress_discard")),
            "high_water_messages": F.max("egress_length"),
            "high_water_units": F.max("egress_units"),
            "mean_length_messages": F.avg("egress_length"),
            "mean_length_units": F.avg("egress_units"),
            "discard_indications": F.count_if(F.col("discard_indication")),
            "min_priority": F.min("priority"),
            "max_priority": F.max("priority"),
        },
        name="egress",
    )
    sojourn = Projection("egress_sojourn", left & measured, [F.col(k) for k in _KEYS], sojourn_ms)
    return cube(egress, [sojourn], [cells])
