"""Integration tests: real RabbitMQ on 127.0.0.1 (or SOJOURN_AMQP_URL), real Locust, real Spark."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loadgen.broker.local import free_loopback_port, port_free
from loadgen.broker.managed import DIST_PORT_OFFSET
from tests.conftest import shared_server_url

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
        pytest.fail(
            "RabbitMQ is not answering on 127.0.0.1:5672: run scripts/setup.sh "
            "(or rabbitmq-server -detached) before the integration tests"
        )


def free_port(avoid: frozenset[int] | set[int] = frozenset()) -> int:
    """A free loopback port, not in `avoid`, whose Erlang distribution port (+20000) is free too,
    so a private node (`sojourn broker up --port`) uses the convention."""
    for _ in range(50):
        port = free_loopback_port()
        dist = port + DIST_PORT_OFFSET
        if port not in avoid and dist <= 65535 and port_free(dist):
            return port
    pytest.skip("no free port pair found")


def _cli_env(extra: dict | None = None) -> dict:
    """The environment of a command a test starts: this one's, without a PYSPARK_SUBMIT_ARGS, so
    that the command's Spark JVM gets analysis.session's own settings, as a user's does."""
    env = {**os.environ, **(extra or {})}
    if "PYSPARK_SUBMIT_ARGS" not in (extra or {}):
        env.pop("PYSPARK_SUBMIT_ARGS", None)
    return env


def sojourn(*args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the `sojourn` console script as a user would."""
    return subprocess.run(
        [str(BIN / "sojourn"), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=_cli_env(env)
    )


def start_sojourn(*args: str, env: dict | None = None) -> subprocess.Popen:
    """Start the `sojourn` console script in a session of its own (a signal a test sends it reaches
    it alone), its output captured; the caller waits for it and kills it if it outlives the test."""
    return subprocess.Popen(
        [str(BIN / "sojourn"), *args],
        cwd=REPO,
        env=_cli_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@dataclass
class Ended:
    """How an analysis a test interrupted ended."""

    pid: int  # its session's id too (start_sojourn)
    returncode: int
    stderr: str
    seconds: float  # from what the test did to the end


def analysis_interrupted(run_dir: Path, act, *args: str, env: dict | None = None, timeout: float = 120) -> Ended:
    """Start `sojourn analyze [args] RUN_DIR`; once it has read the traces (its queries begin next), call
    act(proc) (e.g. send it SIGINT) and wait for its end; killed if it outlives `timeout`."""
    proc = start_sojourn("analyze", *args, str(run_dir), env=env)
    said = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            if "reading traces:" in line:
                break
        act(proc)
        started = time.monotonic()
        _, rest = proc.communicate(timeout=timeout)
        seconds = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Ended(proc.pid, proc.returncode, "".join(said) + rest, seconds)


def write_scenario(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@dataclass
class Ran:
    """One finished run of the batch: where its traces are and what the command said."""

    run_dir: Path
    returncode: int
    stdout: str
    stderr: str


@dataclass
class _Planned:
    module: str
    scenario: str
    command: str  # "sojourn": `sojourn run --no-analyze`; "locust": the locustfile headless
    extra: tuple = ()  # more arguments; "{base}" is the batch directory
    env: dict = field(default_factory=dict)  # more environment; "{base}" is the batch directory
    during: object = None  # during(proc, run_dir), in a thread while the run goes on
    before: object = None  # before(), ahead of the start (e.g. a vhost to create)
    files: dict = field(default_factory=dict)  # more files the scenario names: written beside it


_BATCH: dict[str, _Planned] = {}


def run_in_batch(
    module: str,
    case: str,
    scenario: str,
    *,
    command: str = "sojourn",
    extra: tuple = (),
    env: dict | None = None,
    during=None,
    before=None,
) -> None:
    """Plan `case` for the session's batch: the short runs whose assertions do not depend on the
    machine being idle (counts, outcomes, orderings, broker behaviour) run AT_ONCE at a time,
    before the first test that needs one, and all have finished before that test goes on, so none
    runs beside a test that measures timing. Each would otherwise cost its own 5-30 s of mostly waiting.
    Only the cases of modules with a selected test are started."""
    assert command in ("sojourn", "locust"), command
    assert case not in _BATCH, case
    _BATCH[case] = _Planned(module, scenario, command, tuple(extra), dict(env or {}), during, before)


_END_TO_END: dict[str, _Planned] = {}


def run_end_to_end(
    module: str, case: str, command: str, text: str, *, files: dict | None = None, extra: tuple = (), during=None
) -> None:
    """Plan `case` for the end-to-end pair: commands that run load *and* their own Spark analysis
    in the command's own JVM, as a user runs them ("sojourn-run": `sojourn run SCENARIO`;
    "nightly": `sojourn nightly SUITE`, `files` being the scenarios it names). Their checks are
    on counts, verdicts and files, not on timing, and each alternates waiting on its load with
    about one busy core planning Spark jobs: started together (before the first test that needs
    one, and all finished before that test goes on) they took 85 s here, against 91 + 78 s one
    after the other."""
    assert command in ("sojourn-run", "nightly"), command
    assert case not in _END_TO_END, case
    _END_TO_END[case] = _Planned(module, text, command, tuple(extra), files=dict(files or {}), during=during)


def _argv(case: str, plan: _Planned, base: Path) -> list[str]:
    if plan.files:
        (base / f"{case}-input").mkdir()
        for name, text in plan.files.items():
            write_scenario(base / f"{case}-input" / name, text)
        path = write_scenario(base / f"{case}-input" / f"{case}.yaml", plan.scenario)
    else:
        path = write_scenario(base / f"{case}.yaml", plan.scenario)
    extra = [a.format(base=base) for a in plan.extra]
    if plan.command == "sojourn-run":
        return [str(BIN / "sojourn"), "run", path, "--out", str(base / case), *extra]
    if plan.command == "nightly":
        return [str(BIN / "sojourn"), "nightly", path, "--out", str(base / case), *extra]
    if plan.command == "locust":
        return [
            sys.executable,
            "-m",
            "locust",
            "-f",
            "loadgen/locustfile.py",
            "--headless",
            "--only-summary",
            "--scenario",
            path,
            "--run-dir",
            str(base / case),
            *extra,
        ]
    assert plan.command == "sojourn", plan.command
    return [str(BIN / "sojourn"), "run", path, "--out", str(base / case), "--no-analyze", *extra]


AT_ONCE = 4
"""How many planned runs go at once. Each run's start-up (three Python processes importing
Locust, gevent, pika and pyarrow) takes a core for seconds; with all fifteen of the batch at once on
two cores, start-up outlasted short runs' schedules, whose producers then joined after their
publishing had ended (five batch tests failed so in one fresh-clone run). The start barrier
(loadgen/rules/barrier.py) now holds t0 until every participant is ready, so a slow start no longer eats
a schedule; the limit stays, so that the runs' own load on two cores stays moderate."""


