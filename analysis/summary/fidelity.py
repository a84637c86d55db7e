"""summary.json's `fidelity` block: transforms.fidelity's lateness per producer group, and for
trace replay what went out against what run.json's `replay` planned (docs/summary.md, "fidelity").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame

from analysis.buckets import Histogram
from analysis.cube import Cube
from analysis.transforms.fidelity import GAP_QUANTILES, LATE_THRESHOLDS_MS, ks_distance, replay_cube

from ._stats import stats_block

__all__ = [
    "LATE_P99_MS",
    "LATE_MAX_MS",
    "KS_FAITHFUL",
    "REPLAY_CONFIG_KEYS",
    "is_behind",
    "correlation",
    "fidelity_block",
]

LATE_P99_MS = 10
"""A group is behind when its p99 lateness is above this. At the rates sojourn runs (hundreds
to thousands of msg/s, a few ms between messages) a p99 of 10 ms means the tail of the
arrival process is several inter-arrival gaps late: bursts the schedule did not ask for and
gaps it did not leave, visible on the per-second chart and in the broker's queue."""

LATE_MAX_MS = 1_000
"""A group is behind when any publish went out more than this late, whatever its p99: a
second-long stall moves a whole second of load, even if it is rare."""

KS_FAITHFUL = 0.05
"""The publishes kept the file's spacing when the KS distance between the intended and the
published gaps is at most this. A distance, not a test: with tens of thousands of rows any real
publisher's timer granularity makes a KS p-value tiny, however faithful the replay looks."""

REPLAY_CONFIG_KEYS = ("source", "format", "rows", "speed", "window", "loop", "split")
"""Copied from run.json's `replay.<group>` into the block, so the report can say what was replayed."""


def is_behind(lateness_ms: Mapping[str, Any]) -> bool:
    """The `behind` flag for a lateness stats block (see LATE_P99_MS and LATE_MAX_MS)."""
    p99, worst = lateness_ms.get("p99"), lateness_ms.get("max")
    return bool((p99 is not None and p99 > LATE_P99_MS) or (worst is not None and worst > LATE_MAX_MS))


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
    return {
        "t_s": seconds,
        "intended": [by_second[t]["intended"] if t in by_second else 0 for t in seconds],
        "published": [by_second[t]["published"] if t in by_second else 0 for t in seconds],
    }


def correlation(xs: list, ys: list) -> float | None:
    """Pearson's correlation of two equally long series; None when either is constant or short."""
    n = len(xs)
    if n < 2 or len(ys) != n:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return None if sxx == 0 or syy == 0 else sxy / (sxx * syy) ** 0.5


def _gaps(histogram: Histogram | None) -> dict[str, Any]:
    """count, mean and GAP_QUANTILES of a group's gaps (an empty block without any)."""
    stats = (histogram or Histogram.empty()).stats(list(GAP_QUANTILES.values()))
    return stats_block(stats, ("count", "mean", *GAP_QUANTILES))


def _replay_entry(
    plan: Mapping[str, Any],
    published: int,
    distinct: int,
    series_rows: list,
    gaps: tuple[Histogram | None, Histogram | None],
    ks: float | None,
) -> dict:
    expected = _count(plan.get("expected"))
    series = _series(series_rows)
    diffs = [abs(i - p) for i, p in zip(series["intended"], series["published"])]
    return {
        "config": {k: plan.get(k) for k in REPLAY_CONFIG_KEYS},
        "published": published,
        "distinct": distinct,
        "duplicates": published - distinct,
        "expected": expected,
        "missing": None if expected is None else expected - distinct,
        "per_second": series,
        "per_second_max_diff": max(diffs) if diffs else None,
        "per_second_correlation": correlation(series["intended"], series["published"]),
        "inter_arrival_ms": {
            "intended": _gaps(gaps[0]),
            "published": _gaps(gaps[1]),
            "ks_distance": ks,
            "faithful": None if ks is None else ks <= KS_FAITHFUL,
        },
    }


def _by_group(counts: Mapping[tuple[Any, Any], int]) -> dict[Any, dict[int, int]]:
    """A cube's counts per (group, whole number as a string) as {group: {number: count}}."""
    out: dict[Any, dict[int, int]] = {}
    for (group, value), n in counts.items():
        out.setdefault(group, {})[int(value)] = n
    return out


def fidelity_block(publishes: DataFrame, publish_cube: Cube, t0_ns: int, replay: Any = None) -> dict[str, dict]:
    """summary.json's `fidelity` block, keyed by producer group (docs/summary.md).

    `publish_cube`: the publishes' cube with transforms.fidelity.lateness_projections. `replay`
    is run.json's `replay` object (absent: None). A group is replayed when its rows carry
    `replay_index` or run.json lists it; only replayed groups get a `replay` entry, and the
    replay's cube (transforms.fidelity.replay_cube, one Spark action over `publishes`) is made
    only when some group is replayed.
    """
    plans = _replay_plans(replay)
    groups = set(publish_cube.counts("lateness"))
    lateness_of = publish_cube.histograms("lateness")
    replay_published = publish_cube.counts("replay_published")
    late_over = {ms: publish_cube.counts(f"late_over_{ms}_ms") for ms in LATE_THRESHOLDS_MS}
    replayed = sorted(set(replay_published) | set(plans))
    per_second: dict[str, list] = {g: [] for g in replayed}
    gaps: dict[str, tuple[Histogram | None, Histogram | None]] = {}
    ks: dict[str, float | None] = {}
    distinct: dict[str, int] = {}
    if replay_published:
        figures = replay_cube(publishes, int(t0_ns))
        distinct = {r["producer_group"]: int(r["replay_distinct"]) for r in figures.cells("replay_distinct")}
        intended, sent = figures.counts("intended_per_s", by=2), figures.counts("published_per_s", by=2)
        for g, t in sorted(set(intended) | set(sent), key=lambda k: (k[0], int(k[1]))):
            per_second.setdefault(g, []).append(
                {"t_s": int(t), "intended": intended.get((g, t), 0), "published": sent.get((g, t), 0)}
            )
        histograms = [figures.histograms(f"{kind}_gap") for kind in ("intended", "published")]
        gaps = {g: (histograms[0].get(g), histograms[1].get(g)) for g in set(histograms[0]) | set(histograms[1])}
        units = [_by_group(figures.counts(f"{kind}_gap_units", by=2)) for kind in ("intended", "published")]
        ks = {g: ks_distance(units[0].get(g, {}), units[1].get(g, {})) for g in set(units[0]) | set(units[1])}

    block: dict[str, dict] = {}
    for group in sorted(groups | set(replayed)):
        histogram = lateness_of.get(group, Histogram.empty())
        lateness = histogram.stats() if group in groups else stats_block(None)
        lateness["p99_9"] = histogram.quantiles([0.999])[0] if group in groups else None  # additive, after max
        late = histogram.n
        block[group] = {
            "replayed": group in replayed,
            "lateness_ms": lateness,
            "late_share": {
                f"over_{ms}_ms": late_over[ms].get(group, 0) / late if late else None for ms in LATE_THRESHOLDS_MS
            },
            "behind": is_behind(lateness),
            "replay": (
                _replay_entry(
                    plans.get(group, {}),
                    replay_published.get(group, 0),
                    distinct.get(group, 0),
                    per_second.get(group, []),
                    gaps.get(group, (None, None)),
                    ks.get(group),
                )
                if group in replayed
                else None
            ),
        }
    return block
