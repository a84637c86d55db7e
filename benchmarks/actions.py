"""`python -m benchmarks.actions RUN_DIR`: where one analysis spends its time, by Spark action.

Every `collect`, `first`, `count`, `take` and eager checkpoint the job runs is timed and charged to
the line of `analysis/` that asked for it; the table lists them slowest first, with the load
average before and after. Blocks that run side by side (analysis.concurrent) share the cores:
their times overlap and add up to more than the wall time. One run, in one process: it says where
the time goes, not whether a change helped (for that, pair two commands with `farm-bench --vs`,
docs/benchmarks.md).

    python -m benchmarks.actions /tmp/runs/10M --percentiles approximate
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

ACTIONS = ("collect", "first", "count", "take", "localCheckpoint")


def _caller() -> str:
    """The innermost frame in analysis/ that led to the action, as path:line."""
    root = str(Path(__file__).resolve().parent.parent / "analysis")
    for frame in reversed(traceback.extract_stack()[:-2]):
        if frame.filename.startswith(root):
            return f"{os.path.relpath(frame.filename, Path(root).parent)}:{frame.lineno}"
    return "elsewhere"


def timing(actions: dict[str, list[float]]) -> Callable[[], None]:
    """Wrap the DataFrame actions so each adds its time under its caller; returns the undo."""
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
            where, started = _caller(), time.monotonic()
            inside.depth = 1
            try:
                return original(self, *args, **kwargs)
            finally:
                inside.depth = 0
                actions[where].append(time.monotonic() - started)

        return action

    for name, original in originals.items():
        setattr(DataFrame, name, timed(original))
    return lambda: [setattr(DataFrame, name, original) for name, original in originals.items()]


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.actions", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--percentiles", default="auto", choices=("auto", "exact", "approximate"))
    args = parser.parse_args(argv)

    from analysis.job import analyze

    actions: dict[str, list[float]] = collections.defaultdict(list)
    load_before, started = _loadavg(), time.monotonic()
    undo = timing(actions)
    try:
        analyze(args.run_dir, percentiles=args.percentiles, progress=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        undo()
    wall = time.monotonic() - started
    print(f"{args.run_dir}: {wall:,.1f} s wall; load {load_before} before, {_loadavg()} after")
    print(f"{'seconds':>8}  {'calls':>5}  where")
    for where, times in sorted(actions.items(), key=lambda kv: -sum(kv[1])):
        print(f"{sum(times):8.1f}  {len(times):5d}  {where}")
    print(f"{sum(map(sum, actions.values())):8.1f}         in actions, of {wall:,.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
