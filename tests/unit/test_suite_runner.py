"""The nightly orchestration on a fake load and analysis: JUnit cases, continuing past a
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
