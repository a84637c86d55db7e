"""Publish fidelity: how late each producer group published against its schedule, and for
trace replay whether every source row went out once, at the rate and spacing recorded.

Definitions in docs/summary.md, "fidelity". Lateness is the load generator's own delay:
`publish_ns - intended_ns` less the time the publish waited on a connection the broker had
blocked (`blocked_ms`, producer flow control: the broker's delay, reported in the
`flow_control` block); a publish given up while blocked (`blocked_timeout`) has no lateness. A
*replayed* row is one with `replay_index` not null. Every row counts, warm-up included:
the offered load is what the schedule or the file asked for from the first message on.
"""
from __future__ import annotations

from typing import Any, Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ._common import NS_PER_MS, Transform, ms_between
from .stats import percentiles, stats_block, stats_struct
from .windows import second_since

__all__ = ["LATE_P99_MS", "LATE_MAX_MS", "LATE_THRESHOLDS_MS", "GAP_QUANTILES", "REPLAY_CONFIG_KEYS",
           "lateness_by_group", "replay_per_second", "inter_arrival", "is_behind", "fidelity_block"]

LATE_P99_MS = 10
"""A group is behind when its p99 lateness is above this. At the rates sojourn runs (hundreds
to thousands of msg/s, a few ms between messages) a p99 of 10 ms means the tail of the
arrival process is several inter-arrival gaps late: bursts the schedule did not ask for and
gaps it did not leave, visible on the per-second chart and in the broker's queue."""

LATE_MAX_MS = 1_000
"""A group is behind when any publish went out more than this late, whatever its p99: a
second-long stall moves a whole second of load, even if it is rare."""

LATE_THRESHOLDS_MS = (1, 10)
"""`late_share` reports the share of publishes later than each of these (strictly)."""

GAP_QUANTILES = {"p10": 0.10, "p50": 0.50, "p90": 0.90, "p99": 0.99}

REPLAY_CONFIG_KEYS = ("source", "format", "rows", "speed", "window", "loop", "split")
"""Copied from run.json's `replay.<group>` into the block, so the report can say what was replayed."""

_LATENESS = "lateness_ms"


def _replayed() -> Column:
    return F.col("replay_index").isNotNull()


def lateness_by_group(publishes: DataFrame) -> DataFrame:
    """One row per producer group: `lateness_ms` (a stats struct of the lateness, see above),
    `late_over_<n>_ms` (the share of publishes later than n ms, for LATE_THRESHOLDS_MS),
    and for replayed rows `replay_published` (rows) and `replay_distinct` (distinct
    (replay_index, replay_loop) pairs)."""
    late = F.when(F.col("outcome") != "blocked_timeout",
                  ms_between("publish_ns", "intended_ns") - F.coalesce(F.col("blocked_ms"), F.lit(0.0)))
    counted = F.count(late)
    shares = [F.when(counted > 0, F.count_if(late > F.lit(float(ms))) / counted).alias(f"late_over_{ms}_ms")
              for ms in LATE_THRESHOLDS_MS]
    return publishes.groupBy("producer_group").agg(
        stats_struct(late).alias(_LATENESS),
        *shares,
        F.count_if(_replayed()).alias("replay_published"),
        F.count_distinct(F.when(_replayed(), F.struct("replay_index", "replay_loop"))).alias("replay_distinct"),
    ).orderBy("producer_group")


def replay_per_second(t0_ns: int) -> Transform:
    """Replayed publishes -> one row per (producer_group, t_s) with any activity: `intended`
    (rows whose intended_ns falls in that whole second since t0) and `published` (rows whose
    publish_ns does). Seconds with neither are absent: both counts are 0 there."""
    def _per_second(publishes: DataFrame) -> DataFrame:
        rows = publishes.where(_replayed())
        times = rows.select("producer_group", F.explode(F.array(
            F.struct(second_since(t0_ns, "intended_ns").alias("t_s"), F.lit(True).alias("intended")),
            F.struct(second_since(t0_ns, "publish_ns").alias("t_s"), F.lit(False).alias("intended")),
        )).alias("a")).select("producer_group", "a.*").where(F.col("t_s").isNotNull())
        return (times.groupBy("producer_group", "t_s")
                .agg(F.count_if(F.col("intended")).alias("intended"),
                     F.count_if(~F.col("intended")).alias("published"))
                .orderBy("producer_group", "t_s"))
    return _per_second


def _gap_struct(gap: str) -> Column:
    value = F.col(gap)
    pcts = percentiles(value, list(GAP_QUANTILES.values()))
    return F.struct(F.count(value).alias("count"), F.avg(value).alias("mean"),
                    *[pcts[i].alias(name) for i, name in enumerate(GAP_QUANTILES)])


