"""`python -m benchmarks.actions RUN_DIR`: where one analysis spends its time, by Spark action.

Every `collect`, `first`, `count`, `take` and eager checkpoint the job runs is timed and charged to
the line of `analysis/` that asked for it; the table lists them slowest first, with the load
average before and after. Blocks that run side by side (analysis.concurrent) share the cores:
their wall times overlap and add up to more than the wall time, and a small query waits behind the
other block's tasks. So each line also gets the work of its Spark tasks, summed over the cores:
their run time and CPU time (each action's jobs carry its line as their description, which the
stages adaptive execution submits from other threads inherit; read from Spark's status store at
the end). One run, in one process: it says where the time goes, not whether a change helped (for
that, pair two commands with `farm-bench --vs`, docs/benchmarks.md).

"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ACTIONS = ("collect", "first", "count", "take", "toArrow", "localCheckpoint")


def _caller() -> str:
    """The innermost frame in analysis/ that led to the action, as path:line."""
    root = str(Path(__file__).resolve().parent.parent / "analysis")
    for frame in reversed(traceback.extract_stack()[:-2]):
        if frame.filename.startswith(root):
            return f"{os.path.relpath(frame.filename, Path(root).parent)}:{frame.lineno}"
    return "elsewhere"


_DESCRIPTION = "spark.job.description"


def timing(actions: dict[str, list[float]], caller: Callable[[], str] | None = None) -> Callable[[], None]:
    """Wrap the DataFrame actions so each adds its time under its caller (`caller()`: by default the
    line of analysis/ that asked), and its Spark jobs carry the caller as their description; returns
    the undo."""
    where_from = caller or _caller
    from pyspark.sql.classic.dataframe import DataFrame  # the class a local session's frames are

    originals = {name: getattr(DataFrame, name) for name in ACTIONS}
    # An action inside another (first calls take, take calls collect) is the outer one's; the job runs
    # blocks side by side (analysis.concurrent), so the count is each thread's own.
    inside = threading.local()

    def timed(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def action(self: DataFrame, *args: Any, **kwargs: Any) -> Any:
            if getattr(inside, "depth", 0):
                return original(self, *args, **kwargs)
            where, started = where_from(), time.monotonic()
            context = self.sparkSession.sparkContext
            previous = context.getLocalProperty(_DESCRIPTION)
            context.setLocalProperty(_DESCRIPTION, where)
            inside.depth = 1
            try:
                return original(self, *args, **kwargs)
            finally:
                inside.depth = 0
                context.setLocalProperty(_DESCRIPTION, previous)  # type: ignore[arg-type]  # None unsets it
                actions[where].append(time.monotonic() - started)

        return action

    for name, original in originals.items():
        setattr(DataFrame, name, timed(original))
    return lambda: [setattr(DataFrame, name, original) for name, original in originals.items()]


def _stages(spark: Any) -> Any:
    """The stages Spark's status store keeps (a Scala Seq of StageData). The store is not public API
    (AppStatusStore, reached through py4j); it keeps the last `spark.ui.retainedStages` stages (1,000
    by default)."""
    context = spark.sparkContext
    gateway = context._gateway
    return context._jsc.sc().statusStore().stageList(None, False, False, gateway.new_array(gateway.jvm.double, 0), None)


def task_times(spark: Any) -> tuple[dict[str, tuple[float, float]], int]:
    """Per job description: the summed run time and CPU time (s) of its stages' tasks, and the number
    of stages read (_stages)."""
    stages = _stages(spark)
    work: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for i in range(stages.length()):
        stage = stages.apply(i)
        description = stage.description()
        where = description.get() if description.isDefined() else "elsewhere"
        work[where][0] += stage.executorRunTime() / 1e3  # ms
        work[where][1] += stage.executorCpuTime() / 1e9  # ns
    return {where: (run, cpu) for where, (run, cpu) in work.items()}, stages.length()


def heaviest_stages(spark: Any, count: int) -> list[str]:
    """The `count` stages whose tasks ran longest, a line each: run and CPU time (s), tasks, the
    Parquet and shuffle bytes read and written (MB), and the line of analysis/ its job came from."""
    stages = _stages(spark)
    rows = []
    for i in range(stages.length()):
        stage = stages.apply(i)
        description = stage.description()
        rows.append(
            (
                stage.executorRunTime() / 1e3,
                stage.executorCpuTime() / 1e9,
                stage.numTasks(),
                stage.inputBytes() / 1e6,
                stage.shuffleReadBytes() / 1e6,
                stage.shuffleWriteBytes() / 1e6,
                stage.stageId(),
                description.get() if description.isDefined() else "elsewhere",
            )
        )
    lines = [f"{'task s':>7}  {'cpu s':>7}  {'tasks':>5}  {'in MB':>7}  {'shuf in':>7}  {'shuf out':>8}  stage  where"]
    for run, cpu, tasks, read, shuffled_in, shuffled_out, stage_id, where in sorted(rows, reverse=True)[:count]:
        work = f"{run:7.1f}  {cpu:7.1f}  {tasks:5d}"
        lines.append(f"{work}  {read:7.0f}  {shuffled_in:7.0f}  {shuffled_out:8.0f}  {stage_id:5d}  {where}")
    return lines


def loadavg() -> str:
    """The 1-, 5- and 15-minute load averages as /proc/loadavg gives them ("unknown" without it)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.actions", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--stages", type=int, default=0, metavar="N", help="also list the N heaviest Spark stages")
    args = parser.parse_args(argv)

    import analysis.session
    from analysis.job import analyze

    stop_spark = analysis.session.stop_spark
    sessions: list[Any] = []
    analysis.session.stop_spark = sessions.append  # analyze stops the session it started: read it first
    actions: dict[str, list[float]] = collections.defaultdict(list)
    load_before, started = loadavg(), time.monotonic()
    undo = timing(actions)
    try:
        analyze(args.run_dir, progress=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        undo()
        analysis.session.stop_spark = stop_spark
    wall = time.monotonic() - started
    work, stages = task_times(sessions[0]) if sessions else ({}, 0)
    heaviest = heaviest_stages(sessions[0], args.stages) if sessions and args.stages else []
    for spark in sessions:
        stop_spark(spark)
    total_run, total_cpu = sum(r for r, _ in work.values()), sum(c for _, c in work.values())
    print(f"{args.run_dir}: {wall:,.1f} s wall; load {load_before} before, {loadavg()} after")
    print("seconds: the action's wall time; task s, cpu s: its Spark tasks' run and CPU time over all cores")
    print(f"{'seconds':>8}  {'task s':>7}  {'cpu s':>7}  {'calls':>5}  where")
    for where, times in sorted(actions.items(), key=lambda kv: -sum(kv[1])):
        run, cpu = work.pop(where, (0.0, 0.0))
        print(f"{sum(times):8.1f}  {run:7.1f}  {cpu:7.1f}  {len(times):5d}  {where}")
    for where, (run, cpu) in work.items():  # jobs no timed action asked for
        print(f"{'':8}  {run:7.1f}  {cpu:7.1f}  {'':5}  {where}")
    in_actions = sum(map(sum, actions.values()))
    print(f"{in_actions:8.1f}  {total_run:7.1f}  {total_cpu:7.1f}         in all, of {wall:,.1f} s wall")
    print(f"({stages} stages read from Spark's status store)")
    for line in heaviest:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
