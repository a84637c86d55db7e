"""analysis.session.sibling and moved: the job runs blocks beside its accounting in a session of their
own, whose settings the accounting's session-wide changes must not reach, over the same cached frames."""

import pytest
from pyspark.sql import functions as F

from analysis.session import moved, sibling

pytestmark = pytest.mark.spark

PARTITIONS = "spark.sql.shuffle.partitions"


def _physical_plan(frame) -> str:
    """The physical plan's text (with adaptive execution, its initial plan)."""
    return frame._jdf.queryExecution().executedPlan().toString()


def test_a_sibling_keeps_the_settings_it_was_made_with(spark):
    before = spark.conf.get(PARTITIONS)
    spark.conf.set(PARTITIONS, "7")
    try:
        side = sibling(spark)
        spark.conf.set(PARTITIONS, "3")  # as the job's _setting does while the sibling's blocks run
        assert side.conf.get(PARTITIONS) == "7"
        grouped = spark.range(0, 100, 1, 4).groupBy((F.col("id") % 10).alias("k")).count()
        there = moved(grouped, side)
        assert there.sparkSession is side
        assert "hashpartitioning(" in _physical_plan(there) and ", 7)" in _physical_plan(there)
        assert ", 3)" in _physical_plan(grouped)
        assert sorted(there.collect()) == sorted(grouped.collect()) == [(k, 10) for k in range(10)]
    finally:
        spark.conf.set(PARTITIONS, before)


def test_a_moved_frame_reads_the_data_its_session_cached(spark, frame):
    events = frame("event", {"kind": "phase", "ts_ns": 1}, {"kind": "queue_sample", "ts_ns": 2}).persist()
    try:
        events.count()
        there = moved(events.where(F.col("kind") == "phase"), sibling(spark))
        assert "InMemoryTableScan" in _physical_plan(there)
        assert [r.ts_ns for r in there.collect()] == [1]
    finally:
        events.unpersist()
