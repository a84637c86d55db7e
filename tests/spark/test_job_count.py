"""How many Spark jobs the analysis of a plain run takes, read from Spark's own status tracker:
a change that adds a job to the plan fails here (issue 47 brings the count down to a handful;
PLAIN_RUN_JOBS is lowered as it goes, never raised without a reason in the commit)."""

from __future__ import annotations

import shutil
from pathlib import Path

from analysis.job import analyze

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"

PLAIN_RUN_JOBS = 5
"""Spark jobs of the recorded quickstart run (no CoDel, replay, proxy, priorities or egress) in the
tests' in-process session: every action and the jobs adaptive execution submits for its stages."""


def test_a_plain_run_takes_no_more_spark_jobs_than_the_plan_has(classic_spark, tmp_path):
    spark = classic_spark
    run_dir = tmp_path / "quickstart"
    shutil.copytree(RUNS / "quickstart", run_dir)
    analyze(run_dir, spark=spark)  # compiled and cached once: the count below is of a warm session
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    analyze(run_dir, spark=spark)
    jobs = set(tracker.getJobIdsForGroup(None)) - before
    assert len(jobs) <= PLAIN_RUN_JOBS, f"{len(jobs)} Spark jobs"
