"""Batched Locust reporting, tested in a child pytest: importing locust monkey-patches the whole
process with gevent (sockets, threads, subprocess), which must not happen inside the main test
process, where the Spark tests launch a JVM afterwards. The tests are in locust_report_batching.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_batched_reports_match_locusts_own_statistics():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / "locust_report_batching.py")],
        cwd=HERE.parents[1],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
