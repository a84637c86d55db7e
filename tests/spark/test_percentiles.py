"""The percentile policy: exact percentiles equal numpy's (linear interpolation); approximate ones
are values whose rank is within the stated relative rank error of the exact rank."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pyspark.sql import functions as F

from analysis.job import APPROXIMATE, EXACT_PERCENTILE_ROWS, percentile_policy_for
from analysis.transforms.stats import EXACT, PERCENTILES, percentile_policy, stats_by

N = 50_000


@pytest.fixture(scope="module")
def skewed(spark):
    """A long-tailed sample (lognormal) in two groups, and its values per group for numpy."""
    frame = spark.range(N).select((F.col("id") % 2).alias("g"), F.exp(F.randn(seed=5) * 1.2 + 2.0).alias("v")).cache()
    values = {g: np.sort(np.array([r.v for r in frame.where(F.col("g") == g).collect()])) for g in (0, 1)}
    yield frame, values
    frame.unpersist()


def _stats(frame, policy):
    with percentile_policy(policy):
        return {r.g: r.v for r in frame.transform(stats_by(["g"], {"v": "v"})).collect()}


def test_exact_percentiles_are_numpys(skewed):
    frame, values = skewed
    for g, block in _stats(frame, EXACT).items():
        for name, q in PERCENTILES.items():
            assert block[name] == pytest.approx(np.percentile(values[g], q * 100), rel=1e-12)


def test_approximate_percentiles_are_within_the_stated_rank_error(skewed):
    frame, values = skewed
    error = APPROXIMATE.describe()["relative_rank_error"]
    assert error == 1 / APPROXIMATE.accuracy
    for g, block in _stats(frame, APPROXIMATE).items():
        v, n = values[g], len(values[g])
        assert block["count"] == n and block["max"] == v[-1]  # not approximated
        for name, q in PERCENTILES.items():
            lo, hi = v[max(0, math.floor((q - error) * n) - 1)], v[min(n - 1, math.ceil((q + error) * n))]
            assert lo <= block[name] <= hi, (g, name)


def test_auto_is_exact_up_to_the_limit_and_approximate_above():
    assert percentile_policy_for("auto", EXACT_PERCENTILE_ROWS, 10) == EXACT
    assert percentile_policy_for("auto", 10, EXACT_PERCENTILE_ROWS + 1) == APPROXIMATE
    assert percentile_policy_for("exact", 10**9, 10**9) == EXACT
    with pytest.raises(ValueError, match="percentiles must be one of auto, exact, approximate"):
        percentile_policy_for("fast", 1, 1)
