"""The fidelity block: publish lateness per producer group, and for trace replay the rows
published once, duplicated or missing, the per-second rates and the inter-arrival gaps."""

from __future__ import annotations

from pytest import approx

from analysis.cube import cube
from analysis.summary.fidelity import LATE_MAX_MS, LATE_P99_MS, fidelity_block
from analysis.transforms.fidelity import lateness_projections

T0 = 1_000_000_000_000
MS = 1_000_000


def pub(group, n, intended_ms, publish_ms, index=None, loop=None):
    """One publish row; times in ms since T0."""
    return dict(
        message_id=f"{group}-{n}",
        producer=f"{group}/w:1/0",
        producer_group=group,
        seq=n,
        intended_ns=T0 + int(intended_ms * MS),
        publish_ns=T0 + int(publish_ms * MS),
        replay_index=index,
        replay_loop=loop,
    )


def late(group, lateness_ms):
    """Synthetic publishes of one group, 10 ms apart, each `lateness_ms[i]` late."""
    return [pub(group, i, 10 * i, 10 * i + d) for i, d in enumerate(lateness_ms)]


# A replayed group: source rows 0, 1, 2 on the first pass (row 1 published twice), row 0 on the
# second. (index, loop, intended ms, published ms)
REPLAYED = [(0, 0, 100, 100), (1, 0, 500, 1100), (1, 0, 500, 1150), (2, 0, 1200, 1300), (0, 1, 3000, 3005)]


def replayed(group="r"):
    return [pub(group, n, i_ms, p_ms, index, loop) for n, (index, loop, i_ms, p_ms) in enumerate(REPLAYED)]


def block(frame, rows, replay=None):
    publishes = frame("publish", *rows)
    return fidelity_block(publishes, cube(publishes, lateness_projections()), T0, replay)


# --- lateness, every group ------------------------------------------------------------


def test_lateness_has_exact_percentiles_max_and_the_shares_later_than_1_and_10_ms(frame):
    got = block(frame, late("s", [0, 1, 2, 3, 100]))["s"]
    # sorted 0 1 2 3 100: p50 = 2; p99 at rank 0.99 x 4 = 3.96 -> 3 + 0.96 x (100 - 3) = 96.12
    assert got["lateness_ms"]["count"] == 5
    assert got["lateness_ms"]["p50"] == approx(2.0)
    assert got["lateness_ms"]["p99"] == approx(96.12)
    assert got["lateness_ms"]["max"] == approx(100.0)
    # later than 1 ms (strictly): 2, 3, 100; later than 10 ms: 100
    assert got["late_share"] == {"over_1_ms": approx(0.6), "over_10_ms": approx(0.2)}


def test_a_group_with_a_p99_over_10_ms_is_behind(frame):
    assert LATE_P99_MS == 10
    got = block(frame, late("a", [0, 1, 2, 3, 100]) + late("b", [10, 10]))
    assert got["a"]["behind"] is True  # p99 96.12
    assert got["b"]["lateness_ms"]["p99"] == approx(10.0)
    assert got["b"]["behind"] is False  # exactly 10 ms is not over


def test_a_single_publish_over_a_second_late_makes_the_group_behind_whatever_its_p99(frame):
    assert LATE_MAX_MS == 1_000
    # 101 rows: the p99 rank is 0.99 x 100 = 99, the second largest, 0 ms; the max is 1.5 s
    got = block(frame, late("s", [0] * 100 + [1500]))["s"]
    assert got["lateness_ms"]["p99"] == approx(0.0)
    assert got["lateness_ms"]["max"] == approx(1500.0)
    assert got["behind"] is True


def test_a_group_on_time_is_not_behind(frame):
    got = block(frame, late("s", [0.5, 0.5, 0.5]))["s"]
    assert got["behind"] is False
    assert got["late_share"] == {"over_1_ms": 0.0, "over_10_ms": 0.0}


def test_a_synthetic_only_run_has_no_replay_fields(frame):
    got = block(frame, late("a", [1, 2]) + late("b", [3]))
    assert sorted(got) == ["a", "b"]
    for group in got.values():
        assert group["replayed"] is False
        assert group["replay"] is None


# --- replay ---------------------------------------------------------------------------


