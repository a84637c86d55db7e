"""The warm local Spark server (`sojourn spark up|status|down`, analysis.server) and the analysis on it.

Each test that starts, stops or kills a server has a server directory and port of its own (not the
test session's shared server) and stops what it started; the token's test asks the shared one. The
analyses are of the recorded quickstart run, whose summary before the job's restructuring is known
(tests/data/runs/README.md): the server's analysis must give it too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadgen.broker.local import free_loopback_port
from tests.integration.conftest import REPO, analysis_interrupted, sojourn
from tests.summaries import recorded_differences

RECORDED = REPO / "tests" / "data" / "runs" / "quickstart"


@pytest.fixture
def own_server(tmp_path):
    """The environment of a server of this test's own; whatever it started is stopped after."""
    env = {"SOJOURN_SPARK_DIR": str(tmp_path / "spark"), "SOJOURN_SPARK_PORT": str(free_loopback_port())}
    yield env
    sojourn("spark", "down", env=env)


def _state(env: dict) -> dict | None:
    path = Path(env["SOJOURN_SPARK_DIR"]) / "server.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def _copy_of_quickstart(tmp_path: Path, name: str) -> Path:
    run_dir = tmp_path / name
    shutil.copytree(RECORDED, run_dir)
    for written in ("summary.json", "report.html", "spark.log"):  # what the recorded analysis wrote
        (run_dir / written).unlink()
    return run_dir


def _before() -> dict:
    return json.loads((RECORDED / "summary.before.json").read_text())


