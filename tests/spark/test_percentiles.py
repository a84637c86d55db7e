"""The percentile policy: exact percentiles equal numpy's (linear interpolation); approximate ones
are values whose rank is within the stated relative rank error of the exact rank."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pyspark.sql import functions as F

from analysis.job import APPROXIMATE, EXACT_PERCENTILE_ROWS, percentile_policy_for
from analysis.transforms.stats import (
    EXACT,
    PERCENTILES,
    kll_rank_error,
    percentile_policy,
    percentiles,
    stats_by,
    stats_struct,
)

N = 50_000
LARGE = 150_000
"""Values per group for the approximate percentiles: more than a KLL sketch of APPROXIMATE's k keeps
(32,768 at its lowest level), so that its compactions, where its error comes from, are tested."""


@pytest.fixture(scope="module")
def skewed(spark):
    """A long-tailed sample (lognormal) in two groups, and its values per group for numpy."""
    frame = spark.range(N).select((F.col("id") % 2).alias("g"), F.exp(F.randn(seed=5) * 1.2 + 2.0).alias("v")).cache()
    values = {g: np.sort(np.array([r.v for r in frame.where(F.col("g") == g).collect()])) for g in (0, 1)}
    yield frame, values
    frame.unpersist()


@pytest.fixture(scope="module")
def large(spark):
    """LARGE long-tailed values in each of two groups, in four partitions (each task's partial sketch
    is merged with the others'), and the sorted values per group."""
    frame = (
        spark.range(2 * LARGE, numPartitions=4)
        .select((F.col("id") % 2).alias("g"), F.exp(F.randn(seed=11) * 1.5 + 1.0).alias("v"))
        .cache()
    )
    table = frame.toArrow()
    g, v = table.column("g").to_numpy(), table.column("v").to_numpy()
    yield frame, {k: np.sort(v[g == k]) for k in (0, 1)}
    frame.unpersist()


def _stats(frame, policy):
    with percentile_policy(policy):
        metric = stats_struct("v").alias("v")
        return {r.g: r.v for r in frame.groupBy("g").agg(metric).collect()}


def _within_rank_error(block, v, error):
    """Every percentile of `block` lies between the values of ranks (q - error) n and (q + error) n."""
    n = len(v)
    assert block["count"] == n and block["max"] == v[-1]  # not approximated
    for name, q in PERCENTILES.items():
        lo, hi = v[max(0, math.floor((q - error) * n) - 1)], v[min(n - 1, math.ceil((q + error) * n))]
        assert lo <= block[name] <= hi, (name, lo, block[name], hi)


def test_exact_percentiles_are_numpys(skewed):
    frame, values = skewed
    with percentile_policy(EXACT):
        stats = {r.g: r.v for r in frame.transform(stats_by(["g"], {"v": "v"})).collect()}
    for g, block in stats.items():
        for name, q in PERCENTILES.items():
            assert block[name] == pytest.approx(np.percentile(values[g], q * 100), rel=1e-12)


def test_the_stated_rank_error_bounds_both_sketches():
    described = APPROXIMATE.describe()
    assert described["method"] == "approximate"
    # DataSketches' KLL bound (KllSketch.getNormalizedRankError(k, false)), at 99 % confidence
    assert kll_rank_error(32_768) == pytest.approx(2.296 / 32_768**0.9723)
    assert described["kll_k"] == APPROXIMATE.kll_k and described["confidence"] == 0.99
    assert described["relative_rank_error"] == max(1 / APPROXIMATE.accuracy, kll_rank_error(APPROXIMATE.kll_k))
    assert described["relative_rank_error"] == pytest.approx(1e-4)  # the bound summary.json has always stated


def test_the_approximate_percentiles_come_from_the_sketch_the_summary_names(spark):  # builds JVM columns
    with percentile_policy(APPROXIMATE):
        column = str(percentiles(F.col("v"), [0.5]))
    assert "kll_sketch_agg_double(CAST(v AS DOUBLE), 32768)" in column and "percentile_approx" not in column


def test_approximate_percentiles_are_within_the_stated_rank_error(large):
    frame, values = large
    error = APPROXIMATE.describe()["relative_rank_error"]
    for g, block in _stats(frame, APPROXIMATE).items():  # a KLL sketch per group
        _within_rank_error(block, values[g], error)


def test_a_group_without_values_has_null_percentiles(spark):
    frame = spark.createDataFrame([(0, 1.0), (1, None)], "g int, v double")
    stats = _stats(frame, APPROXIMATE)
    assert stats[1].asDict() == {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    assert stats[0]["p50"] == stats[0]["p99"] == 1.0


def test_auto_is_exact_up_to_the_limit_and_approximate_above():
    assert percentile_policy_for("auto", EXACT_PERCENTILE_ROWS, 10) == EXACT
    assert percentile_policy_for("auto", 10, EXACT_PERCENTILE_ROWS + 1) == APPROXIMATE
    assert percentile_policy_for("exact", 10**9, 10**9) == EXACT
    with pytest.raises(ValueError, match="percentiles must be one of auto, exact, approximate"):
        percentile_policy_for("fast", 1, 1)
