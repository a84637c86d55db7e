"""analysis.cube: many small aggregations of one frame in one Spark action, checked against the
same counts and percentiles computed in plain Python and numpy from the rows themselves."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F

from analysis.buckets import RELATIVE_ERROR
from analysis.cube import Projection, cube


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(3)
    groups = rng.choice(["a", "b", "c"], 3_000)
    values = np.round(rng.lognormal(0.0, 2.0, 3_000) * np.where(rng.random(3_000) < 0.1, -1, 1), 6)
    values[::97] = 0.0
    flags = rng.random(3_000) < 0.3
    return [
        (str(g), float(v) if i % 50 else None, bool(f) if i % 7 else None)
        for i, (g, v, f) in enumerate(zip(groups, values, flags))
    ]


def test_counts_and_percentiles_per_key_are_those_of_the_rows(spark, rows):
    frame = spark.createDataFrame(rows, "g string, v double, f boolean")
    got = cube(
        frame,
        [
            Projection("all", F.lit(True), [F.col("g")], F.col("v")),
            Projection("flagged", F.col("f"), [F.col("g"), F.col("f")]),  # a null flag counts as false
            Projection("whole", F.lit(True), value=F.col("v")),
        ],
    )
    by_group: dict[str, list] = {}
    for g, v, _ in rows:
        by_group.setdefault(g, []).append(v)
    assert got.counts("all") == {g: len(vs) for g, vs in by_group.items()}  # null values counted too
    flagged = [(g, "true") for g, _, f in rows if f]
    assert got.counts("flagged", by=2) == {k: flagged.count(k) for k in set(flagged)}
    for g, h in got.histograms("all").items():
        values = np.array([v for v in by_group[g] if v is not None])
        assert (h.n, h.min(), h.max()) == (len(values), values.min(), values.max())
        assert h.mean() == pytest.approx(values.mean(), rel=1e-12)
        for q, x in zip((0.5, 0.9, 0.99), h.quantiles([0.5, 0.9, 0.99])):
            exact = np.quantile(values, q)
            assert x == pytest.approx(exact, rel=RELATIVE_ERROR, abs=RELATIVE_ERROR * np.abs(values).max())
    whole = got.histograms("whole")[None]
    assert whole.n == sum(1 for _, v, _ in rows if v is not None)


def test_a_projection_name_given_twice_is_refused(spark):
    frame = spark.range(1)
    with pytest.raises(ValueError, match="repeat"):
        cube(frame, [Projection("x", F.lit(True)), Projection("x", F.lit(True))])
