"""benchmarks.actions: each action's Spark tasks are charged to the line that asked for it."""

from __future__ import annotations

import collections

from benchmarks.actions import task_times, timing


def test_the_tasks_of_an_action_are_charged_to_its_caller_and_the_description_is_cleared(classic_spark):
    spark = classic_spark
    actions: dict[str, list[float]] = collections.defaultdict(list)
    undo = timing(actions, caller=lambda: "here:1")
    try:
        # a shuffle: one stage reads, one aggregates; both carry the description
        rows = spark.range(200_000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    finally:
        undo()
    assert sorted(r["count"] for r in rows) == sorted(len(range(k, 200_000, 7)) for k in range(7))
    assert len(actions["here:1"]) == 1 and actions["here:1"][0] > 0
    work, stages = task_times(spark)
    run_s, cpu_s = work["here:1"]
    assert run_s > 0 and cpu_s > 0
    assert stages >= 1
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None  # later jobs are not charged here
