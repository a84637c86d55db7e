"""What the `sojourn` commands share: exit statuses, the error they raise, loading a scenario,
its warnings, the broker a run uses, and running Locust headless in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loadgen.broker_help import broker_help
from loadgen.commands.stopping import stop_run_group
from loadgen.errors import EXIT_INTERNAL, LoadgenError

__all__ = [
    "EXIT_OK",
    "EXIT_SLO",
    "EXIT_INPUT",
    "EXIT_BROKER",
    "EXIT_INTERRUPTED",
    "EXIT_ANALYSIS",
    "EXIT_INTERNAL",
    "analysis_failures",
    "spark_choice",
    "require_analysis",
    "CliError",
    "load",
    "print_warnings",
    "print_capacity",
    "broker_for",
    "run_locust",
    "check_metrics_ports",
    "recover_traces",
    "ended_by_internal_error",
    "say",
]

EXIT_OK, EXIT_SLO, EXIT_INPUT, EXIT_BROKER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_LOADGEN = 4  # the load generator ended without starting the run (see the run's locust.log)
EXIT_ANALYSIS = 5  # the Spark analysis failed (out of memory, a lost cluster): the message names the JVM's log
# EXIT_INTERNAL (6, loadgen.errors): a part of the load generator failed mid-run, which ended the run

LOCUSTFILE = Path(__file__).resolve().parents[1] / "locustfile.py"


def say(message: str) -> None:
    """A progress line on stderr, as every command prints them."""
    print(f"sojourn: {message}", file=sys.stderr)


class CliError(LoadgenError):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def load(path: str, overrides: list[str]):
    from loadgen.replay.sources import load_sources
    from loadgen.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(path, overrides)
        load_sources(scenario)  # replay files: a bad row is an input error before anything runs
        return scenario
    except ScenarioError as exc:
        raise CliError(str(exc), EXIT_INPUT) from None


def print_capacity(scenario) -> None:
    """The capacity check's table (loadgen.scenario.capacity) on stdout."""
    from loadgen.scenario.capacity import capacity_lines, capacity_rows

    print("\n".join(capacity_lines(capacity_rows(scenario))))


def print_warnings(scenario, capture: bool = True) -> None:
    """Settings that are valid but probably not what the user meant (a phase that offers more than
    its consumers can take among them): stderr, exit status unchanged.
    `capture=False`: leave the dead-letter capture warnings to the load generator, which prints
    them when the run starts (also under a bare `locust`)."""
    from loadgen.replay.sources import load_sources, replay_warnings
    from loadgen.run.deadletter import capture_warnings
    from loadgen.scenario.advice import codel_warnings, egress_warnings
    from loadgen.scenario.capacity import capacity_rows, capacity_warnings

    for warning in [
        *capacity_warnings(capacity_rows(scenario)),
        *codel_warnings(scenario),
        *egress_warnings(scenario),
        *replay_warnings(scenario, load_sources(scenario)),  # parsed once per process (cached)
        *(capture_warnings(scenario) if capture else []),
        *_managed_warnings(scenario),
    ]:
        print(f"warning: {warning}", file=sys.stderr)


def _managed_warnings(scenario) -> list[str]:
    """A private node's settings that RabbitMQ accepts but that block publishing from the start."""
    managed = scenario.broker.managed
    if managed is None:
        return []
    from loadgen.broker.config import effective_settings, settings_warnings
    from loadgen.broker.managed import default_dir

    return [
        f"{scenario.source_path}: broker.managed.settings.{w}"
        for w in settings_warnings(effective_settings(dict(managed.settings)), default_dir(managed.port))
    ]


@contextmanager
def broker_for(scenario) -> Iterator[Any]:
    """The broker a run of `scenario` uses, up for the duration (loadgen.broker.for_run): yields the
    scenario the run uses, `scenario` or, when a private node stands in for the default broker, the
    same on the node's URL (Scenario.with_broker_url)."""
    from loadgen.broker.for_run import broker_for_run
    from loadgen.broker.managed import BrokerError
    from loadgen.errors import BrokerUnreachable

    try:
        with broker_for_run(scenario, say) as url:
            yield scenario if url is None else scenario.with_broker_url(url)
    except BrokerUnreachable as exc:
        raise CliError(f"{exc}\n{broker_help(exc)}", EXIT_BROKER) from None
    except BrokerError as exc:
        raise CliError(f"the private broker did not start: {exc}", EXIT_BROKER) from None


WORKERS_EXIT_S = 120.0  # how long the command waits for worker processes still writing traces


def _wait_for_run_processes(alive_r: int, timeout_s: float = WORKERS_EXIT_S) -> None:
    """Wait until every process holding the other end of `alive_r` has exited (see run_locust)."""
    import select
    import time

    deadline = time.monotonic() + timeout_s
    told = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                print(
                    f"sojourn: worker processes still running after {timeout_s:.0f} s; their last "
                    "traces may be missing",
                    file=sys.stderr,
                )
                return
            try:
                ready, _, _ = select.select([alive_r], [], [], min(left, 1.0))
            except KeyboardInterrupt:
                return
            if ready and not os.read(alive_r, 4096):
                return  # end of file: the last of them is gone
            if not ready and not told:
                say("waiting for the worker processes to finish writing their traces")
                told = True
    finally:
        os.close(alive_r)


