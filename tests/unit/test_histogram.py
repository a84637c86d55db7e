import numpy as np
import pytest

from analysis.buckets import GAMMA, Histogram
from analysis.summary.histogram import histogram_edges, sojourn_histogram


def test_edges_are_about_40_nice_linear_bins_from_zero_to_the_max():
    # 37.2 / 40 = 0.93 -> width 1; ceil(37.2 / 1) = 38 bins
    assert histogram_edges(0.4, 37.2) == [float(i) for i in range(39)]
    # 100 / 40 = 2.5 -> width 2.5, exactly 40 bins
    edges = histogram_edges(3.0, 100.0)
    assert (len(edges), edges[1], edges[-1]) == (41, 2.5, 100.0)
    # 0.3 / 40 = 0.0075 -> width 0.01; 30 bins; edges rounded, no 0.30000000000000004
    assert histogram_edges(0.0, 0.3)[-1] == 0.3


def test_no_data_gives_a_single_empty_bin():
    assert histogram_edges(None, None) == [0.0, 1.0]
    assert sojourn_histogram(Histogram.empty()) == {"edges_ms": [0.0, 1.0], "counts": [0]}


def test_a_value_on_an_edge_opens_the_next_bin_and_the_last_bin_is_closed():
    values = [0.0, 0.5, 1.0, 2.0, 2.9, 3.0]
    got = sojourn_histogram(Histogram.of(values), bins=3)
    # [0,1): 0.0 0.5   [1,2): 1.0   [2,3]: 2.0 2.9 3.0 (no log bucket straddles 1 or 2: the edges stay)
    assert got == {"edges_ms": [0.0, 1.0, 2.0, 3.0], "counts": [2, 1, 3]}


def test_an_edge_inside_a_log_bucket_moves_down_to_its_minimum():
    # 9.99 and 10.02 share a log bucket (1 % wide), which straddles the nice edge 10
    values = [1.0, 9.99, 10.02, 35.0]
    h = Histogram.of(values)
    assert len(h.buckets) == 3
    got = sojourn_histogram(h)
    nice = histogram_edges(1.0, 35.0)
    assert nice[10] == 10.0 and got["edges_ms"][10] == 9.99
    assert got["edges_ms"][:10] + got["edges_ms"][11:] == nice[:10] + nice[11:]
    assert got["counts"] == np.histogram(values, got["edges_ms"])[0].tolist()


@pytest.mark.parametrize("seed", range(5))
def test_counts_are_numpys_for_the_edges_written_and_the_edges_stay_within_a_bucket_of_nice(seed):
    rng = np.random.default_rng(seed)
    values = np.concatenate(
        [rng.lognormal(1.5, 1.0, 20_000), rng.uniform(0, 3, 5_000), -rng.exponential(0.5, 50 * seed), [0.0] * seed]
    )
    got = sojourn_histogram(Histogram.of(values))
    edges = np.asarray(got["edges_ms"])
    nice = np.asarray(histogram_edges(values.min(), values.max()))
    assert len(edges) == len(nice) and (np.diff(edges) > 0).all()
    moved = edges != nice
    assert moved.any()  # some nice edge fell inside a bucket
    # a moved edge is a value of the data, below the nice edge by less than one bucket
    assert np.isin(edges[moved], values).all()
    assert ((nice[moved] - edges[moved]) < (GAMMA - 1) * np.abs(nice[moved])).all()
    assert got["counts"] == np.histogram(values, edges)[0].tolist()
    assert sum(got["counts"]) == len(values)
