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

from pyspark.sql import Column, DataFrame, Window, functions as F

from analysis.cube import Projection

from ._common import NS_PER_MS, Transform, ms_between
from .stats import percentiles
from .windows import second_since

__all__ = [
    "LATE_THRESHOLDS_MS",
    "GAP_QUANTILES",
    "lateness",
    "lateness_projections",
    "replay_distinct",
    "replay_per_second",
    "inter_arrival",
    "gap_ks_distance",
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
    (replayed rows; their distinct count is replay_distinct's)."""
    late, group = lateness(), [F.col("producer_group")]
    return [
        Projection("lateness", F.lit(True), group, late),
        *[Projection(f"late_over_{ms}_ms", late > F.lit(float(ms)), group) for ms in LATE_THRESHOLDS_MS],
        Projection("replay_published", _replayed(), group),
    ]


def replay_distinct(publishes: DataFrame) -> DataFrame:
    """One row per producer group with replayed rows: `replay_distinct`, its distinct
    (replay_index, replay_loop) pairs: a query of its own, since a distinct count grouped with the
    lateness would group every row by the counted value as well."""
    return (
        publishes.where(_replayed())
        .groupBy("producer_group")
        .agg(F.count_distinct(F.struct("replay_index", "replay_loop")).alias("replay_distinct"))
    )


def replay_per_second(t0_ns: int) -> Transform:
    """Replayed publishes -> one row per (producer_group, t_s) with any activity: `intended`
    (rows whose intended_ns falls in that whole second since t0) and `published` (rows whose
    publish_ns does). Seconds with neither are absent: both counts are 0 there."""

    def _per_second(publishes: DataFrame) -> DataFrame:
        rows = publishes.where(_replayed())
        times = (
            rows.select(
                "producer_group",
                F.explode(
                    F.array(
                        F.struct(second_since(t0_ns, "intended_ns").alias("t_s"), F.lit(True).alias("intended")),
                        F.struct(second_since(t0_ns, "publish_ns").alias("t_s"), F.lit(False).alias("intended")),
                    )
                ).alias("a"),
            )
            .select("producer_group", "a.*")
            .where(F.col("t_s").isNotNull())
        )
        return (
            times.groupBy("producer_group", "t_s")
            .agg(F.count_if(F.col("intended")).alias("intended"), F.count_if(~F.col("intended")).alias("published"))
            .orderBy("producer_group", "t_s")
        )

    return _per_second


def _gap_struct(gap: str) -> Column:
    value = F.col(gap)
    pcts = percentiles(value, list(GAP_QUANTILES.values()))
    return F.struct(
        F.count(value).alias("count"),
        F.avg(value).alias("mean"),
        *[pcts[i].alias(name) for i, name in enumerate(GAP_QUANTILES)],
    )


def _gaps(publishes: DataFrame) -> DataFrame:
    """Replayed publishes with `_intended_gap` and `_published_gap` (ms): the gap to the group's
    previous row by intended_ns / by publish_ns (null for the first)."""
    rows = publishes.where(_replayed()).select("producer_group", "intended_ns", "publish_ns")
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


def inter_arrival(publishes: DataFrame) -> DataFrame:
    """Replayed publishes -> one row per producer group: `intended` and `published`, structs of
    count, mean and GAP_QUANTILES (ms, exact, linear interpolation) of the gaps between
    consecutive rows of the group ordered by intended_ns / by publish_ns."""
    return (
        _gaps(publishes)
        .groupBy("producer_group")
        .agg(
            _gap_struct("_intended_gap").alias("intended"),
            _gap_struct("_published_gap").alias("published"),
        )
        .orderBy("producer_group")
    )


GAP_RESOLUTION_MS = 0.1
"""Gaps are compared to this resolution (rounded) for the KS distance: the publisher's timing is
good to tens of microseconds, and a file's gaps are often exact (a constant rate); compared
unrounded, a jitter of a microsecond would put every published gap on the other side of its
intended one."""


def gap_ks_distance(publishes: DataFrame) -> DataFrame:
    """Replayed publishes -> one row per producer group: `ks_distance`, the two-sample
    Kolmogorov-Smirnov distance D = max |F_intended(x) - F_published(x)| between the empirical
    distributions of the intended and the published gaps, each rounded to GAP_RESOLUTION_MS
    (exact otherwise: every gap, ties taken together). 0 when the publishes kept the file's
    spacing; 1 when the two never overlap."""
    gaps = _gaps(publishes)

    def rounded(column: str) -> Column:
        return F.round(F.col(column) / GAP_RESOLUTION_MS) * GAP_RESOLUTION_MS

    both = gaps.select(
        "producer_group", rounded("_intended_gap").alias("gap"), F.lit(1).alias("a"), F.lit(0).alias("b")
    ).unionByName(
        gaps.select("producer_group", rounded("_published_gap").alias("gap"), F.lit(0).alias("a"), F.lit(1).alias("b"))
    )
    both = both.where(F.col("gap").isNotNull())
    upto = Window.partitionBy("producer_group").orderBy("gap").rangeBetween(Window.unboundedPreceding, 0)
    whole = Window.partitionBy("producer_group")
    cdf = both.select(
        "producer_group",
        (F.sum("a").over(upto) / F.sum("a").over(whole)).alias("fa"),
        (F.sum("b").over(upto) / F.sum("b").over(whole)).alias("fb"),
    )
    return cdf.groupBy("producer_group").agg(F.max(F.abs(F.col("fa") - F.col("fb"))).alias("ks_distance"))