def start_together(
    base: Path, plans: dict[str, _Planned], timeout: float = 240, at_once: int = AT_ONCE
) -> dict[str, Ran]:
    """Run the planned runs, one process each, into `base/<case>`, `at_once` of them at a time: the
    next one starts as soon as any has ended (with its `during` action), in the order planned, rather
    than waiting for the slowest of a wave. A run still going after `timeout` is killed and fails its
    tests."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="planned-run") as pool:
        futures = {case: pool.submit(_ran, base, case, plan, timeout) for case, plan in plans.items()}
        return {case: future.result() for case, future in futures.items()}


def _ran(base: Path, case: str, plan: _Planned, timeout: float) -> Ran:
    """`case` run to its end (killed after `timeout`), its `during` action beside it on a thread."""
    if plan.before is not None:
        plan.before()
    proc = subprocess.Popen(
        _argv(case, plan, base),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=_cli_env({key: value.format(base=base) for key, value in plan.env.items()}),
    )
    failure: list[str] = []
    try:
        thread = None
        if plan.during is not None:

            def act() -> None:
                try:
                    plan.during(proc, base / case)
                except BaseException as exc:  # noqa: BLE001 - reported as the case's failure
                    failure.append(f"its action during the run failed: {exc!r}")

            thread = threading.Thread(target=act, daemon=True)
            thread.start()
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            stderr += f"\n(killed after {timeout} s)"
        if thread is not None:
            thread.join(timeout)
        if failure:
            return Ran(base / case, -1, stdout, stderr + "\n" + failure[0])
        return Ran(base / case, proc.returncode, stdout, stderr)
    finally:
        if proc.poll() is None:
            proc.kill()


def load_generator_pid(run_dir: Path) -> int:
    """The pid of the Locust process running into `run_dir` (its command line names it)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"locust" in b" ".join(argv) and str(run_dir).encode() in argv:
            return int(pid)
    raise AssertionError(f"no load generator process runs into {run_dir}")


def wait_for_t0(proc: subprocess.Popen, run_dir: Path, timeout: float = 60) -> float:
    """The run's t0 (epoch seconds) once the start barrier has fixed it in run.json (its
    `start_barrier`): the moment its load starts, however long the processes took to start."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            run = json.loads((run_dir / "run.json").read_text())
        except (OSError, ValueError):
            run = {}
        if "start_barrier" in run:  # until then t0_ns is provisional
            return int(run["t0_ns"]) / 1e9
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before writing its t0")
        time.sleep(0.05)
    raise AssertionError(f"no t0 in {run_dir / 'run.json'} after {timeout} s")


def _selected(request, planned: dict[str, _Planned]) -> dict[str, _Planned]:
    """The planned cases of the modules that have a test in this session."""
    modules = {item.module.__name__ for item in request.session.items if getattr(item, "module", None)}
    return {case: plan for case, plan in planned.items() if plan.module in modules}


@pytest.fixture(scope="session")
def batch(request, tmp_path_factory) -> dict[str, Ran]:
    """case -> Ran for the runs planned with run_in_batch (one start, one wait for all)."""
    return start_together(tmp_path_factory.mktemp("batch"), _selected(request, _BATCH))


@pytest.fixture(scope="session")
def end_to_end(request, tmp_path_factory) -> dict[str, Ran]:
    """case -> Ran for the commands planned with run_end_to_end (one start, one wait for all)."""
    return start_together(tmp_path_factory.mktemp("end-to-end"), _selected(request, _END_TO_END), timeout=360)


@pytest.fixture(scope="session")
def analyze_in_process():
    """analyze_in_process(run_dir) -> summary: the analysis of `sojourn analyze`, called in this
    process, on the test session's warm Spark server (tests/conftest.py), which the `sojourn`
    commands the tests start use too: one JVM for all of them. (A Spark of the tests' own had been
    a second JVM, cold, beside the server.) The end-to-end tests of `sojourn run` and `sojourn
    nightly` keep the command-line path."""
    from analysis.job import analyze

    def _analyze(run_dir):
        return analyze(run_dir, remote=shared_server_url())

    return _analyze
