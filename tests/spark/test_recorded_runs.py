"""The analysis of every shipped scenario's recorded run gives the summary it gave before the job
was restructured for one pass (tests/data/runs/README.md says how the runs were recorded).

Each directory under tests/data/runs holds a run of one scenario (run.json and its traces, each
kind compacted into one part file) and `summary.before.json`, the summary the analysis as it
was before the restructuring wrote for those very traces. Only additive keys may differ
(docs/summary.md lists them); floating-point values may differ in the last bits, since a mean
summed in another order rounds differently.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis import job
from analysis.job import analyze
from tests.summaries import recorded_differences

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
ADDED_KEYS = {"percentiles"}  # additive changes since the recording (docs/summary.md)
SCENARIOS = sorted(p.name for p in RUNS.iterdir() if (p / "summary.before.json").is_file())


def test_every_shipped_scenario_has_a_recorded_run():
    shipped = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))
    assert shipped == SCENARIOS


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_summary_keeps_its_numbers(scenario, spark, tmp_path):
    run_dir = tmp_path / scenario
    shutil.copytree(RUNS / scenario, run_dir)
    before = json.loads((run_dir / "summary.before.json").read_text())
    after = analyze(run_dir, spark=spark)
    assert set(after) - set(before) <= ADDED_KEYS
    assert recorded_differences(before, after) == []


PERCENTILE_KEYS = {"p50", "p95", "p99", "processing_p99_ms", "codel_interval_ms", "codel_interval_why", "ms"}
"""Summary keys whose values come from percentiles (`ms`: a consumer's sojourn quantiles)."""


def _apart_from_percentiles(exact, approx, path=""):
    """The paths at which `approx` differs from `exact` other than in PERCENTILE_KEYS (floats: beyond
    a relative 1e-12, a mean summed in another order)."""
    if type(exact) is not type(approx):
        return [f"{path}: {exact!r} ({type(exact).__name__}) != {approx!r} ({type(approx).__name__})"]
    if isinstance(exact, dict):
        if set(exact) != set(approx):
            return [f"{path}: keys {sorted(set(exact) ^ set(approx))} in one only"]
        return [
            d
            for k, v in exact.items()
            if k not in PERCENTILE_KEYS
            for d in _apart_from_percentiles(v, approx.get(k), f"{path}.{k}")
        ]
    if isinstance(exact, list) and isinstance(approx, list) and len(exact) == len(approx):
        return [d for i, (e, a) in enumerate(zip(exact, approx)) for d in _apart_from_percentiles(e, a, f"{path}[{i}]")]
    if isinstance(exact, float) and isinstance(approx, float) and approx == pytest.approx(exact, rel=1e-12):
        return []
    return [] if exact == approx else [f"{path}: {exact!r} != {approx!r}"]


def test_approximate_percentiles_keep_every_other_number(spark, tmp_path):
    """The overall, per-consumer, per-phase and queueing-model statistics roll up from the deliveries'
    cube whatever the policy (summary.deliveries); with approximate percentiles for the rest (the
    ack-to-delivery round trip among them) every number but the percentiles is the exact analysis's,
    and each consumer's sojourn percentiles lie between the quantiles next to them."""
    for how in ("exact", "approximate"):
        shutil.copytree(RUNS / "quickstart", tmp_path / how)
    exact = analyze(tmp_path / "exact", spark=spark, percentiles="exact")
    approx = analyze(tmp_path / "approximate", spark=spark, percentiles="approximate")
    assert approx["percentiles"]["method"] == "approximate"
    blocks = ("throughput", "sojourn_ms", "latency_ms", "consumers", "model", "phases")
    assert _apart_from_percentiles({b: exact[b] for b in blocks}, {b: approx[b] for b in blocks}) == []
    assert len(approx["consumers"]) == 2 and len(approx["model"]["phases"]) == 4
    for a, e in zip(approx["consumers"], exact["consumers"], strict=True):
        q = dict(zip(e["sojourn_quantiles_ms"]["q"], e["sojourn_quantiles_ms"]["ms"], strict=True))
        assert q[0.45] <= a["sojourn_ms"]["p50"] <= q[0.55]
        assert q[0.9] <= a["sojourn_ms"]["p95"] <= q[1.0] and q[0.95] <= a["sojourn_ms"]["p99"] <= q[1.0]
        assert a["sojourn_quantiles_ms"]["ms"][-1] == e["sojourn_ms"]["max"]
    for a, e in zip(approx["model"]["phases"], exact["model"]["phases"], strict=True):
        # a value of the group's own within the rank error: a rank or so from the interpolated one here
        assert a["processing_p99_ms"] == pytest.approx(e["processing_p99_ms"], rel=0.02)


def test_approximate_codel_rows_keep_every_other_number(spark, tmp_path, monkeypatch):
    """With approximate percentiles and the large runs' plan (the deliveries of the ledger's ids from
    the trace), every number of the CoDel block but its percentiles is the exact analysis's."""
    monkeypatch.setattr(job, "TRUNCATE_PLAN_ROWS", 0)
    for how in ("exact", "approximate"):
        shutil.copytree(RUNS / "codel-slow-consumer", tmp_path / how)
    exact = analyze(tmp_path / "exact", spark=spark, percentiles="exact")
    approx = analyze(tmp_path / "approximate", spark=spark, percentiles="approximate")
    assert [c["codel_on"] for c in exact["codel"]["consumers"]].count(True) >= 1
    assert all(c["sojourn_after_ms"]["count"] > 0 for c in exact["codel"]["consumers"] if c["nacks"])
    assert _apart_from_percentiles(exact["codel"], approx["codel"]) == []


CACHE_SCENARIOS = ("codel-slow-consumer", "consumer-crash", "egress-discard", "priority-classes", "quickstart")
"""Runs whose blocks read the deliveries' ids (CoDel's hand-offs, churn, priorities) or a coded column
each of the others lacks (egress_class)."""


@pytest.mark.parametrize("scenario", CACHE_SCENARIOS)
def test_the_cached_plan_keeps_the_numbers(scenario, spark, tmp_path, monkeypatch):
    """The plan of large runs (the deliveries cached with their strings as codes and without their
    ids, which churn and CoDel read from the trace) gives the numbers of the small runs' plan."""
    monkeypatch.setattr(job, "TRUNCATE_PLAN_ROWS", 0)  # every run takes the large runs' plan
    run_dir = tmp_path / scenario
    shutil.copytree(RUNS / scenario, run_dir)
    before = json.loads((run_dir / "summary.before.json").read_text())
    after = analyze(run_dir, spark=spark)
    assert recorded_differences(before, after) == []
