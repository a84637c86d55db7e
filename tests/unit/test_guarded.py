"""The guard of the run's long-lived greenlets (loadgen.run.guarded) and what the Locust glue does with
a fault, tested in a child pytest: importing loadgen.run.locust_session imports locust, which
monkey-patches the whole process with gevent (threads among them), which must not happen inside
the main test process (a later test's threads then block for ever). The tests are in
guarded_checks.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_the_guard_and_the_locust_glue_end_the_run_on_a_fault():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / "guarded_checks.py")],
        cwd=HERE.parents[1],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
