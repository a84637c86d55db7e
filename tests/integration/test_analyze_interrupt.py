"""Ctrl-C during `sojourn analyze`: one line and exit status 130, no Python or py4j traceback on the
terminal (py4j logs what it was doing to the JVM's log in the run directory), no JVM left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from tests.integration.conftest import REPO, analysis_interrupted

RECORDED = REPO / "tests" / "data" / "runs" / "quickstart"


def _left_in(session: int, wait_s: float = 10) -> list[str]:
    """The processes still in the command's session (its Spark JVM among them while it runs) once
    they have had `wait_s` to exit: the JVM exits when the Python process that started it has."""
    deadline = time.monotonic() + wait_s
    while True:
        left = subprocess.run(["pgrep", "-a", "-s", str(session)], capture_output=True, text=True).stdout.splitlines()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def test_ctrl_c_in_the_accounting_says_interrupted_and_exits_130_without_a_traceback(tmp_path):
    run_dir = tmp_path / "quickstart"
    shutil.copytree(RECORDED, run_dir)
    written = (run_dir / "summary.json").read_bytes()  # the recorded run's own

    def ctrl_c(proc) -> None:
        assert any("java" in p for p in _left_in(proc.pid, wait_s=0))  # the session holds the JVM
        time.sleep(0.3)  # inside the accounting's first queries: the driver waits on the JVM
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group

    # --no-server: the JVM in the command's own session (on the server: tests/integration/test_spark_server.py)
    ended = analysis_interrupted(run_dir, ctrl_c, "--no-server", timeout=60)
    stderr = ended.stderr
    assert ended.returncode == 130, stderr[-3000:]
    assert stderr.rstrip().endswith("sojourn: interrupted"), stderr[-3000:]
    assert "Traceback" not in stderr and "ERROR:root" not in stderr, stderr[-3000:]
    assert (run_dir / "summary.json").read_bytes() == written  # nothing half-written
    assert not _left_in(ended.pid)  # no JVM left
