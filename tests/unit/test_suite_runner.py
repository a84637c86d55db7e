"""The nightly orchestration on a fake load and analysis: each entry's printout, JUnit cases, continuing past a
failing scenario, history, regressions and retention. No broker, no Spark."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

from loadgen.suite import Suite, SuiteEntry, prune_runs
from loadgen.suite.runner import run_suite, write_history


def fake_summary(name: str, t0_s: int, p99: float, slo: list[dict] | None = None) -> dict:
    return {
        "run": {"run_id": f"{name}-{t0_s}", "scenario": name, "t0_ns": t0_s * 10**9, "status": "completed"},
        "throughput": {"ack_per_s": 300.0},
        "sojourn_ms": {"p50": 1.0, "p99": p99},
        "messages": {"discarded_total": 0, "unaccounted": 0},
        "slo": slo or [],
    }


def suite(*entries: SuiteEntry, keep: int | None = None) -> Suite:
    return Suite("s.yaml", "nightly", keep, 3, 0.2, entries)


_CLOCK = [0]  # shared by every fake_analyze() not given its own clock


def fake_analyze(p99_by_entry: dict, clock: list[int] | None = None):
    if clock is None:
        clock = _CLOCK

    def analyze(run_dir: str) -> dict:
        name = os.path.basename(run_dir).split("-", 1)[1]
        if p99_by_entry[name] is None:
            raise RuntimeError("no traces")
        clock[0] += 1
        s = fake_summary(name, clock[0], p99_by_entry[name])
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(s, f)
        return s

    return analyze


def cases(path) -> dict[str, str | None]:
    root = ET.parse(path).getroot()
    return {
        f"{tc.get('classname')} {tc.get('name')}": (
            tc.find("failure").get("message") if tc.find("failure") is not None else None
        )
        for tc in root.iter("testcase")
    }


def test_a_failing_slo_is_a_junit_failure_carrying_the_expression_and_the_measured_value(tmp_path):
    s = suite(SuiteEntry("fast", "x", (), ("sojourn_ms.p99 < 250", "sojourn_ms.p99 < 5")))
    outcome = run_suite(s, str(tmp_path), run_load=lambda e, d: False, analyze=fake_analyze({"fast": 12.5}))
    write_history(s, str(tmp_path), outcome)
    got = cases(tmp_path / "junit.xml")
    assert got == {
        "nightly.fast run": None,
        "nightly.fast slo: sojourn_ms.p99 < 250": None,
        "nightly.fast slo: sojourn_ms.p99 < 5": "sojourn_ms.p99 < 5 failed: measured 12.5",
    }
    assert outcome.failed
    nightly = json.loads(next((tmp_path / "runs").glob("*-fast")).joinpath("nightly.json").read_text())
    assert [r["passed"] for r in nightly["slo"]] == [True, False]


def test_a_scenario_that_fails_does_not_stop_the_next(tmp_path):
    s = suite(SuiteEntry("broken", "x", (), ()), SuiteEntry("ok", "x", (), ("sojourn_ms.p99 < 250",)))
    outcome = run_suite(
        s, str(tmp_path), run_load=lambda e, d: False, analyze=fake_analyze({"broken": None, "ok": 3.0})
    )
    got = {f"{c.classname} {c.name}": c.failure for c in outcome.cases}
    assert got == {
        "nightly.broken run": "RuntimeError: no traces",
        "nightly.ok run": None,
        "nightly.ok slo: sojourn_ms.p99 < 250": None,
    }


def test_a_regression_against_earlier_nights_fails_the_night_and_shows_in_history(tmp_path):
    s = suite(SuiteEntry("q", "x", (), ()))
    runs = tmp_path / "runs"
    for night, p99 in enumerate((10.0, 10.0, 10.0), start=1):  # three earlier nights
        d = runs / f"2026010{night}T000000Z-q"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(fake_summary("q", night, p99)))
    outcome = run_suite(s, str(tmp_path), run_load=lambda e, d: False, analyze=fake_analyze({"q": 30.0}, clock=[100]))
    write_history(s, str(tmp_path), outcome)
    assert outcome.regressions == ["q: sojourn_ms.p99"]
    assert cases(tmp_path / "junit.xml")["nightly.q regression: sojourn_ms.p99"].startswith(
        "sojourn_ms.p99 = 30, baseline 10"
    )
    history = json.loads((tmp_path / "history.json").read_text())
    assert [r["regressions"] for r in history["runs"]] == [[], [], [], ["sojourn_ms.p99"]]
    assert "runs/20260101T000000Z-q/report.html" in (tmp_path / "index.html").read_text()


def test_retention_keeps_the_newest_run_directories_only(tmp_path):
    for name in ("20260101T000000Z-a", "20260102T000000Z-a", "20260103T000000Z-b", "notes"):
        (tmp_path / name).mkdir()
    deleted = prune_runs(str(tmp_path), keep=2)
    assert [os.path.basename(p) for p in deleted] == ["20260101T000000Z-a"]
    assert sorted(os.listdir(tmp_path)) == ["20260102T000000Z-a", "20260103T000000Z-b", "notes"]


def printed_run(s: Suite, tmp_path, analyze) -> list[str]:
    """Everything the night prints, in order: the load's and the analysis's own markers, progress
    (`say`) and each entry's verdict (`show`), one list element per line."""
    lines: list[str] = []

    def run_load(entry, run_dir):
        lines.append(f"<load {entry.name}>")
        return False

    def analyzed(run_dir):
        summary = analyze(run_dir)
        lines.append(f"<summary {os.path.basename(run_dir).split('-', 1)[1]}>")
        return summary

    def record(text: str) -> None:
        lines.extend(text.splitlines())

    run_suite(s, str(tmp_path), run_load=run_load, analyze=analyzed, say=record, show=record)
    return lines


