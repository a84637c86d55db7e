"""A benchmark's scratch directories (benchmarks.scratch) go when its process ends, however it ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import os, sys
from benchmarks.scratch import scratch_dir
path = scratch_dir("sojourn-test-scratch-")
os.makedirs(os.path.join(path, "traces", "delivery"))
open(os.path.join(path, "traces", "delivery", "part-0.parquet"), "w").write("rows")
print(path, flush=True)
if sys.argv[1] == "raise":
    raise RuntimeError("the trial failed")
"""


def _run(how: str, tmp_path: Path) -> tuple[int, Path]:
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, how], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    return out.returncode, Path(out.stdout.strip())


def test_a_trials_scratch_directory_is_gone_when_its_process_exits(tmp_path):
    code, path = _run("return", tmp_path)
    assert code == 0 and path.parent == tmp_path and path.name.startswith("sojourn-test-scratch-")
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_it_is_gone_when_the_trial_fails_too(tmp_path):
    code, path = _run("raise", tmp_path)
    assert code == 1 and path.parent == tmp_path
    assert not path.exists() and list(tmp_path.iterdir()) == []
