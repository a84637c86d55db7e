"""Log-bucket histograms (analysis/buckets.py) against numpy on the raw data: exact count, min, max
and mean; every quantile within RELATIVE_ERROR of numpy.quantile(method="linear"); merging parts
gives the histogram of the whole."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.buckets import BUCKET_OFFSET, GAMMA, RELATIVE_ERROR, Histogram, bucket_of, describe, merge

QS = (0, 0.01, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 1)
SLACK = 1 + 1e-9  # float rounding at bucket bounds, far below the bound itself
FIELDS = ("buckets", "counts", "sums", "mins", "maxs")


def _datasets() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20240611)
    return {
        "lognormal_ns": np.minimum(rng.lognormal(mean=15, sigma=3, size=50_000), 1e12).astype(np.int64),
        "exponential_ms": rng.exponential(scale=2.0, size=50_000),
        "uniform_ms": rng.uniform(0, 100, size=20_000),
        "repeated": rng.choice([0.25, 1.0, 3.0, 3.5, 1000.0], size=20_000, p=[0.1, 0.4, 0.3, 0.15, 0.05]),
        "negatives_and_zeros": np.concatenate(
            [rng.normal(2.0, 5.0, size=20_000), np.zeros(3_000), -rng.exponential(0.01, size=2_000)]
        ),
        "single": np.array([42.5]),
        "two": np.array([-3.0, 7.25]),
        "ns_up_to_1e13": rng.integers(-(10**9), 10**13, size=20_000, dtype=np.int64),
        "million": rng.lognormal(mean=1.0, sigma=1.5, size=1_000_000),
    }


DATASETS = _datasets()


def _assert_quantiles_close(values: np.ndarray, got: list[float | None], qs=QS) -> None:
    x = np.sort(values.astype(np.float64))
    exact = np.quantile(values.astype(np.float64), qs, method="linear")
    for q, g, e in zip(qs, got, exact):
        h = (len(x) - 1) * q
        lo, hi = x[math.floor(h)], x[math.ceil(h)]
        assert g is not None
        bound = RELATIVE_ERROR * (abs(e) if np.sign(lo) * np.sign(hi) >= 0 else max(abs(lo), abs(hi)))
        assert abs(g - e) <= bound * SLACK, (q, g, e)


@pytest.mark.parametrize("name", DATASETS)
def test_quantiles_are_within_the_relative_error_of_numpy_and_count_min_max_mean_are_exact(name):
    values = DATASETS[name]
    h = Histogram.of(values)
    _assert_quantiles_close(values, h.quantiles(QS))
    assert h.n == len(values)
    assert h.min() == values.min() and h.max() == values.max()
    mean = h.mean()
    assert mean is not None
    assert abs(mean - np.mean(values)) <= 1e-12 * np.mean(np.abs(values))
    assert h.quantiles([0, 1]) == [float(values.min()), float(values.max())]


def test_stats_names_its_percentiles_and_matches_the_quantiles():
    values = DATASETS["exponential_ms"]
    h = Histogram.of(values)
    stats = h.stats()
    assert list(stats) == ["count", "mean", "p50", "p95", "p99", "max"]
    assert stats["count"] == len(values) and stats["max"] == values.max()
    assert [stats["p50"], stats["p95"], stats["p99"]] == h.quantiles([0.5, 0.95, 0.99])
    assert list(h.stats((0.1, 0.999, 0.9999))) == ["count", "mean", "p10", "p99_9", "p99_99", "max"]


def test_a_bucket_whose_values_are_all_equal_gives_them_exactly():
    values = DATASETS["repeated"]
    h = Histogram.of(values)
    assert h.quantiles(QS) == list(np.quantile(values, QS, method="linear"))


def test_a_buckets_first_and_last_values_are_exact_and_those_between_within_the_bound():
    values = np.array([1.0, 1.002, 1.004, 1.006, 2.0, 2.001, 2.002, 2.003, 5.0])  # buckets of 4, 4 and 1 values
    h = Histogram.of(values)
    assert h.counts.tolist() == [4, 4, 1]
    got = h.quantiles(np.arange(9) / 8)  # each rank in turn
    assert [got[r] for r in (0, 3, 4, 7, 8)] == [values[r] for r in (0, 3, 4, 7, 8)]
    _assert_quantiles_close(values, got, qs=np.arange(9) / 8)


def test_the_bound_is_reached_at_a_buckets_ends():
    lo, hi = GAMMA**200 * (1 + 1e-9), GAMMA**201 * (1 - 1e-9)
    for values, inner in (([lo, lo, lo, hi], lo), ([lo, hi, hi, hi], hi)):
        assert len(np.unique(bucket_of(np.array(values)))) == 1
        got = Histogram.of(np.array(values)).quantiles([1 / 3, 2 / 3])  # the two values between first and last
        for g in got:
            assert g is not None and abs(g - inner) <= RELATIVE_ERROR * inner * SLACK
            assert abs(g - inner) >= RELATIVE_ERROR * inner * 0.999


def _assert_same(a: Histogram, b: Histogram) -> None:
    for name in ("buckets", "counts", "mins", "maxs"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_allclose(a.sums, b.sums, rtol=1e-12)  # summed in another order


@pytest.mark.parametrize("name", ["lognormal_ns", "negatives_and_zeros", "million"])
def test_merging_the_histograms_of_random_splits_gives_the_histogram_of_the_whole(name):
    values = DATASETS[name]
    rng = np.random.default_rng(7)
    parts = np.split(rng.permutation(values), np.sort(rng.integers(0, len(values), size=6)))
    whole, merged = Histogram.of(values), merge(*(Histogram.of(p) for p in parts))
    _assert_same(merged, whole)
    _assert_quantiles_close(values, merged.quantiles(QS))
    assert merged.n == whole.n and merged.min() == whole.min() and merged.max() == whole.max()


def test_from_columns_with_repeated_buckets_in_any_order_equals_merge():
    values = DATASETS["negatives_and_zeros"]
    rng = np.random.default_rng(11)
    parts = [Histogram.of(p) for p in np.array_split(rng.permutation(values), 5)]  # e.g. one per consumer
    columns = [np.concatenate([getattr(p, name) for p in parts]) for name in FIELDS]
    assert len(np.unique(columns[0])) < len(columns[0])
    order = rng.permutation(len(columns[0]))
    rows = Histogram.from_columns(*(c[order] for c in columns))
    _assert_same(rows, merge(*parts))
    _assert_same(rows, Histogram.of(values))


def test_rows_with_count_zero_are_dropped():
    h = Histogram.from_columns([3, 3, 5], [0, 2, 1], [0.0, 2.0, 9.0], [np.nan, 1.0, 9.0], [np.nan, 1.0, 9.0])
    assert h.buckets.tolist() == [3, 5] and h.counts.tolist() == [2, 1] and h.mins.tolist() == [1.0, 9.0]


def test_integer_ns_and_float_ms_inputs_give_the_same_buckets_up_to_the_unit():
    ns = DATASETS["ns_up_to_1e13"]
    assert ns.dtype == np.int64 and ns.max() > 9e12
    h_ns = Histogram.of(ns)
    _assert_quantiles_close(ns, h_ns.quantiles(QS))
    np.testing.assert_array_equal(bucket_of(ns), bucket_of(ns.astype(np.float64)))
    ms = ns / 1e6
    _assert_quantiles_close(ms, Histogram.of(ms).quantiles(QS))


def test_bucket_indices_at_and_around_the_powers_of_gamma():
    edges = bucket_of(np.array([0.0, 1.0, GAMMA, -1.0, -GAMMA])) - np.sign([0, 1, 1, -1, -1]) * BUCKET_OFFSET
    assert edges.tolist() == [0, 0, 1, 0, -1]
    k = np.arange(-2_000, 3_100)
    powers = GAMMA ** k.astype(np.float64)
    at = bucket_of(powers) - BUCKET_OFFSET
    assert np.isin(at - k, [-1, 0]).all()  # GAMMA**k, rounded, or ln of it, may fall just below
    assert (bucket_of(np.nextafter(powers, np.inf)) - BUCKET_OFFSET >= k - 1).all()
    assert (bucket_of(np.nextafter(powers, 0)) - BUCKET_OFFSET <= k).all()
    np.testing.assert_array_equal(bucket_of(-powers), -bucket_of(powers))


def test_values_below_one_do_not_share_a_bucket_with_zero_or_with_the_opposite_sign():
    tiny = np.array([5e-324, 1e-300, 1e-9, 0.5, 0.999, 1.0, 1e300, np.finfo(np.float64).max])
    b = bucket_of(tiny)
    assert (b > 0).all() and (np.diff(b) >= 0).all()
    assert (bucket_of(-tiny) < 0).all()
    _assert_quantiles_close(np.concatenate([tiny, -tiny, [0.0]]), Histogram.of(np.r_[tiny, -tiny, 0.0]).quantiles(QS))


def test_no_bucket_spans_more_than_a_ratio_of_gamma():
    rng = np.random.default_rng(3)
    k = np.arange(-700, 3_000).astype(np.float64)
    powers = GAMMA**k
    near = np.concatenate([powers, np.nextafter(powers, 0), np.nextafter(powers, np.inf), powers * (1 + 1e-13)])
    spread = np.exp(rng.uniform(math.log(1e-6), math.log(1e13), size=200_000))
    values = np.concatenate([near, spread, -near, -spread])
    h = Histogram.of(values)
    assert ((h.buckets > 0) == (h.mins > 0)).all() and ((h.buckets > 0) == (h.maxs > 0)).all()
    pos, neg = h.buckets > 0, h.buckets < 0
    assert (h.maxs[pos] / h.mins[pos] <= GAMMA * (1 + 1e-12)).all()
    assert (h.mins[neg] / h.maxs[neg] <= GAMMA * (1 + 1e-12)).all()
    _assert_quantiles_close(values, h.quantiles(QS))


def test_the_empty_histogram():
    for h in (Histogram.empty(), Histogram.of(np.array([])), merge(), merge(Histogram.empty(), Histogram.empty())):
        assert h.n == 0 and h.mean() is None and h.min() is None and h.max() is None
        assert h.quantiles(QS) == [None] * len(QS)
        assert h.stats() == {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    one = Histogram.of(np.array([2.0]))
    _assert_same(merge(Histogram.empty(), one), one)


def test_histograms_are_immutable_and_reject_bad_input():
    h = Histogram.of(np.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        h.counts[0] = 5
    with pytest.raises(ValueError):
        Histogram.of(np.array([1.0, np.nan]))
    with pytest.raises(ValueError):
        h.quantiles([1.5])
    with pytest.raises(ValueError):
        Histogram(h.buckets[::-1], h.counts, h.sums, h.mins, h.maxs)


def test_describe():
    assert describe() == {
        "method": "log_histogram",
        "relative_error": 0.004975,
        "gamma": 1.01,
        "interpolation": "linear, between order statistics (numpy's 'linear', Spark's percentile)",
    }
    assert abs(RELATIVE_ERROR - 0.01 / 2.01) < 1e-15
