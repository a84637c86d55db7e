"""Run directory names in RESULTS_DIR/runs and pruning the oldest beyond `keep_runs`."""

from __future__ import annotations

import os
import re
import shutil
import time

__all__ = ["run_dir_name", "prune_runs"]

_RUN_DIR = re.compile(r"^\d{8}T\d{6}Z-[A-Za-z0-9._-]+$")


def run_dir_name(entry_name: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{entry_name}"


def prune_runs(runs_dir: str, keep: int | None) -> list[str]:
    """Delete all but the newest `keep` run directories (by their UTC-stamped names); return the
    deleted paths. Anything not named like a run directory is left alone."""
    if keep is None or not os.path.isdir(runs_dir):
        return []
    names = sorted(n for n in os.listdir(runs_dir) if _RUN_DIR.match(n) and os.path.isdir(os.path.join(runs_dir, n)))
    doomed = [os.path.join(runs_dir, n) for n in names[: max(0, len(names) - keep)]]
    for path in doomed:
        shutil.rmtree(path)
    return doomed
