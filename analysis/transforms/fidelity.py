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

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window, functions as F

from analysis.cube import Cells, Cube, Projection, cube

from ._common import NS_PER_MS, ms_between
from .windows import second_since

__all__ = [
    "LATE_THRESHOLDS_MS",
    "GAP_QUANTILES",
    "lateness",
    "lateness_projections",
    "replay_cube",
    "ks_distance",
    "GAP_RESOLUTION_MS",
]

LATE_THRESHOLDS_MS = (1, 10)
"""`late_share` reports the share of publishes later than each of these (strictly)."""

GAP_QUANTILES = {"p10": 0.10, "p50": 0.50, "p90": 0.90, "p99": 0.99}


def lateness() -> Column:
    """A publish's lateness in ms (see the module doc); null for a publish given up while blocked."""
    return F.when(
        F.col("outcome") != "blocked_timeout",
        ms_between("publish_ns", "intended_ns") - F.coalesce(F.col("blocked_ms"), F.lit(0.0)),
    )


def _replayed() -> Column:
    return F.col("replay_index").isNotNull()


def lateness_projections() -> list[Projection]:
    """What the fidelity block needs of every publish, per producer group (analysis.cube):
    `lateness` (every row counted, the histogram of the lateness where there is one),
    `late_over_<n>_ms` (rows later than n ms, for LATE_THRESHOLDS_MS) and `replay_published`
    (replayed rows; their distinct count is replay_cube's)."""
    late, group = lateness(), [F.col("producer_group")]
    return [
        Projection("lateness", F.lit(True), group, late),
        *[Projection(f"late_over_{ms}_ms", late > F.lit(float(ms)), group) for ms in LATE_THRESHOLDS_MS],
        Projection("replay_published", _replayed(), group),
    ]


def _gaps(publishes: DataFrame) -> DataFrame:
    """Replayed publishes with `_intended_gap` and `_published_gap` (ms): the gap to the group's
    previous row by intended_ns / by publish_ns (null for the first)."""
    rows = publishes.where(_replayed()).select(
        "producer_group", "intended_ns", "publish_ns", "replay_index", "replay_loop"
    )
    return rows.withColumns(
        {
            "_intended_gap": (
                F.col("intended_ns")
                - F.lag("intended_ns").over(Window.partitionBy("producer_group").orderBy("intended_ns"))
            )
            / F.lit(NS_PER_MS),
            "_published_gap": (
                F.col("publish_ns")
                - F.lag("publish_ns").over(Window.partitionBy("producer_group").orderBy("publish_ns"))
            )
            / F.lit(NS_PER_MS),
        }
    )


GAP_RESOLUTION_MS = 0.1
"""Gaps are compared to this resolution (rounded) for the KS distance: the publisher's timing is
good to tens of microseconds, and a file's gaps are often exact (a constant rate); compared
unrounded, a jitter of a microsecond would put every published gap on the other side of its
intended one."""


def replay_cube(publishes: DataFrame, t0_ns: int) -> Cube:
    """The replayed publishes' figures per producer group, in one cube (one Spark action):

    - cells `replay_distinct`: per group, `replay_distinct`, its distinct (replay_index,
      replay_loop) pairs;
    - `intended_per_s` / `published_per_s`, keyed by group and second since t0: the rows whose
      intended_ns / publish_ns falls in that whole second (a second with neither is absent);
    - `intended_gap` / `published_gap`, keyed by group: the gaps (ms) between consecutive rows of
      the group ordered by intended_ns / by publish_ns, as log-bucket histograms;
    - `intended_gap_units` / `published_gap_units`, keyed by group and the gap in whole
      GAP_RESOLUTION_MS (rounded): how many gaps of each, for ks_distance.
    """
    gaps = _gaps(publishes)
    group = F.col("producer_group")
    projections = []
    for kind, time, gap in (
        ("intended", "intended_ns", "_intended_gap"),
        ("published", "publish_ns", "_published_gap"),
    ):
        second, value = second_since(t0_ns, time), F.col(gap)
        units = F.round(value / F.lit(GAP_RESOLUTION_MS)).cast("long")
        projections += [
            Projection(f"{kind}_per_s", second.isNotNull(), [group, second]),
            Projection(f"{kind}_gap", value.isNotNull(), [group], value),
            Projection(f"{kind}_gap_units", value.isNotNull(), [group, units]),
        ]
    distinct = Cells(
        {"producer_group": group},
        {"replay_distinct": F.count_distinct(F.struct("replay_index", "replay_loop"))},
        name="replay_distinct",
    )
    return cube(gaps, projections, [distinct])


def ks_distance(intended: Mapping[int, int], published: Mapping[int, int]) -> float | None:
    """The two-sample Kolmogorov-Smirnov distance D = max |F_intended(x) - F_published(x)| between
    two empirical distributions given as counts per value (gaps in whole GAP_RESOLUTION_MS: ties
    taken together): 0 when the publishes kept the file's spacing, 1 when the two never overlap;
    None when either has no value."""
    n_a, n_b = sum(intended.values()), sum(published.values())
    if not n_a or not n_b:
        return None
    d = seen_a = seen_b = 0.0
    for value in sorted(set(intended) | set(published)):
        seen_a += intended.get(value, 0)
        seen_b += published.get(value, 0)
        d = max(d, abs(seen_a / n_a - seen_b / n_b))
    return d
