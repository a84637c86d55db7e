"""Progress lines for a long analysis: each stage says how long it took, and while it runs
longer than HEARTBEAT_S, how long so far and how many tasks of the running Spark stages are done."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["HEARTBEAT_S", "Progress", "stage"]

HEARTBEAT_S = 10.0
"""A stage that runs longer than this reports its progress every HEARTBEAT_S seconds."""

Progress = Callable[[str], None]


@contextlib.contextmanager
def stage(say: Progress, name: str, spark: SparkSession | None = None, every: float = HEARTBEAT_S) -> Iterator[None]:
    """Report `name` with its time when it ends; while it runs longer than `every` seconds, report
    every `every` seconds how long so far and (with `spark`) the tasks of the stages running."""
    started = time.monotonic()
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(every):
            say(f"{name}: {time.monotonic() - started:,.0f} s so far{_tasks(spark)}")

    thread = threading.Thread(target=heartbeat, name="sojourn-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
    say(f"{name}: {time.monotonic() - started:,.1f} s")


def _tasks(spark: SparkSession | None) -> str:
    if spark is None:
        return ""
    try:
        tracker = spark.sparkContext.statusTracker()
        infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
        done = sum(i.numCompletedTasks for i in infos if i is not None)
        total = sum(i.numTasks for i in infos if i is not None)
    except Exception:  # noqa: BLE001 - progress is best effort: a closing session says nothing
        return ""
    return f" ({done:,} of {total:,} tasks of the running Spark stages done)" if total else ""
