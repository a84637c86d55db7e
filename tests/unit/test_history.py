"""Trends across nights: baselines are the median of the previous N runs of the same scenario,
and a regression is flagged only in the metric's bad direction beyond the tolerance."""

from __future__ import annotations

from analysis.history import build_history


def summary(
    scenario: str,
    t: int,
    *,
    p99: float,
    ack: float,
    unaccounted: int = 0,
    slo_ok: bool = True,
    status: str = "completed",
) -> dict:
    return {
        "run": {"run_id": f"{scenario}-{t}", "scenario": scenario, "t0_ns": t * 86_400 * 10**9, "status": status},
        "throughput": {"ack_per_s": ack},
        "sojourn_ms": {"p50": 1.0, "p99": p99},
        "latency_ms": {"end_to_end": {"p99": 5.0}},
        "messages": {"discarded_total": 0, "unaccounted": unaccounted},
        "slo": [{"expr": "sojourn_ms.p99 < 15", "passed": slo_ok}],
    }


NIGHTS = [
    summary("a", 1, p99=10, ack=100),
    summary("b", 1, p99=100, ack=10),
    summary("a", 2, p99=12, ack=100),
    summary("a", 3, p99=11, ack=90),
    summary("a", 4, p99=20, ack=70, slo_ok=False),
]


def runs_of(history: dict, scenario: str) -> list[dict]:
    return [r for r in history["runs"] if r["scenario"] == scenario]


def test_runs_are_listed_oldest_first_with_their_verdicts():
    history = build_history(list(reversed(NIGHTS)), window=3, tolerance=0.2)
    assert [r["run_id"] for r in history["runs"]] == ["a-1", "b-1", "a-2", "a-3", "a-4"]
    assert [r["verdict"] for r in history["runs"]] == ["pass", "pass", "pass", "pass", "fail"]
    assert history["runs"][-1]["failed_slo"] == ["sojourn_ms.p99 < 15"]


def test_the_first_run_of_a_scenario_has_no_baseline_and_no_regression():
    history = build_history(NIGHTS, window=3, tolerance=0.2)
    first = runs_of(history, "a")[0]
    assert first["baseline"]["sojourn_ms.p99"] is None and first["regressions"] == []


def test_an_injected_regression_is_flagged_against_the_median_of_the_previous_runs():
    a4 = runs_of(build_history(NIGHTS, window=3, tolerance=0.2), "a")[-1]
    # baseline p99 = median(10, 12, 11) = 11; 20 > 11 x 1.2 = 13.2
    # baseline ack = median(100, 100, 90) = 100; 70 < 100 x 0.8 = 80
    assert a4["baseline"]["sojourn_ms.p99"] == 11
    assert a4["baseline"]["throughput.ack_per_s"] == 100
    assert sorted(a4["regressions"]) == ["sojourn_ms.p99", "throughput.ack_per_s"]


def test_a_change_within_tolerance_or_in_the_good_direction_is_not_flagged():
    a3 = runs_of(build_history(NIGHTS, window=3, tolerance=0.2), "a")[2]
    # ack 90 vs median(100, 100) = 100: 10 % worse, inside 20 %; p99 11 vs median(10, 12) = 11
    assert a3["regressions"] == []
    better = build_history([summary("a", 1, p99=10, ack=100), summary("a", 2, p99=2, ack=500)])
    assert better["runs"][1]["regressions"] == []


def test_the_window_limits_the_baseline_to_the_last_n_runs():
    a4 = runs_of(build_history(NIGHTS, window=2, tolerance=0.2), "a")[-1]
    assert a4["baseline"]["sojourn_ms.p99"] == 11.5  # median(12, 11)
    assert a4["baseline"]["throughput.ack_per_s"] == 95  # median(100, 90)


def test_other_scenarios_do_not_enter_the_baseline():
    history = build_history(NIGHTS + [summary("b", 5, p99=105, ack=10)], window=3, tolerance=0.2)
    b = runs_of(history, "b")[-1]
    assert b["baseline"]["sojourn_ms.p99"] == 100 and b["regressions"] == []


def test_any_unaccounted_message_after_a_clean_baseline_is_a_regression():
    history = build_history([summary("a", 1, p99=10, ack=100), summary("a", 2, p99=10, ack=100, unaccounted=1)])
    assert history["runs"][1]["regressions"] == ["messages.unaccounted"]


def test_suite_entries_keep_separate_baselines_for_one_scenario():
    on = {**summary("q", 1, p99=10, ack=100), "entry": "q-codel"}
    off = {**summary("q", 2, p99=100, ack=100), "entry": "q-plain"}
    history = build_history([on, off])
    assert history["runs"][1]["scenario"] == "q-plain" and history["runs"][1]["regressions"] == []


def test_a_run_that_did_not_complete_is_an_error_verdict():
    history = build_history([summary("a", 1, p99=10, ack=100, status="interrupted")])
    assert history["runs"][0]["verdict"] == "error"


def test_a_run_that_did_not_complete_neither_makes_a_baseline_nor_is_flagged():
    """A stopped night measured part of a run (a short, slow start, no drain): its numbers are listed
    but neither judged against the baseline nor put into the next nights' baselines."""
    history = build_history(
        [
            summary("a", 1, p99=10, ack=100),
            summary("a", 2, p99=50, ack=20, status="interrupted"),
            summary("a", 3, p99=11, ack=95),
        ],
        window=3,
        tolerance=0.2,
    )
    stopped, after = runs_of(history, "a")[1:]
    assert stopped["status"] == "interrupted" and stopped["verdict"] == "error"
    assert stopped["metrics"]["sojourn_ms.p99"] == 50 and stopped["regressions"] == []
    # the third night's baseline is the first night alone: median(10) and median(100)
    assert after["baseline"]["sojourn_ms.p99"] == 10
    assert after["baseline"]["throughput.ack_per_s"] == 100
