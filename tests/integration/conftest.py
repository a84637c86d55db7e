"""Integration tests: real RabbitMQ on 127.0.0.1 (or SOJOURN_AMQP_URL), real Locust, real Spark."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _broker_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
        return True
    except OSError:
        return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def _require_broker():
    if not os.environ.get("SOJOURN_AMQP_URL") and not _broker_up():
        pytest.fail("RabbitMQ is not answering on 127.0.0.1:5672: run scripts/setup.sh "
                    "(or rabbitmq-server -detached) before the integration tests")


def sojourn(*args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the `sojourn` console script as a user would."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([str(BIN / "sojourn"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def write_scenario(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def run_together(base: Path, scenarios: dict[str, str], timeout: float = 180) -> dict[str, tuple[Path, str]]:
    """Run each scenario text (`sojourn run --no-analyze`) at once, one process each, into
    `base/<case>`; return case -> (run_dir, stderr). Every run must exit 0; a run left behind by a
    failed one is killed."""
    procs = {}
    try:
        for case, text in scenarios.items():
            path = write_scenario(base / f"{case}.yaml", text)
            procs[case] = subprocess.Popen(
                [str(BIN / "sojourn"), "run", path, "--out", str(base / case), "--no-analyze"],
                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out = {}
        for case, proc in procs.items():
            _, stderr = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"{case}: {stderr[-3000:]}"
            out[case] = (base / case, stderr)
        return out
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()


@pytest.fixture(scope="session")
def analyze_in_process():
    """analyze_in_process(run_dir) -> summary: the analysis on one Spark session shared by the
    tests that use it (each `sojourn run` with analysis starts a JVM of its own, ~15 s). The
    end-to-end tests of `sojourn run` and `sojourn analyze` keep the command-line path."""
    from analysis.job import analyze
    from analysis.session import get_spark

    session = get_spark("local[2]", app_name="sojourn-integration-tests")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield lambda run_dir: analyze(run_dir, spark=session)
    session.stop()
