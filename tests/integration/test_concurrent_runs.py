"""Two `sojourn run --processes 2` at once on one machine: each run's workers join their own run.

Locust's master listens for its workers on port 5557 unless told otherwise; a second run with
worker processes then failed to start, or a worker joined the other run's master."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.integration.conftest import BIN, REPO, write_scenario
from tests.integration.traces import independent_outcomes, published_on_schedule, read_rows

RATE, SECONDS = 50, 2


def _start(tmp_path: Path, name: str) -> tuple[subprocess.Popen, Path]:
    scenario = write_scenario(
        tmp_path / f"{name}.yaml",
        f"""
name: it-{name}
queue: {{name: sojourn.it.{name}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {SECONDS}, drain_timeout_s: 20}}
producers: [{{name: p, rate: {RATE}, arrival: constant, confirms: true}}]
consumers: [{{name: c, prefetch: 10}}]
""",
    )
    run_dir = tmp_path / name
    proc = subprocess.Popen(
        [str(BIN / "sojourn"), "run", scenario, "--out", str(run_dir), "--processes", "2", "--no-analyze"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, run_dir


def test_two_runs_with_worker_processes_at_once_each_publish_and_account_for_their_own(tmp_path):
    started = [_start(tmp_path, name) for name in ("concurrent-a", "concurrent-b")]
    for proc, run_dir in started:
        _out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        outcomes = independent_outcomes(run_dir)
        # the schedule's own count, a constant rate over the run; all acked
        assert published_on_schedule(read_rows(run_dir, "publish"), RATE, SECONDS) == len(outcomes["published"])
        assert outcomes["acked"] == outcomes["published"] and not outcomes["left"]
        # both worker processes of this run took part, and no one else's
        workers = {r["worker"] for kind in ("publish", "delivery") for r in read_rows(run_dir, kind)}
        assert len(workers) == 2
    names = [{r["worker"] for r in read_rows(d, "publish")} for _p, d in started]
    assert not names[0] & names[1]
