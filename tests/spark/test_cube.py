"""analysis.cube: many small aggregations of one frame in one Spark action, checked against the
same counts and percentiles computed in plain Python and numpy from the rows themselves."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F

from analysis.buckets import RELATIVE_ERROR
from analysis.cube import Cells, Projection, cube


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


def test_three_keys_exact_totals_and_groupings_beside_the_projections(spark, rows):
    frame = spark.createDataFrame(rows, "g string, v double, f boolean")
    got = cube(
        frame,
        [
            Projection("by3", F.lit(True), [F.col("g"), F.col("f"), F.lit("x")], F.col("v")),
            Projection("least", F.col("v").isNotNull(), [F.col("g")], F.col("v"), bucketed=False),
        ],
        [
            Cells({"g": F.col("g")}, {"rows": F.count(F.lit(1)), "biggest": F.max("v")}, name="per_group"),
            Cells({"f": F.col("f")}, {"rows": F.count(F.lit(1))}, name="per_flag"),
        ],
    )
    by_key: dict[tuple, list] = {}
    for g, v, f in rows:
        by_key.setdefault((g, None if f is None else str(f).lower(), "x"), []).append(v)
    assert got.counts("by3", by=3) == {k: len(vs) for k, vs in by_key.items()}  # a null key is a key of its own
    for g in {g for g, _, _ in rows}:
        values = [v for gg, v, _ in rows if gg == g and v is not None]
        # not bucketed: one row per key, its sum, minimum and maximum exact
        n, total, least, most = got.totals("least")[g]
        assert (n, least, most) == (len(values), min(values), max(values))
        assert total == pytest.approx(sum(values), rel=1e-12)
    per_group = {r["g"]: r for r in got.cells("per_group")}
    for g, r in per_group.items():
        mine = [v for gg, v, _ in rows if gg == g]
        assert r == {"g": g, "rows": len(mine), "biggest": max(v for v in mine if v is not None)}
    flags = [f for _, _, f in rows]
    assert {r["f"]: r["rows"] for r in got.cells("per_flag")} == {f: flags.count(f) for f in set(flags)}
    with pytest.raises(ValueError, match="bucketed"):
        got.totals("by3", by=3)


def test_a_grouping_may_name_its_columns_as_the_cubes_but_not_a_key_as_an_aggregate(spark):
    # its rows travel as JSON objects: the cube's own columns (p, n, sum, ...) are no concern of theirs
    got = cube(
        spark.range(3), [Projection("x", F.lit(True))], [Cells({"n": F.col("id") % 2}, {"sum": F.count(F.lit(1))})]
    )
    assert sorted((r["n"], r["sum"]) for r in got.cells()) == [(0, 2), (1, 1)]
    assert got.counts("x") == {None: 3}
    with pytest.raises(ValueError, match="clash"):
        cube(spark.range(1), [Projection("x", F.lit(True))], [Cells({"n": F.col("id")}, {"n": F.count(F.lit(1))})])
