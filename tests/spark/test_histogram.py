from analysis.transforms import histogram_counts, histogram_edges


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


def test_a_value_on_an_edge_opens_the_next_bin_and_the_last_bin_is_closed(spark):
    df = spark.createDataFrame([(v,) for v in (0.0, 0.5, 1.0, 2.9, 3.0, None)], "v double")
    got = {r["bin"]: r["count"] for r in df.transform(histogram_counts([0.0, 1.0, 2.0, 3.0], "v")).collect()}
    # [0,1): 0.0 0.5   [1,2): 1.0   [2,3]: 2.9 3.0   null: not counted
    assert got == {0: 2, 1: 1, 2: 2}
