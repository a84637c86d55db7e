"""Egress classes (the Solace model, loadgen/rules/egress.py): per consumer group and class, what was
delivered, discarded and left, how full the class got, and how long deliveries waited in it.

Only delivery rows with an `egress_class` count (groups without `egress` have none). The summary
block, with the scenario's limits and class order, is analysis.summary.egress.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F

from .stats import stats_struct

__all__ = ["egress_class_rows"]


def egress_class_rows(deliveries: DataFrame) -> DataFrame:
    """One row per (consumer_group, egress_class) with the counts and depth figures.

    - `delivered`: rows that left the buffer to the application (`start_ns` set: processed, or
      taken and nacked by CoDel); `discards`: outcome `egress_discard`; `in_buffer_at_end`: rows
      that never left (unsettled or crashed: the connection went first).
    - `high_water_messages` / `_units`: the largest `egress_length` / `egress_units`, over the
      group's consumers (each has a buffer of its own); `mean_length_messages` / `_units`: their
      mean over admissions, i.e. how full a class was as each delivery joined it (itself included).
    - `discard_indications`: rows that carried the discard indication; `sojourn`: stats of
      `start_ns - receive_ns` over delivered rows after the warm-up (`measured`, when present).
    """
    egress = deliveries.where(F.col("egress_class").isNotNull())
    left = F.col("start_ns").isNotNull()
    measured = F.col("measured") if "measured" in deliveries.columns else F.lit(True)
    sojourn_ms = F.when(left & measured, (F.col("start_ns") - F.col("receive_ns")) / F.lit(1e6))
    return egress.groupBy("consumer_group", "egress_class").agg(
        F.countDistinct("consumer").alias("consumers"),
        F.count_if(left).alias("delivered"),
        F.count_if(F.col("outcome") == "egress_discard").alias("discards"),
        F.count_if(~left & (F.col("outcome") != "egress_discard")).alias("in_buffer_at_end"),
        F.max("egress_length").alias("high_water_messages"),
        F.max("egress_units").alias("high_water_units"),
        F.avg("egress_length").alias("mean_length_messages"),
        F.avg("egress_units").alias("mean_length_units"),
        F.count_if(F.col("discard_indication")).alias("discard_indications"),
        F.min("priority").alias("min_priority"),
        F.max("priority").alias("max_priority"),
        stats_struct(sojourn_ms).alias("sojourn_ms"),
    )
