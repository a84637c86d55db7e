"""The warm analyst's protocol (analysis.analyst): a real Unix socket and a real analyst process, the
analysis itself replaced at its seam (`analyze`) by fakes. What a user would notice: the summary
and the progress come back as the analysis' own; a run's fault is said as the job says it (exit 2);
a failure inside Spark with its first line and the server's log (exit 5); an analyst running other
code, or none at all, leaves the command to analyse on its own; an analyst that dies mid-analysis
is an error, not a hang."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import stat
import time
from pathlib import Path

import pytest

from analysis import analyst
from analysis.errors import AnalysisError, RunFileError

SUMMARY = {"messages": {"published": 3, "acked": 3}, "run": {"run_id": "r"}}


def _analyze(run_dir: str, url: str, progress, gone) -> tuple[dict, dict[str, str]]:
    """The fake analysis: what it does depends on the run directory's name."""
    name = Path(run_dir).name
    progress(f"analysing {name} on {url}")
    if name == "bad":
        raise RunFileError(f"{run_dir}/run.json: not JSON", path=f"{run_dir}/run.json")
    if name == "spark":
        from pyspark.errors.exceptions.connect import SparkConnectGrpcException

        raise SparkConnectGrpcException("java.lang.OutOfMemoryError: Java heap space\n\tat somewhere")
    if name in ("slow", "interrupted"):
        gone.wait(60)
        if gone.is_set():
            (Path(run_dir).parent / f"{name}-client-gone").touch()
    summary = {**SUMMARY, "run_dir": run_dir}
    return summary, {"summary.json": json.dumps(summary), "report.html": f"<p>{name}</p>"}


def _until_serving(directory) -> None:
    """Until the analyst accepts on its socket (30 s at most): the socket's file comes a moment
    before it listens."""
    deadline = time.monotonic() + 30
    while not analyst.serving(directory):
        assert time.monotonic() < deadline, "the analyst did not listen"
        time.sleep(0.02)


@pytest.fixture
def serving(tmp_path):
    """An analyst process serving on tmp_path/analyst.sock; ended after the test."""
    process = multiprocessing.get_context("fork").Process(
        target=analyst.serve, args=(tmp_path, "sc://localhost:1", None, _analyze), daemon=True
    )
    process.start()
    _until_serving(tmp_path)
    yield process
    process.kill()
    process.join()


def test_the_summary_and_the_progress_come_back_and_the_command_writes_the_files(serving, tmp_path):
    said = []
    run_dir = tmp_path / "good"
    run_dir.mkdir()
    summary = analyst.request(tmp_path, run_dir, said.append)
    assert summary == {**SUMMARY, "run_dir": str(run_dir.resolve())}
    assert said == [
        f"analysing in the local Spark server's analyst (pid {serving.pid})",
        "analysing good on sc://localhost:1",
    ]
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    assert (run_dir / "report.html").read_text() == "<p>good</p>"
    assert sorted(p.name for p in run_dir.iterdir()) == ["report.html", "summary.json"]  # no temporary left


def test_a_command_stopped_mid_analysis_stops_it_and_nothing_is_written(serving, tmp_path):
    run_dir = tmp_path / "interrupted"
    run_dir.mkdir()

    def ctrl_c(_message):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        analyst.request(tmp_path, run_dir, ctrl_c)
    deadline = time.monotonic() + 30
    while not (tmp_path / "interrupted-client-gone").exists():  # the analysis was told, and ended
        assert time.monotonic() < deadline, "the analyst did not notice the client had gone"
        time.sleep(0.05)
    assert list(run_dir.iterdir()) == []


def test_the_socket_is_the_users_alone(serving, tmp_path):
    mode = stat.S_IMODE(os.stat(tmp_path / analyst.SOCKET_NAME).st_mode)
    assert mode & 0o077 == 0, oct(mode)


def test_a_runs_fault_is_said_as_the_job_says_it(serving, tmp_path):
    with pytest.raises(AnalysisError) as raised:
        analyst.request(tmp_path, tmp_path / "bad")
    assert str(raised.value) == f"{(tmp_path / 'bad').resolve()}/run.json: not JSON"
    assert raised.value.path == f"{(tmp_path / 'bad').resolve()}/run.json"


def test_a_failure_inside_spark_gives_its_first_line_a_hint_and_the_servers_log(serving, tmp_path):
    with pytest.raises(analyst.AnalystError) as raised:
        analyst.request(tmp_path, tmp_path / "spark")
    text = str(raised.value)
    assert text.startswith("java.lang.OutOfMemoryError: Java heap space (the JVM ran out of memory")
    assert "at somewhere" not in text
    assert text.endswith(f"the JVM's log: {tmp_path / 'server.log'}")


def test_an_analyst_of_other_code_is_not_used(serving, tmp_path, monkeypatch):
    monkeypatch.setattr(analyst, "fingerprint", lambda: "another install")
    assert analyst.request(tmp_path, tmp_path / "good") is None


def test_without_an_analyst_the_command_analyses_on_its_own(tmp_path):
    assert analyst.request(tmp_path, tmp_path / "good") is None
    (tmp_path / analyst.SOCKET_NAME).touch()  # a socket file left by a killed analyst: nobody listens
    assert analyst.request(tmp_path, tmp_path / "good") is None


def test_an_analyst_that_dies_mid_analysis_is_an_error_not_a_hang(serving, tmp_path):
    def kill_soon(message):
        os.kill(serving.pid, signal.SIGKILL)

    started = time.monotonic()
    with pytest.raises(analyst.AnalystError, match="the analyst ended during the analysis"):
        analyst.request(tmp_path, tmp_path / "slow", kill_soon)
    assert time.monotonic() - started < 30


def test_an_analyst_whose_code_changed_on_disk_says_stale_and_ends(tmp_path, monkeypatch):
    client = os.getpid()
    calls = []  # the analyst's own calls, in its process: the first when it starts, then each request's

    def fingerprint() -> str:
        if os.getpid() == client:
            return "started as"
        calls.append(1)
        return "started as" if len(calls) == 1 else "edited since"

    monkeypatch.setattr(analyst, "fingerprint", fingerprint)
    process = multiprocessing.get_context("fork").Process(
        target=lambda: os._exit(analyst.serve(tmp_path, "sc://localhost:1", None, _analyze)), daemon=True
    )
    process.start()
    _until_serving(tmp_path)
    # the client's fingerprint is the one the analyst started with, but its files have changed since:
    # the client analyses on its own, the analyst ends
    assert analyst.request(tmp_path, tmp_path / "good") is None
    process.join(timeout=30)
    assert process.exitcode == analyst.STALE_EXIT
    assert not (tmp_path / analyst.SOCKET_NAME).exists()


def test_the_fingerprint_follows_the_analysis_code(tmp_path, monkeypatch):
    package = tmp_path / "analysis"
    (package / "report").mkdir(parents=True)
    (package / "job.py").write_text("x = 1\n")
    (package / "report" / "page.css").write_text("p {}\n")
    monkeypatch.setattr(analyst, "_PACKAGE", package)
    first = analyst.fingerprint()
    assert analyst.fingerprint() == first
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "job.pyc").write_bytes(b"compiled")
    assert analyst.fingerprint() == first  # what Python caches is not code
    os.utime(package / "report" / "page.css", ns=(1, 1))
    assert analyst.fingerprint() != first
