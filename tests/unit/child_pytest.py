"""Tests that import locust run in a child pytest: importing locust monkey-patches the whole process
with gevent (sockets, threads, subprocess), which must not happen inside the main test process
(a later test's threads block for ever, and the Spark tests launch a JVM afterwards)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def passes_in_a_child(name: str) -> None:
    """Run tests/unit/`name` in a child pytest; every test there passes."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / name)],
        cwd=HERE.parents[1],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
