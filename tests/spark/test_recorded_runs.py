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
from tests.summaries import recorded_differences

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
# additive changes since the recording (docs/summary.md)
ADDED_KEYS = {"percentiles", "outcomes", "single_active_consumer", "stream"}
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