def inter_arrival(publishes: DataFrame) -> DataFrame:
    """Replayed publishes -> one row per producer group: `intended` and `published`, structs of
    count, mean and GAP_QUANTILES (ms, exact, linear interpolation) of the gaps between
    consecutive rows of the group ordered by intended_ns / by publish_ns."""
    rows = publishes.where(_replayed()).select("producer_group", "intended_ns", "publish_ns")
    gaps = rows.withColumns({
        "_intended_gap": (F.col("intended_ns") - F.lag("intended_ns").over(
            Window.partitionBy("producer_group").orderBy("intended_ns"))) / F.lit(NS_PER_MS),
        "_published_gap": (F.col("publish_ns") - F.lag("publish_ns").over(
            Window.partitionBy("producer_group").orderBy("publish_ns"))) / F.lit(NS_PER_MS),
    })
    return gaps.groupBy("producer_group").agg(
        _gap_struct("_intended_gap").alias("intended"), _gap_struct("_published_gap").alias("published"),
    ).orderBy("producer_group")


def is_behind(lateness_ms: Mapping[str, Any]) -> bool:
    """The `behind` flag for a lateness stats block (see LATE_P99_MS and LATE_MAX_MS)."""
    p99, worst = lateness_ms.get("p99"), lateness_ms.get("max")
    return bool((p99 is not None and p99 > LATE_P99_MS) or (worst is not None and worst > LATE_MAX_MS))


# --- the summary block ----------------------------------------------------------------

def _count(value: Any) -> int | None:
    """A non-negative whole number from run.json (2000 or 2000.0), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return int(value) if float(value).is_integer() else None


def _replay_plans(replay: Any) -> dict[str, Mapping[str, Any]]:
    """run.json's `replay` as {group: plan}; anything malformed counts as absent."""
    if not isinstance(replay, Mapping):
        return {}
    return {str(group): plan for group, plan in replay.items() if isinstance(plan, Mapping)}


def _series(rows: list) -> dict[str, list]:
    """The sparse per-second rows of one group as dense columns from its first to last second."""
    by_second = {r["t_s"]: r for r in rows}
    if not by_second:
        return {"t_s": [], "intended": [], "published": []}
    seconds = list(range(min(by_second), max(by_second) + 1))
    return {"t_s": seconds,
            "intended": [by_second[t]["intended"] if t in by_second else 0 for t in seconds],
            "published": [by_second[t]["published"] if t in by_second else 0 for t in seconds]}


def _gaps(struct: Any) -> dict[str, Any]:
    return stats_block(struct, ("count", "mean", *GAP_QUANTILES))


def _replay_entry(plan: Mapping[str, Any], lateness_row: Any, series_rows: list, gaps_row: Any) -> dict:
    published = int(lateness_row["replay_published"]) if lateness_row is not None else 0
    distinct = int(lateness_row["replay_distinct"]) if lateness_row is not None else 0
    expected = _count(plan.get("expected"))
    series = _series(series_rows)
    diffs = [abs(i - p) for i, p in zip(series["intended"], series["published"])]
    return {
        "config": {k: plan.get(k) for k in REPLAY_CONFIG_KEYS},
        "published": published, "distinct": distinct, "duplicates": published - distinct,
        "expected": expected, "missing": None if expected is None else expected - distinct,
        "per_second": series,
        "per_second_max_diff": max(diffs) if diffs else None,
        "inter_arrival_ms": {"intended": _gaps(gaps_row["intended"] if gaps_row is not None else None),
                             "published": _gaps(gaps_row["published"] if gaps_row is not None else None)},
    }


def fidelity_block(publishes: DataFrame, t0_ns: int, replay: Any = None) -> dict[str, dict]:
    """summary.json's `fidelity` block, keyed by producer group (docs/summary.md).

    `replay` is run.json's `replay` object (absent: None). A group is replayed when its
    rows carry `replay_index` or run.json lists it; only replayed groups get a `replay`
    entry, and the two replay computations run only when some group is replayed.
    """
    plans = _replay_plans(replay)
    rows = {r["producer_group"]: r for r in publishes.transform(lateness_by_group).collect()}
    replayed = sorted({g for g, r in rows.items() if r["replay_published"] > 0} | set(plans))
    per_second: dict[str, list] = {g: [] for g in replayed}
    gaps: dict[str, Any] = {}
    if any(rows.get(g) is not None and rows[g]["replay_published"] > 0 for g in replayed):
        for r in publishes.transform(replay_per_second(int(t0_ns))).collect():
            per_second.setdefault(r["producer_group"], []).append(r)
        gaps = {r["producer_group"]: r for r in publishes.transform(inter_arrival).collect()}

    block: dict[str, dict] = {}
    for group in sorted(set(rows) | set(replayed)):
        row = rows.get(group)
        lateness = stats_block(row[_LATENESS] if row is not None else None)
        block[group] = {
            "replayed": group in replayed,
            "lateness_ms": lateness,
            "late_share": {f"over_{ms}_ms": (row[f"late_over_{ms}_ms"] if row is not None else None)
                           for ms in LATE_THRESHOLDS_MS},
            "behind": is_behind(lateness),
            "replay": (_replay_entry(plans.get(group, {}), row, per_second.get(group, []), gaps.get(group))
                       if group in replayed else None),
        }
    return block
