from pyspark.sql import functions as F
from pytest import approx

from analysis.summary import stats_block
from analysis.transforms import stats_by


def test_five_values_give_exact_linearly_interpolated_percentiles(spark):
    df = spark.createDataFrame([(v,) for v in (4.0, 1.0, 10.0, 3.0, 2.0)], "v double")
    block = stats_block(df.transform(stats_by([], {"v": "v"})).first()["v"])
    # sorted 1 2 3 4 10, n = 5; rank = (n - 1) * p between 0-based positions:
    #   p50: 4 * 0.50 = 2.0  -> 3
    #   p95: 4 * 0.95 = 3.8  -> 4 + 0.8 * (10 - 4) = 8.8
    #   p99: 4 * 0.99 = 3.96 -> 4 + 0.96 * (10 - 4) = 9.76
    # mean (1 + 2 + 3 + 4 + 10) / 5 = 4
    assert block == {"count": 5, "mean": 4.0, "p50": 3.0, "p95": approx(8.8), "p99": approx(9.76), "max": 10.0}


def test_stats_are_grouped_by_keys_and_skip_nulls(spark):
    df = spark.createDataFrame([("a", 1.0), ("a", 2.0), ("a", None), ("b", None), ("c", 5.0)], "k string, v double")
    got = {r.k: stats_block(r.v) for r in df.transform(stats_by(["k"], {"v": F.col("v")})).collect()}
    # a: 1 2 -> p50 at rank 0.5 = 1.5; p95 at 0.95 = 1.95; p99 at 0.99 = 1.99
    assert got["a"] == {"count": 2, "mean": 1.5, "p50": 1.5, "p95": approx(1.95), "p99": approx(1.99), "max": 2.0}
    # b has only a null: count 0 and every other value null
    assert got["b"] == {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    # a single value is every percentile
    assert got["c"] == {"count": 1, "mean": 5.0, "p50": 5.0, "p95": 5.0, "p99": 5.0, "max": 5.0}


def test_a_conditional_metric_only_counts_the_rows_it_selects(spark):
    df = spark.createDataFrame([(1.0, True), (100.0, False), (3.0, True)], "v double, keep boolean")
    row = df.transform(
        stats_by([], {"kept": F.when(F.col("keep"), F.col("v")), "all": "v"}, fields=("count", "max"))
    ).first()
    assert stats_block(row.kept, ("count", "max")) == {"count": 2, "max": 3.0}
    assert stats_block(row["all"], ("count", "max")) == {"count": 3, "max": 100.0}


def test_other_aggregates_come_from_the_same_grouping(spark):
    df = spark.createDataFrame([("a", 1.0), ("a", 7.0), ("b", 2.0)], "k string, v double")
    rows = df.transform(stats_by(["k"], {"v": "v"}, fields=("count",), also=[F.sum("v").alias("total")])).collect()
    assert {r.k: (r.v["count"], r.total) for r in rows} == {"a": (2, 8.0), "b": (1, 2.0)}
