"""How many Spark actions the analysis takes (every collect, toArrow, count, first, take and eager
checkpoint of a DataFrame, counted by benchmarks.actions.timing as the job calls them): a plain run
at most PLAIN_RUN_ACTIONS, and each optional feature at most one more (issue 47's plan: one grouping
by message id, one cube of the deliveries (the slow consumers' outstanding counts among its groupings),
one of the publishes, the deliveries of the notable ids, the ack-to-delivery pairs)."""

from __future__ import annotations

import collections
import shutil
from pathlib import Path

import pytest

from analysis.job import analyze
from benchmarks.actions import timing

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"

PLAIN_RUN_ACTIONS = 5

FEATURE_RUNS = {
    "quickstart": 0,  # none
    "priority-classes": 1,  # publish priorities
    "egress-discard": 2,  # egress classes; its publishes carry priorities
    "codel-slow-consumer": 1,  # CoDel
    "replay-burst": 2,  # trace replay; its file's rows carry priorities
}
"""Recorded runs and how many optional features each has on."""


def _actions(spark, run_dir: Path) -> dict[str, int]:
    """The analysis' Spark actions by the line of analysis/ that asked for them."""
    times: dict[str, list[float]] = collections.defaultdict(list)
    undo = timing(times)
    try:
        analyze(run_dir, spark=spark)
    finally:
        undo()
    return {where: len(calls) for where, calls in times.items()}


@pytest.mark.parametrize("scenario", sorted(FEATURE_RUNS))
def test_each_optional_feature_adds_at_most_one_action(scenario, classic_spark, tmp_path):
    # a Spark of this process: benchmarks.actions.timing wraps the classic DataFrame's actions, which a
    # Spark Connect session's frames would go around uncounted
    run_dir = tmp_path / scenario
    shutil.copytree(RUNS / scenario, run_dir)
    actions = _actions(classic_spark, run_dir)
    assert actions, "no action counted: the analysis's frames were not the ones timing wraps"
    assert sum(actions.values()) <= PLAIN_RUN_ACTIONS + FEATURE_RUNS[scenario], actions
