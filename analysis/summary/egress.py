"""summary.json's `egress` block: transforms.egress's cube per group and class, in the scenario's class order.

The limits (`max_depth_units`, `min_burst`) and the class order come from run.json's resolved scenario.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame

from analysis.buckets import Histogram
from analysis.transforms.egress import egress_cube

from ._stats import stats_block

__all__ = ["egress_block"]


def _specs(scenario: Any) -> dict[str, Mapping[str, Any]]:
    """consumer group -> its resolved `egress` mapping from run.json (groups with egress only)."""
    consumers = scenario.get("consumers") if isinstance(scenario, Mapping) else None
    out = {}
    for group in consumers if isinstance(consumers, list) else []:
        if isinstance(group, Mapping) and isinstance(group.get("egress"), Mapping):
            out[str(group.get("name"))] = group["egress"]
    return out


def egress_block(deliveries: DataFrame | None, scenario: Any) -> dict:
    """summary.json's `egress`: {group: {max_depth_units, min_burst, classes: [...]}}, classes in
    the order served (the scenario's), a class that saw nothing with zero counts; {} when no
    group had egress. `deliveries` None: no delivery has an egress class (the trace's footers say
    so), and nothing is read."""
    specs = _specs(scenario)
    rows: dict[str, dict[str, Any]] = {}
    if deliveries is not None:
        figures = egress_cube(deliveries)
        waits = figures.histograms("egress_sojourn", by=2)
        for r in figures.cells("egress"):
            key = (r["consumer_group"], r["egress_class"])
            rows.setdefault(key[0], {})[key[1]] = {**r, "sojourn_ms": waits.get(key, Histogram.empty()).stats()}
    out = {}
    for group in [*specs, *sorted(g for g in rows if g not in specs)]:
        spec = specs.get(group, {})
        by_class = rows.get(group, {})
        listed = list(spec.get("classes") or {}) if isinstance(spec.get("classes"), Mapping) else []
        names = [*listed, *sorted(c for c in by_class if c not in listed)]
        out[group] = {
            "max_depth_units": spec.get("max_depth_units"),
            "min_burst": spec.get("min_burst"),
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