def test_replay_counts_duplicates_and_missing_rows_against_the_plan(frame):
    plan = {
        "r": {
            "source": "orders.csv",
            "format": "csv",
            "rows": 3,
            "speed": 1.0,
            "window": [0, None],
            "loop": True,
            "split": "key",
            "expected": 6,
        }
    }
    got = block(frame, replayed() + late("s", [0]), plan)
    r = got["r"]["replay"]
    # 5 rows; distinct (index, loop): (0,0) (1,0) (2,0) (0,1) = 4; the plan expected 6
    assert (r["published"], r["distinct"], r["duplicates"], r["expected"], r["missing"]) == (5, 4, 1, 6, 2)
    assert r["config"] == {
        "source": "orders.csv",
        "format": "csv",
        "rows": 3,
        "speed": 1.0,
        "window": [0, None],
        "loop": True,
        "split": "key",
    }
    assert got["r"]["replayed"] is True and got["s"]["replay"] is None


def test_replay_lateness_covers_every_row_of_the_group(frame):
    got = block(frame, replayed())["r"]
    # late 0, 600, 650, 100, 5 -> sorted 0 5 100 600 650: p50 100, p99 600 + 0.96 x 50 = 648
    assert got["lateness_ms"]["p50"] == approx(100.0)
    assert got["lateness_ms"]["p99"] == approx(648.0)
    assert got["lateness_ms"]["max"] == approx(650.0)
    assert got["behind"] is True


def test_without_a_plan_expected_and_missing_are_unknown(frame):
    for replay in (None, {}, {"r": "not an object"}, {"r": {"source": "x.csv"}}, {"r": {"expected": "6"}}):
        r = block(frame, replayed(), replay)["r"]["replay"]
        assert (r["published"], r["distinct"], r["expected"], r["missing"]) == (5, 4, None, None)


def test_the_per_second_series_put_intended_and_actual_counts_side_by_side(frame):
    r = block(frame, replayed())["r"]["replay"]
    # intended at 0.1, 0.5, 0.5, 1.2, 3.0 s; published at 0.1, 1.1, 1.15, 1.3, 3.005 s
    assert r["per_second"] == {"t_s": [0, 1, 2, 3], "intended": [3, 1, 0, 1], "published": [1, 3, 0, 1]}
    assert r["per_second_max_diff"] == 2


def test_inter_arrival_gaps_of_intended_and_actual_times(frame):
    r = block(frame, replayed())["r"]["replay"]["inter_arrival_ms"]
    # intended 100 500 500 1200 3000 -> gaps 400 0 700 1800, sorted 0 400 700 1800
    # ranks 0.3, 1.5, 2.7, 2.97 of 3
    assert r["intended"] == {
        "count": 4,
        "mean": approx(725.0),
        "p10": approx(120.0),
        "p50": approx(550.0),
        "p90": approx(1470.0),
        "p99": approx(1767.0),
    }
    # published 100 1100 1150 1300 3005 -> gaps 1000 50 150 1705, sorted 50 150 1000 1705
    assert r["published"] == {
        "count": 4,
        "mean": approx(726.25),
        "p10": approx(80.0),
        "p50": approx(575.0),
        "p90": approx(1493.5),
        "p99": approx(1683.85),
    }


def test_a_planned_group_that_published_nothing_is_all_missing(frame):
    got = block(frame, late("s", [0]), {"ghost": {"expected": 10, "rows": 10}})["ghost"]
    assert got["replayed"] is True and got["behind"] is False
    assert got["lateness_ms"]["count"] == 0 and got["lateness_ms"]["p99"] is None
    r = got["replay"]
    assert (r["published"], r["distinct"], r["duplicates"], r["missing"]) == (0, 0, 0, 10)
    assert r["per_second"] == {"t_s": [], "intended": [], "published": []}
    assert r["per_second_max_diff"] is None
    assert r["inter_arrival_ms"]["intended"]["count"] == 0


def test_an_empty_publish_trace_has_an_empty_block(frame):
    assert block(frame, []) == {}


# --- through the job ------------------------------------------------------------------


def test_the_job_writes_the_block_to_summary_json_with_the_plan_from_run_json(tmp_path, spark, write_trace):
    import json

    from analysis.job import analyze
    from analysis.schema import SCHEMA_VERSION

    run = {
        "schema_version": SCHEMA_VERSION,
        "run_id": "run-1",
        "t0_ns": T0,
        "duration_s": 4,
        "replay": {
            "r": {
                "source": "orders.csv",
                "format": "csv",
                "rows": 3,
                "speed": 1.0,
                "window": [0, None],
                "loop": True,
                "split": "key",
                "expected": 6,
            }
        },
    }
    (tmp_path / "run.json").write_text(json.dumps(run))
    write_trace(tmp_path, "publish", replayed() + late("s", [0.5]))
    analyze(tmp_path, spark=spark)
    fidelity = json.loads((tmp_path / "summary.json").read_text())["fidelity"]
    assert sorted(fidelity) == ["r", "s"]
    assert fidelity["s"]["replay"] is None and fidelity["s"]["behind"] is False
    r = fidelity["r"]
    assert r["behind"] is True
    assert (r["replay"]["duplicates"], r["replay"]["missing"]) == (1, 2)
    assert r["replay"]["per_second"]["published"] == [1, 3, 0, 1]
    assert "The load generator could not keep up" in (tmp_path / "report.html").read_text()


