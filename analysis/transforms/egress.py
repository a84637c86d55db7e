"""Egress classes (the Solace model, loadgen/egress.py): per consumer group and class, what was
delivered, discarded and left, how full the class got, and how long deliveries waited in it.

Only delivery rows with an `egress_class` count (groups without `egress` have none). The limits
(`max_depth_units`, `min_burst`) and the class order come from run.json's resolved scenario.
"""
from __future__ import annotations

from typing import Any, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .stats import stats_block, stats_struct

__all__ = ["egress_class_rows", "egress_block"]


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


def _specs(scenario: Any) -> dict[str, Mapping[str, Any]]:
    """consumer group -> its resolved `egress` mapping from run.json (groups with egress only)."""
    consumers = scenario.get("consumers") if isinstance(scenario, Mapping) else None
    out = {}
    for group in consumers if isinstance(consumers, list) else []:
        if isinstance(group, Mapping) and isinstance(group.get("egress"), Mapping):
            out[str(group.get("name"))] = group["egress"]
    return out


def egress_block(deliveries: DataFrame, scenario: Any) -> dict:
    """summary.json's `egress`: {group: {max_depth_units, min_burst, classes: [...]}}, classes in
    the order served (the scenario's), a class that saw nothing with zero counts; {} when no
    group had egress."""
    specs = _specs(scenario)
    rows: dict[str, dict[str, Any]] = {}
    for r in egress_class_rows(deliveries).collect():
        rows.setdefault(r["consumer_group"], {})[r["egress_class"]] = r
    out = {}
    for group in [*specs, *sorted(g for g in rows if g not in specs)]:
        spec = specs.get(group, {})
        by_class = rows.get(group, {})
        listed = list(spec.get("classes") or {}) if isinstance(spec.get("classes"), Mapping) else []
        names = [*listed, *sorted(c for c in by_class if c not in listed)]
        out[group] = {
            "max_depth_units": spec.get("max_depth_units"), "min_burst": spec.get("min_burst"),
            "classes": [_class_entry(name, by_class.get(name)) for name in names],
        }
    return out


def _class_entry(name: str, r: Any) -> dict:
    def count(key: str) -> int:
        return int(r[key] or 0) if r is not None else 0

    def value(key: str) -> Any:
        return r[key] if r is not None else None

    delivered, discards = count("delivered"), count("discards")
    return {
        "class": name,
        "consumers": count("consumers"),
        "delivered": delivered,
        "discards": discards,
        "discard_share": discards / (delivered + discards) if delivered + discards else None,
        "in_buffer_at_end": count("in_buffer_at_end"),
        "discard_indications": count("discard_indications"),
        "high_water": {"messages": value("high_water_messages"), "units": value("high_water_units")},
        "mean_length": {"messages": value("mean_length_messages"), "units": value("mean_length_units")},
        "priorities": [value("min_priority"), value("max_priority")],
        "sojourn_ms": stats_block(value("sojourn_ms")),
    }