def spark_choice(args) -> dict[str, Any]:
    """Where the command's analysis runs, from --remote, --master and --no-server: the keywords of
    analysis.job.spark_for. --remote names where the analysis runs: --master and --no-server do not apply."""
    if args.spark_remote and (args.spark_master or args.spark_server is False):
        other = "--master" if args.spark_master else "--no-server"
        raise CliError(f"--remote {args.spark_remote}: analyses on that server; {other} does not apply", EXIT_INPUT)
    return {"remote": args.spark_remote, "master": args.spark_master, "server": args.spark_server}


ANALYSIS_PACKAGES = ("pyspark", "plotly")
"""What the analysis imports beyond the load generator's needs: the `analysis` extra (pyproject.toml)."""


def require_analysis(
    instead: str = "analyze the run directory on a machine that has it (sojourn analyze RUN_DIR); the traces are kept",
) -> None:
    """A clear error (exit 5) when this install has no analysis: a load-generating host installs
    sojourn without the `analysis` extra. `instead` says what the user can do without it."""
    import importlib.util

    missing = [name for name in ANALYSIS_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(
            f"the analysis needs {' and '.join(missing)}, which this install lacks: install sojourn "
            f"with its analysis extra (pip install 'sojourn[analysis]'), or {instead}",
            EXIT_ANALYSIS,
        )


@contextmanager
def analysis_failures(log: str, spark: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Turn what the analysis raises into CliErrors: bad input exits 2 with the job's own message;
    a failure inside Spark (a JVM out of memory, a lost cluster, a server gone) exits 5 with its
    first line and the JVM's log (`log`, or the Spark Connect server's), not a Python traceback
    wrapped around a Java stack trace. `spark`: spark_choice's. An install without the analysis
    (require_analysis) exits 5 before anything starts."""
    require_analysis()
    from analysis.analyst import AnalystError
    from analysis.errors import AnalysisError, spark_failure
    from analysis.server import PortInUse, ServerError, state_dir

    try:
        yield
    except (AnalysisError, PortInUse) as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    except (ServerError, AnalystError) as exc:
        raise CliError(f"the Spark analysis failed: {exc}", EXIT_ANALYSIS) from None
    except Exception as exc:
        if not type(exc).__module__.startswith(("py4j", "pyspark", "grpc")):
            raise
        if _during_interrupt(exc):  # Ctrl-C reached the JVM too: cancelling its jobs failed on the way out
            raise KeyboardInterrupt from None
        if type(exc).__module__.startswith(("pyspark.errors.exceptions.connect", "grpc")):  # the JVM is a server's
            remote = (spark or {}).get("remote") or os.environ.get("SOJOURN_SPARK_REMOTE")
            log = "the Spark Connect server's own" if remote else str(state_dir() / "server.log")
        raise CliError(f"the Spark analysis failed: {spark_failure(exc, log)}", EXIT_ANALYSIS) from None


def _during_interrupt(exc: BaseException) -> bool:
    """Whether `exc` was raised while a KeyboardInterrupt was being handled (pyspark cancels the
    JVM's jobs on Ctrl-C; when the same Ctrl-C stopped the JVM, that cancel fails with a py4j
    error that would otherwise read as a failed analysis)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__context__ or link.__cause__
    return False


def recover_traces(run_dir: str) -> None:
    """Convert the trace batches a killed load generator left spilled (loadgen.trace.writer)."""
    from loadgen.trace.writer import recover

    rows = recover(Path(run_dir) / "traces")
    if rows:
        say(f"converted {rows:,} trace rows a stopped trace writer had left unconverted")


def ended_by_internal_error(run_dir: str, analysed: bool = True) -> str | None:
    """run.json's `error` when a part of the load generator failed and ended the run (its
    `internal_error`, loadgen.run.guarded), said on stderr; None otherwise. The command then exits
    EXIT_INTERNAL once what was captured is analysed."""
    from loadgen.run.runinfo import read_run_json

    try:
        run = read_run_json(run_dir)
    except (OSError, ValueError):
        return None
    if not isinstance(run, dict) or not run.get("internal_error"):
        return None
    error = str(run.get("error") or run["internal_error"])
    say(
        f"{run_dir}: the run was ended early by an {error}; what it captured is kept"
        f"{' and analysed' if analysed else ''} (exit status {EXIT_INTERNAL})"
    )
    return error


def check_metrics_ports(base: int | None, processes: int = 0) -> None:
    """Every port a run's processes will serve live metrics on (--metrics-port) can be listened on
    now: an error (exit 2) before any broker or load, not a worker without metrics in the middle."""
    if base is None:
        return
    from loadgen.metrics import endpoint

    roles = [("local" if not processes else "master", None)] + [("worker", i) for i in range(processes)]
    for role, index in roles:
        try:
            endpoint.listen(endpoint.port_for(base, role, index)).close()
        except endpoint.MetricsPortError as exc:
            raise CliError(str(exc), EXIT_INPUT) from None


def run_locust(
    scenario, run_dir: str, processes: int = 0, verbose: bool = False, metrics_port: int | None = None
) -> bool:
    """Run Locust headless in a child process on `scenario`, as resolved for the run (the child
    reads it from RUN_DIR/run.json, loadgen.run.handoff); return True if it was interrupted.
    Locust's own statistics tables reach the terminal only when `verbose`; otherwise they go to
    RUN_DIR/locust_stats.json (with RUN_DIR/locust.html and the CSV files, always written).
    `metrics_port`: the live metrics' base port (loadgen.metrics; check_metrics_ports checked it)."""
    from loadgen.run import handoff

    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--only-summary",
        "--run-dir",
        run_dir,
        "--html",
        os.path.join(run_dir, "locust.html"),
        "--csv",
        os.path.join(run_dir, "locust"),
        "--exit-code-on-error",
        "0",
        "--loglevel",
        "WARNING",
    ]
    if not verbose:  # Locust prints its tables at exit unless it saves them as JSON instead
        cmd += ["--json-file", os.path.join(run_dir, "locust_stats")]
    if metrics_port is not None:
        cmd += ["--metrics-port", str(metrics_port)]
    if processes:
        # Locust's master listens for its workers on 5557 by default, on every interface: a second
        # run with worker processes on the same machine then failed to start. A free loopback port
        # each, which the forked workers connect to.
        from loadgen.broker.local import free_loopback_port

        port = free_loopback_port()
        cmd += [
            "--processes",
            str(processes),
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--master-port",
            str(port),
        ]
    say(f"running {scenario.source_path} -> {run_dir}")
    handed_over = handoff.hand_over(run_dir, scenario)  # run.json, status starting; the URL in the environment
    # Every process of the run holds the write end of this pipe: Locust's master, and the worker
    # processes `--processes` forks from it. Locust's master does not wait for its workers when
    # it exits (at exit it takes "not exited yet" for "exited"), so a worker may still be writing
    # its last trace parts when the master is gone; the read end sees its end only when the last
    # of them has exited, and what reads the traces next (the analysis) waits for that. Their
    # trace writer processes hold it too (SOJOURN_ALIVE_FD): they convert their traces last.
    from loadgen.trace.writer import ALIVE_FD_ENV

    alive_r, alive_w = os.pipe()
    with open(os.path.join(run_dir, "locust.log"), "w") as log_file:
        try:
            # A process group of its own (stopping.py): a stop signal sent to this process alone
            # reaches the whole run. No terminal input: a process outside the terminal's foreground
            # group that read it would be stopped.
            child = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=None,
                pass_fds=(alive_w,),
                env={**os.environ, ALIVE_FD_ENV: str(alive_w), **handed_over},
                start_new_session=True,
            )
        except BaseException:
            handoff.withdraw(run_dir)
            raise
        finally:
            os.close(alive_w)
        interrupted = False
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:
                # Ctrl-C, SIGTERM or SIGHUP (stopping.py): every process of the run flushes its traces
                # and the census runs, as on Ctrl-C; wait for them.
                interrupted = True
                stop_run_group(child)
                print(
                    "sojourn: interrupted; waiting for the load generator to flush its traces and take the "
                    "census (interrupt again to force)",
                    file=sys.stderr,
                )
                try:
                    code = child.wait()
                    break
                except KeyboardInterrupt:
                    stop_run_group(child, force=True)
    _wait_for_run_processes(alive_r)
    handoff.withdraw(run_dir)  # the run never started: no run.json, as before the hand-over
    recover_traces(run_dir)
    from loadgen.run.memory import merge_into_run_json

    merge_into_run_json(run_dir)  # every process of the run has exited: their memory samples are written
    if code == EXIT_BROKER:
        raise CliError("the load generator could not use the broker (see above)", EXIT_BROKER)
    if code == EXIT_INPUT:
        raise CliError(
            "the run did not start: the scenario, or what it declares on the broker, was refused (see above)",
            EXIT_INPUT,
        )
    if not interrupted and not os.path.isfile(os.path.join(run_dir, "run.json")):
        raise CliError(
            f"the load generator ended (status {code}) without starting the run: see the messages "
            f"above and {run_dir}/locust.log",
            EXIT_LOADGEN,
        )
    if code not in (0, 1, EXIT_INTERNAL) and not interrupted:  # 6 is said from run.json (run.py)
        print(f"sojourn: locust exited with status {code}; see {run_dir}/locust.log", file=sys.stderr)
    return interrupted
