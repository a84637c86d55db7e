"""`sojourn analyze --master spark://...` on a real Spark standalone cluster, through a Spark Connect
server whose master it is: a master and one worker started from the installed pyspark, on
loopback, give the same summary.json as the local analysis
(floating-point values to 1e-12 relative: a mean summed over other partitions rounds differently).

The run is the recorded quickstart (tests/data/runs): real traces of a shipped scenario.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, free_port, sojourn
from tests.summaries import differences

RECORDED = REPO / "tests" / "data" / "runs" / "quickstart"


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _wait_for(port: int, proc: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the Spark daemon exited ({proc.returncode}); its log:\n{log.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s; log:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """spark://127.0.0.1:PORT with one worker (1 core, 1 GiB), stopped at the end."""
    home, logs = _spark_home(), tmp_path_factory.mktemp("spark-cluster")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_WORKER_DIR": str(logs / "work"),
    }
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    spark_class = str(home / "bin" / "spark-class")
    procs = []
    master_log = logs / "master.log"
    with open(master_log, "wb") as out:
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
    try:
        _wait_for(port, procs[0], master_log)
        worker_log = logs / "worker.log"
        with open(worker_log, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        f"spark://127.0.0.1:{port}",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(worker_ui),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        _wait_for(worker_ui, procs[1], worker_log)
        deadline = time.monotonic() + 60
        while "Successfully registered with master" not in worker_log.read_text():
            if time.monotonic() > deadline:
                pytest.fail(f"the worker did not register; its log:\n{worker_log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _analysed(tmp_path: Path, name: str, *args: str) -> dict:
    run_dir = tmp_path / name
    shutil.copytree(RECORDED, run_dir)
    done = sojourn("analyze", str(run_dir), *args, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((run_dir / "summary.json").read_text())


def test_a_standalone_cluster_gives_the_local_summary(cluster, tmp_path):
    """`--master` analyses on a Spark Connect server of that master's (started for it, a client like
    any other), the local analysis on the local server."""
    try:
        on_cluster = _analysed(tmp_path, "cluster", "--master", cluster)
        status = sojourn("spark", "status", "--master", cluster)
        assert status.returncode == 0 and f"master:   {cluster}" in status.stdout
    finally:
        sojourn("spark", "down", "--master", cluster)  # it holds the worker's core while it is up
    local = _analysed(tmp_path, "local")
    # Counts, keys and strings exactly; a mean summed over other partitions may differ in its last bits.
    assert differences(local, on_cluster, rel=1e-12) == []
    assert on_cluster["run"] == local["run"] and on_cluster["messages"] == local["messages"]
    assert (
        on_cluster["messages"]["published"]
        == json.loads((RECORDED / "summary.before.json").read_text())["messages"]["published"]
    )