def between(lines: list[str], start: str, next_entry: str | None) -> list[str]:
    """The lines after `start` up to the next entry's first line (its progress line `... -> RUN_DIR`)."""
    i = lines.index(start)
    ends = [j for j, line in enumerate(lines) if j > i and line.startswith(f"nightly nightly: {next_entry} -> ")]
    return lines[i + 1 : ends[0] if next_entry else len(lines)]


def test_an_entrys_failing_slo_is_printed_with_metric_value_and_bound_before_the_next_entry_starts(tmp_path):
    s = suite(
        SuiteEntry("fast", "x", (), ("sojourn_ms.p99 < 250", "sojourn_ms.p99 < 5")),
        SuiteEntry("ok", "x", (), ("sojourn_ms.p99 < 250",)),
    )
    lines = printed_run(s, tmp_path, fake_analyze({"fast": 12.5, "ok": 3.0}))
    fast = between(lines, "<summary fast>", "ok")
    assert fast[0] == "nightly nightly: fast: FAIL, 1 of 2 SLOs failed"
    assert fast[1] == "  FAIL SLO sojourn_ms.p99 = 12.5, bound < 5"  # 12.5 measured, 5 the bound
    assert not any("250" in line for line in fast)  # the SLO that passed is not a failure line
    ok = between(lines, "<summary ok>", None)
    assert ok == ["nightly nightly: ok: PASS, all 1 SLO passed, no baseline yet (the entry's first run)"]


def test_a_failing_scenario_slo_and_a_metric_with_no_value_are_printed_too(tmp_path):
    s = suite(SuiteEntry("e", "x", (), ("latency_ms.end_to_end.p99 < 100",)))

    def analyze(run_dir):
        summary = fake_summary("e", 1, 40.0, slo=[{"expr": "sojourn_ms.p99 < 20", "value": 40.0, "passed": False}])
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(summary, f)
        return summary

    lines = printed_run(s, tmp_path, analyze)
    assert between(lines, "<summary e>", None) == [
        "nightly nightly: e: FAIL, 2 of 2 SLOs failed",
        "  FAIL SLO sojourn_ms.p99 = 40, bound < 20",
        "  FAIL SLO latency_ms.end_to_end.p99 has no numeric value in the summary, bound < 100",
    ]


def test_a_regression_is_printed_with_its_baseline_when_its_entry_finishes(tmp_path):
    s = suite(SuiteEntry("q", "x", (), ()), SuiteEntry("r", "x", (), ()))
    for night in (1, 2, 3):  # three earlier nights of q at p99 10 ms: the baseline (window 3) is 10
        d = tmp_path / "runs" / f"2026010{night}T000000Z-q"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(fake_summary("q", night, 10.0)))
    lines = printed_run(s, tmp_path, fake_analyze({"q": 30.0, "r": 1.0}, clock=[100]))
    assert between(lines, "<summary q>", "r") == [
        "nightly nightly: q: FAIL, 1 regression",
        "  FAIL regression sojourn_ms.p99 = 30, baseline 10 (median of the last 3 runs), tolerance 20%",
    ]


def test_a_run_that_did_not_finish_is_printed_as_failed_where_it_happened(tmp_path):
    s = suite(SuiteEntry("broken", "x", (), ("sojourn_ms.p99 < 250",)), SuiteEntry("ok", "x", (), ()))
    lines = printed_run(s, tmp_path, fake_analyze({"broken": None, "ok": 3.0}))
    assert between(lines, "<load broken>", "ok")[-1] == (
        "nightly nightly: broken: FAIL, the run did not finish: RuntimeError: no traces (no SLO checked)"
    )


def test_a_stop_during_an_entrys_load_analyses_what_it_captured_and_starts_nothing_after(tmp_path):
    """SIGTERM in the second entry's load (run_locust stops it and says so): that entry's captured
    part is analysed, its case fails as interrupted, the third entry never starts."""
    s = suite(SuiteEntry("one", "x", (), ()), SuiteEntry("two", "x", (), ()), SuiteEntry("three", "x", (), ()))
    loaded, analysed = [], []

    def run_load(entry, run_dir: str) -> bool:
        loaded.append(entry.name)
        with open(os.path.join(run_dir, "run.json"), "w") as f:
            json.dump({"status": "interrupted" if entry.name == "two" else "completed"}, f)
        return entry.name == "two"

    def analyze(run_dir: str) -> dict:
        analysed.append(os.path.basename(run_dir).split("-", 1)[1])
        return fake_summary(analysed[-1], len(analysed), 5.0)

    outcome = run_suite(s, str(tmp_path), run_load=run_load, analyze=analyze)
    assert loaded == ["one", "two"] and analysed == ["one", "two"]
    assert outcome.interrupted
    assert [(c.classname, c.name, c.failure) for c in outcome.cases if c.failure] == [
        ("nightly.two", "run", "interrupted")
    ]


def test_a_stop_while_analysing_ends_the_suite_with_the_entry_interrupted(tmp_path):
    s = suite(SuiteEntry("one", "x", (), ()), SuiteEntry("two", "x", (), ()))

    def analyze(run_dir: str) -> dict:
        raise KeyboardInterrupt  # stopping.stop_on_signals turns SIGTERM into this

    outcome = run_suite(s, str(tmp_path), run_load=lambda e, d: False, analyze=analyze)
    assert outcome.interrupted
    assert [(c.name, c.failure) for c in outcome.cases] == [("run", "interrupted")]
    assert len(outcome.run_dirs) == 1  # the second entry never started