def _in_group(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (zombies are not alive)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_up_twice_says_already_up_and_down_leaves_no_process(own_server):
    first = sojourn("spark", "up", "--no-warm", env=own_server, timeout=180)
    assert first.returncode == 0, first.stderr
    port = own_server["SOJOURN_SPARK_PORT"]
    assert first.stdout.strip() == f"sc://localhost:{port}"
    state = _state(own_server)
    assert state is not None and state["state"] == "ready"
    pids = [state["pid"], state["jvm_pid"]]
    assert all(_alive(pid) for pid in pids)
    with socket.create_connection(("127.0.0.1", int(port)), timeout=2):
        pass  # it listens

    again = sojourn("spark", "up", env=own_server)
    assert again.returncode == 0
    assert f"already up on 127.0.0.1:{port} (pid {state['pid']}" in again.stderr
    assert _state(own_server)["jvm_pid"] == state["jvm_pid"]  # not a second JVM

    status = sojourn("spark", "status", env=own_server)
    assert status.returncode == 0 and f"up on 127.0.0.1:{port} (ready)" in status.stdout
    sock = Path(own_server["SOJOURN_SPARK_DIR"]) / "analyst.sock"
    assert f"analyst:  serving on {sock}" in status.stdout
    group = _in_group(state["pid"])
    assert len(group) >= 3, group  # the supervisor, the JVM (spark-submit's java) and the analyst

    down = sojourn("spark", "down", env=own_server)
    assert down.returncode == 0 and "stopped" in down.stderr
    assert not any(_alive(pid) for pid in pids)
    assert _in_group(state["pid"]) == [] and not sock.exists()
    assert _state(own_server) is None
    assert sojourn("spark", "status", env=own_server).returncode == 1
    assert "not up" in sojourn("spark", "down", env=own_server).stderr


def test_a_port_in_use_is_named_and_exits_2(own_server):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = sojourn("spark", "up", "--no-warm", "--port", str(port), env=own_server)
    assert result.returncode == 2, result.stderr
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr
    assert _state(own_server) is None
    assert "Traceback" not in result.stderr


def test_a_client_without_the_token_is_refused():
    # the test session's server (tests/conftest.py), as `sojourn spark up` started it: asking changes nothing
    shared = {key: os.environ[key] for key in ("SOJOURN_SPARK_DIR", "SOJOURN_SPARK_PORT")}
    assert sojourn("spark", "up", "--no-warm", env=shared, timeout=180).returncode == 0
    port = shared["SOJOURN_SPARK_PORT"]
    token = (Path(shared["SOJOURN_SPARK_DIR"]) / "token").read_text().strip()
    assert (Path(shared["SOJOURN_SPARK_DIR"]) / "token").stat().st_mode & 0o077 == 0  # the owner's alone
    client = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.remote(sys.argv[1]).create()\n"
        "print(spark.range(7).count())\n"
    )

    def query(url: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
        return subprocess.run([sys.executable, "-c", client, url], capture_output=True, text=True, timeout=120, env=env)

    refused = query(f"sc://localhost:{port}")
    assert refused.returncode != 0 and "UNAUTHENTICATED" in refused.stderr
    wrong = query(f"sc://localhost:{port}/;token=not-{token}")
    assert wrong.returncode != 0 and "Invalid authentication token" in wrong.stderr
    allowed = query(f"sc://localhost:{port}/;token={token}")
    assert allowed.returncode == 0 and allowed.stdout.strip() == "7", allowed.stderr


def test_an_analysis_starts_the_server_and_the_next_one_uses_it(own_server, tmp_path):
    """No server running: `sojourn analyze` starts one and leaves it up; the next analysis uses it; both
    give the recorded summary; with --no-server the analysis runs in the command's own Spark."""
    first, second, alone = (_copy_of_quickstart(tmp_path, name) for name in ("first", "second", "alone"))
    ran = sojourn("analyze", str(first), env=own_server, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "starting a Spark Connect server" in ran.stderr
    state = _state(own_server)
    assert state is not None and _alive(state["jvm_pid"])  # left up for the next

    again = sojourn("analyze", str(second), env=own_server, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "starting a Spark Connect server" not in again.stderr
    assert "analysing in the local Spark server's analyst" in again.stderr  # its warm Python, not the command's
    assert _state(own_server)["jvm_pid"] == state["jvm_pid"]
    for run_dir in (first, second):
        summary = json.loads((run_dir / "summary.json").read_text())
        assert recorded_differences(_before(), summary) == []
    assert not (first / "spark.log").exists()  # the JVM's output is the server's log

    sojourn("spark", "down", env=own_server)
    off = sojourn("analyze", "--no-server", str(alone), env=own_server, timeout=300)
    assert off.returncode == 0, off.stderr[-3000:]
    assert _state(own_server) is None  # none started
    assert (alone / "spark.log").is_file()
    summary = json.loads((alone / "summary.json").read_text())
    assert recorded_differences(_before(), summary) == []


def test_a_server_killed_during_an_analysis_exits_5_and_writes_nothing(own_server, tmp_path):
    assert sojourn("spark", "up", "--no-warm", env=own_server, timeout=180).returncode == 0
    run_dir = _copy_of_quickstart(tmp_path, "killed")
    traces = {p: p.read_bytes() for p in (run_dir / "traces").rglob("*.parquet")}
    jvm = _state(own_server)["jvm_pid"]

    def kill_the_server(_proc) -> None:
        time.sleep(0.5)  # inside the first queries
        os.kill(jvm, signal.SIGKILL)

    ended = analysis_interrupted(run_dir, kill_the_server, env=own_server)
    stderr = ended.stderr
    assert ended.returncode == 5, stderr[-3000:]
    assert "the local Spark server stopped during the analysis" in stderr
    assert str(Path(own_server["SOJOURN_SPARK_DIR"]) / "server.log") in stderr
    assert "Traceback" not in stderr
    assert ended.seconds < 30  # not the client's ten minutes of retries
    assert not (run_dir / "summary.json").exists() and not (run_dir / "report.html").exists()
    assert not list(run_dir.glob(".*.tmp"))
    assert {p: p.read_bytes() for p in (run_dir / "traces").rglob("*.parquet")} == traces


def test_an_idle_server_stops_itself(own_server):
    up = sojourn("spark", "up", "--no-warm", "--idle-minutes", "0.05", env=own_server, timeout=180)
    assert up.returncode == 0, up.stderr
    state = _state(own_server)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (_alive(state["pid"]) or _alive(state["jvm_pid"])):
        time.sleep(0.5)
    assert not _alive(state["pid"]) and not _alive(state["jvm_pid"])
    assert _state(own_server) is None
    assert "idle for 0.05 min: stopping" in (Path(own_server["SOJOURN_SPARK_DIR"]) / "server.log").read_text()


def test_ctrl_c_during_an_analysis_on_the_server_exits_130_and_leaves_it_up(own_server, tmp_path):
    assert sojourn("spark", "up", "--no-warm", env=own_server, timeout=180).returncode == 0
    run_dir = _copy_of_quickstart(tmp_path, "interrupted")

    def ctrl_c(proc) -> None:
        time.sleep(0.5)  # inside the first queries
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does

    ended = analysis_interrupted(run_dir, ctrl_c, env=own_server, timeout=60)
    assert ended.returncode == 130, ended.stderr[-3000:]
    assert ended.stderr.rstrip().endswith("sojourn: interrupted") and "Traceback" not in ended.stderr
    time.sleep(3)  # longer than the rest of the analysis: the server's analyst must not finish it either
    assert not (run_dir / "summary.json").exists() and not (run_dir / "report.html").exists()
    assert sojourn("spark", "status", env=own_server).returncode == 0  # up for the next analysis
