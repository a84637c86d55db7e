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

from analysis.job import analyze
from tests.summaries import differences

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
    assert differences(before, after) == []


def test_approximate_percentiles_keep_every_count_mean_and_extreme(spark, tmp_path):
    """With approximate percentiles the overall and per-consumer statistics are rolled up from one
    sketch per consumer and phase (transforms.utilisation.consumer_partials): everything but the
    percentiles is the exact analysis's, and each consumer's sojourn percentiles lie between the
    exact quantiles next to them."""
    run_dir = tmp_path / "quickstart"
    shutil.copytree(RUNS / "quickstart", run_dir)
    exact = json.loads((run_dir / "summary.before.json").read_text())
    approx = analyze(run_dir, spark=spark, percentiles="approximate")
    assert approx["percentiles"]["method"] == "approximate"
    assert approx["throughput"] == exact["throughput"]

    def same_but_percentiles(a, e):
        assert (a["count"], a["max"]) == (e["count"], e["max"]) and a["count"] > 0
        assert a["mean"] == pytest.approx(e["mean"], rel=1e-12)
        assert a["p50"] <= a["p95"] <= a["p99"] <= a["max"]

    same_but_percentiles(approx["sojourn_ms"], exact["sojourn_ms"])
    for name in ("end_to_end", "broker_network", "processing", "ack_delay"):
        same_but_percentiles(approx["latency_ms"][name], exact["latency_ms"][name])
    assert [c["consumer"] for c in approx["consumers"]] == [c["consumer"] for c in exact["consumers"]]
    for a, e in zip(approx["consumers"], exact["consumers"], strict=True):
        assert (a["group"], a["delivered"], a["acked"]) == (e["group"], e["delivered"], e["acked"])
        assert a["utilisation"] == pytest.approx(e["utilisation"], rel=1e-12)
        same_but_percentiles(a["sojourn_ms"], e["sojourn_ms"])
        same_but_percentiles(a["latency_ms"]["end_to_end"], e["latency_ms"]["end_to_end"])
        q = dict(zip(e["sojourn_quantiles_ms"]["q"], e["sojourn_quantiles_ms"]["ms"], strict=True))
        assert q[0.45] <= a["sojourn_ms"]["p50"] <= q[0.55]
        assert q[0.9] <= a["sojourn_ms"]["p95"] <= q[1.0] and q[0.95] <= a["sojourn_ms"]["p99"] <= q[1.0]
        assert a["sojourn_quantiles_ms"]["ms"][-1] == e["sojourn_ms"]["max"]