def test_waiting_on_a_blocked_connection_is_not_lateness_and_given_up_publishes_have_none(frame):
    rows = late("s", [1, 2, 3])
    rows.append({**pub("s", 3, 30, 2_034), "blocked_ms": 2_000.0})  # 2,004 ms, 2,000 blocked
    rows.append({**pub("s", 4, 40, 2_040), "blocked_ms": 2_000.0, "outcome": "blocked_timeout"})
    got = block(frame, rows)["s"]
    assert got["lateness_ms"]["count"] == 4  # the given-up one: none
    assert got["lateness_ms"]["max"] == approx(4.0)  # 2,004 - 2,000
    assert got["behind"] is False


# --- p99.9, per-second correlation, KS distance of the gaps -------------------------------


def test_lateness_reports_its_99_9th_percentile(frame):
    lateness = [0.0] * 999 + [50.0]  # 1,000 publishes, one 50 ms late
    got = block(frame, late("s", lateness))["s"]["lateness_ms"]
    # sorted: rank 0.999 x 999 = 998.001 -> 0 + 0.001 x (50 - 0) = 0.05 (linear interpolation)
    assert got["p99_9"] == approx(0.05)
    assert got["p99"] == approx(0.0)


def _ks(a: list[float], b: list[float]) -> float:
    """The two-sample KS distance by brute force, on gaps rounded to 0.1 ms (the documented
    resolution): both empirical CDFs at every observed value."""
    a, b = [round(x, 1) for x in a], [round(x, 1) for x in b]
    return max(abs(sum(x <= v for x in a) / len(a) - sum(x <= v for x in b) / len(b)) for v in set(a) | set(b))


def _pearson(x: list[float], y: list[float]) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    cov = sum((p - mx) * (q - my) for p, q in zip(x, y))
    return cov / (sum((p - mx) ** 2 for p in x) * sum((q - my) ** 2 for q in y)) ** 0.5


def test_bunched_publishes_have_a_large_ks_distance_and_the_per_second_counts_still_correlate(frame):
    # The file: 200, 250 and 100 rows in its three seconds (5, 4 and 10 ms apart). The publisher:
    # on time for the first 2 s, then the last second's rows late, in bunches 0.01 ms apart,
    # every 50 ms.
    intended = (
        [5.0 * i for i in range(200)] + [1000 + 4.0 * i for i in range(250)] + [2000 + 10.0 * i for i in range(100)]
    )
    published = [t if t < 2000 else 2000 + 50 * ((t - 2000) // 50) + 0.01 * ((t - 2000) % 50 // 10) for t in intended]
    rows = [pub("r", i, it, pt, index=i, loop=0) for i, (it, pt) in enumerate(zip(intended, published))]
    got = block(frame, rows)["r"]["replay"]
    gaps_i = [b - a for a, b in zip(intended, intended[1:])]
    ordered = sorted(published)
    gaps_p = [b - a for a, b in zip(ordered, ordered[1:])]
    assert got["inter_arrival_ms"]["ks_distance"] == approx(_ks(gaps_i, gaps_p), abs=1e-9)
    assert got["inter_arrival_ms"]["ks_distance"] > 0.05 and got["inter_arrival_ms"]["faithful"] is False
    series = got["per_second"]
    assert series["intended"] == [200, 250, 100]
    assert got["per_second_correlation"] == approx(_pearson(series["intended"], series["published"]))
    assert got["per_second_correlation"] > 0.99  # the per-second counts alone would call it faithful


def test_a_replay_that_kept_the_spacing_to_within_tens_of_microseconds_is_faithful(frame):
    jitter = [0.0, 0.02, -0.01, 0.03]  # ms: a real publisher's timer
    rows = [pub("r", i, 5.0 * i, 5.0 * i + 0.3 + jitter[i % 4], index=i, loop=0) for i in range(400)]
    got = block(frame, rows)["r"]["replay"]
    assert got["inter_arrival_ms"]["ks_distance"] == approx(0.0, abs=1e-6)
    assert got["inter_arrival_ms"]["faithful"] is True
