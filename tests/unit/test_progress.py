"""The analysis's progress lines: a stage's time when it ends, and while it runs, how long so far."""

import re
import threading
import time
from types import SimpleNamespace

import pytest

from analysis.progress import stage


def _until_heard(said: list) -> None:
    """Inside a stage: wait (10 s at most) for its first heartbeat, due after `every`; a fixed sleep
    a little longer than `every` lost the race to a busy machine's scheduler now and then."""
    deadline = time.monotonic() + 10
    while not said:
        assert time.monotonic() < deadline, "no heartbeat in 10 s"
        time.sleep(0.01)


def test_a_quick_stage_says_only_how_long_it_took():
    said = []
    with stage(said.append, "reading traces", every=5.0):
        pass
    assert len(said) == 1 and re.fullmatch(r"reading traces: \d+\.\d s", said[0])


def test_a_long_stage_reports_how_long_so_far_while_it_runs():
    said = []
    lines_while_running = []
    with stage(said.append, "computing accounting", every=0.05):
        time.sleep(0.3)
        lines_while_running = list(said)
    assert len(lines_while_running) >= 2  # reported while the block still ran, not after it
    assert all(re.fullmatch(r"computing accounting: \d+ s so far", m) for m in lines_while_running)
    assert re.fullmatch(r"computing accounting: \d+\.\d s", said[-1])
    assert all(m.endswith(" s so far") for m in said[:-1])  # then only the stage's time
    assert not [t for t in threading.enumerate() if t.name == "sojourn-progress"]  # the reporter stopped


class _Tracker:
    """Spark's status tracker as seen by the progress line: two stages running."""

    def getActiveStageIds(self):
        return [3, 4]

    def getStageInfo(self, stage_id):
        running = {3: (5, 8), 4: (1, 16)}
        done, total = running[stage_id]
        return SimpleNamespace(numCompletedTasks=done, numTasks=total)


def test_the_heartbeat_counts_the_tasks_of_the_running_spark_stages():
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=_Tracker))
    said = []
    with stage(said.append, "computing slow consumers", spark, every=0.05):
        _until_heard(said)
    pattern = r"computing slow consumers: \d+ s so far \(6 of 24 tasks of the running Spark stages done\)"
    assert any(re.fullmatch(pattern, m) for m in said)


def test_a_closing_session_makes_the_heartbeat_say_less_not_fail():
    def broken():
        raise RuntimeError("SparkContext was shut down")

    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=broken))
    said = []
    with stage(said.append, "computing phases", spark, every=0.05):
        _until_heard(said)
    assert any(re.fullmatch(r"computing phases: \d+ s so far", m) for m in said)


def test_an_error_in_the_stage_stops_the_heartbeat_and_reaches_the_caller_untimed():
    said = []
    with pytest.raises(ValueError, match="bad trace"), stage(said.append, "reading traces", every=0.05):
        _until_heard(said)
        raise ValueError("bad trace")
    assert not [t for t in threading.enumerate() if t.name == "sojourn-progress"]
    assert said and all(m.endswith(" s so far") for m in said)  # no time is given for a stage that failed
