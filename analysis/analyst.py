"""The warm analyst: the analysis code kept imported and connected beside the local Spark server.

A warm Spark server leaves a fresh `sojourn analyze` paying for its own Python: importing pyspark's
Connect client (pandas with it), connecting, and the first pass through the analysis code took
1.2 s of the quickstart run's 2.6-2.9 s, where the same analysis in a process that had already run
one took 1.4-1.6 s (docs/analysis.md, "The analyst"). So the server keeps one such process: the
supervisor (analysis.server) starts it beside the JVM, it imports the analysis while the JVM starts,
warms the server by analysing the built-in run, and then serves analyses on a Unix socket in the
server's directory (`analyst.sock`, mode 0600: the user's own). A command that would analyse on the
local server sends the run directory there, shows the progress it streams back and gets the summary;
the analyst writes summary.json and report.html as an analysis of the command's own would.

Only the same code is trusted to stand in for the command's: every request carries a fingerprint of
the client's analysis code (its files' paths, sizes and times, the interpreter and pyspark), and an
analyst whose own differs answers "stale"; the command then analyses on the server itself, as
before. When the files the analyst was started from have changed since, it also ends, and the
supervisor starts a new one (without the warm-up: the JVM is warm).

This module's client side imports nothing beyond the standard library: that is the point of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import socketserver
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "SOCKET_NAME",
    "STALE_EXIT",
    "AnalystError",
    "fingerprint",
    "serving",
    "analyses",
    "request",
    "serve",
    "main",
]

SOCKET_NAME = "analyst.sock"
STALE_EXIT = 3
"""The analyst's exit status when its code changed on disk: the supervisor starts a new one."""

_PACKAGE = Path(__file__).resolve().parent
_SKIPPED = {"__pycache__", "warmup_run"}

Progress = Callable[[str], None]
Analyze = Callable[[str, str, Progress, threading.Event], tuple[dict, dict[str, str]]]
"""An analysis at the analyst's seam: (run_dir, url, progress, gone) -> (summary, files)."""


class AnalystError(Exception):
    """The analyst failed an analysis for a reason that is not the run's (a failure inside Spark, a
    server gone): the message says what, as the command would say it of its own analysis."""


def fingerprint() -> str:
    """What the analysis code is: every file of the analysis package (path, size, modification
    time), the interpreter and the installed pyspark. Two processes with the same fingerprint run
    the same analysis."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256(f"{sys.executable}\n{_PACKAGE}\n".encode())
    with contextlib.suppress(PackageNotFoundError):
        digest.update(version("pyspark").encode())
    for path in sorted(_PACKAGE.rglob("*")):
        if path.is_file() and not _SKIPPED & set(path.relative_to(_PACKAGE).parts):
            stat = path.stat()
            digest.update(f"{path.relative_to(_PACKAGE)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


# --- the client -----------------------------------------------------------------


def serving(directory: Path) -> bool:
    """Whether an analyst accepts requests on directory/analyst.sock."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(directory / SOCKET_NAME))
        except OSError:
            return False
    return True


def request(directory: Path, run_dir: str | Path, progress: Progress | None = None) -> dict | None:
    """Analyse `run_dir` by the analyst of the server in `directory`: its summary; None when there is
    no analyst or it runs other code (the caller then analyses on its own). Raises AnalysisError (the
    run's fault, as the job would raise it) or AnalystError (anything else), and AnalystError when
    the analyst went away mid-analysis."""
    from analysis.errors import AnalysisError

    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(directory / SOCKET_NAME))
    except OSError:  # no socket, or one nobody listens on
        connection.close()
        return None
    say = progress or (lambda _message: None)
    with connection, connection.makefile("rwb") as stream:
        wanted = {"run_dir": str(Path(run_dir).resolve()), "fingerprint": fingerprint()}
        stream.write(json.dumps(wanted).encode() + b"\n")
        stream.flush()
        for line in stream:
            reply = json.loads(line)
            if "progress" in reply:
                say(reply["progress"])
            elif "stale" in reply:
                return None
            elif "summary" in reply:
                from analysis import outputs

                outputs.write(run_dir, reply["files"])
                return reply["summary"]
            elif reply.get("error") == "input":
                raise AnalysisError(reply["message"], path=reply.get("path"))
            else:
                raise AnalystError(reply["message"])
    raise AnalystError(f"the analyst ended during the analysis of {run_dir}; its log: {directory / 'server.log'}")


@contextlib.contextmanager
def analyses(
    run_dirs: Sequence[str | Path],
    master: str | None = None,
    log_path: str | Path | None = None,
    progress: Progress | None = None,
    remote: str | None = None,
    server: bool | None = None,
) -> Iterator[Callable[[str | Path], dict]]:
    """A function that analyses one of `run_dirs` and returns its summary: by the local server's
    analyst where the Spark is that server's (analysis.job.spark_for says which Spark; the keywords
    are its) and the analyst runs this code, else in this process on spark_for's session, opened at
    the first analysis that needs it."""
    from analysis import server as local_server

    say: Progress = progress or (lambda _message: None)
    remote, master, server = local_server.spark_from_env(remote, master, server)
    with contextlib.ExitStack() as stack:
        session: Any = None

        def here(run_dir: str | Path) -> dict:
            nonlocal session
            from analysis.job import analyze, spark_for

            if session is None:
                session = stack.enter_context(spark_for(run_dirs, master, log_path, say, remote, server))
            return analyze(run_dir, spark=session, progress=say)

        # A Spark of this process (a caller's, a test's) is used as it is: spark_for's rule
        in_process = "pyspark.sql" in sys.modules and sys.modules["pyspark.sql"].SparkSession.getActiveSession()
        if remote is not None or not server or in_process:
            yield here
            return
        from analysis.run_file import load_run_json

        for run_dir in run_dirs:  # a bad or unfinished run.json is the first thing to say, before the traces
            load_run_json(Path(run_dir))
        directory = local_server.state_dir(master)
        stack.enter_context(local_server.in_use(directory))
        info = local_server.ensure(directory, progress=say, master=master)

        def by_analyst(run_dir: str | Path) -> dict:
            try:
                summary = request(directory, run_dir, say)
            except AnalystError as exc:
                if not local_server.running(info):
                    raise local_server.ServerError(
                        f"the local Spark server stopped during the analysis; its log: {info.log}"
                    ) from exc
                raise
            return summary if summary is not None else here(run_dir)

        yield by_analyst


# --- the analyst ---------------------------------------------------------------


class _Analyst:
    """The analyst's state: the server's URL, the fingerprint it started with, the analysis."""

    def __init__(self, directory: Path, url: str, analyze: Analyze) -> None:
        self.directory = directory
        self.url = url
        self.analyze = analyze
        self.started_as = fingerprint()
        self.stale = threading.Event()

    def handle(self, wanted: Mapping[str, Any], send: Callable[[dict], None], gone: threading.Event) -> None:
        if wanted.get("fingerprint") != self.started_as or self.stale.is_set():
            send({"stale": True})
            return
        if fingerprint() != self.started_as:  # edited since it started: a new analyst will run the new code
            self.stale.set()
            send({"stale": True})
            return
        from analysis.errors import AnalysisError, spark_failure

        send({"progress": f"analysing in the local Spark server's analyst (pid {os.getpid()})"})
        try:
            summary, files = self.analyze(
                wanted["run_dir"], self.url, lambda message: send({"progress": message}), gone
            )
        except AnalysisError as exc:
            send({"error": "input", "message": str(exc), "path": exc.path})
        except Exception as exc:  # noqa: BLE001 (said to the client, which exits 5 with it)
            _say(f"an analysis of {wanted['run_dir']} failed:\n{traceback.format_exc()}")
            if type(exc).__module__.startswith(("py4j", "pyspark", "grpc")):
                send({"error": "spark", "message": spark_failure(exc, str(self.directory / "server.log"))})
            else:
                told = f"{type(exc).__name__}: {exc} (the traceback is in the server's log)"
                send({"error": "internal", "message": told})
        else:
            send({"summary": summary, "files": files})


def _analyze_on(
    run_dir: str, url: str, progress: Progress, gone: threading.Event, alive: Callable[[], bool]
) -> tuple[dict, dict[str, str]]:
    """One analysis (analysis.job.results) on a session of its own, released at the end; its queries
    are interrupted when `gone` is set (the client went away: Ctrl-C). `alive`: whether the JVM
    runs (session.connected: a call to a JVM that died fails at once)."""
    from analysis.job import results
    from analysis.session import connected

    with connected(url, alive=alive) as spark:
        ended = threading.Event()

        def interrupt_when_gone() -> None:
            while not ended.wait(0.2):
                if gone.is_set():
                    with contextlib.suppress(Exception):
                        spark.interruptAll()
                    return

        watcher = threading.Thread(target=interrupt_when_gone, name="sojourn-analyst-gone", daemon=True)
        watcher.start()
        try:
            return results(run_dir, spark, progress)
        finally:
            ended.set()


def serve(directory: Path, url: str, warm_run: Path | None, analyze: Analyze) -> int:
    """Serve analyses on directory/analyst.sock until stopped (SIGTERM) or stale (STALE_EXIT):
    `analyze(run_dir, url, progress, gone)` each, on a thread of its own (`gone` is set when the
    client hangs up). `warm_run`: first analyse that run directory until the server is warm
    (analysis.server.warmed)."""
    analyst = _Analyst(directory, url, analyze)
    if warm_run is not None:
        _warm(warm_run, url, analyze)
    path = directory / SOCKET_NAME
    with contextlib.suppress(FileNotFoundError):
        path.unlink()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            lock = threading.Lock()

            def send(reply: dict) -> None:
                with lock, contextlib.suppress(OSError):  # a client gone: the analysis still ends
                    self.wfile.write(json.dumps(reply).encode() + b"\n")
                    self.wfile.flush()

            line = self.rfile.readline()
            if not line:
                return
            gone = threading.Event()

            def watch() -> None:  # the client sends nothing after its request: a read ends when it hangs up
                with contextlib.suppress(OSError):
                    self.connection.recv(1)
                gone.set()

            threading.Thread(target=watch, name="sojourn-analyst-client", daemon=True).start()
            analyst.handle(json.loads(line), send, gone)
            if analyst.stale.is_set():
                threading.Thread(target=listener.shutdown, daemon=True).start()

    class Listener(socketserver.ThreadingUnixStreamServer):
        daemon_threads = True

    old_mask = os.umask(0o177)  # the socket is the user's alone
    try:
        listener = Listener(str(path), Handler)
    finally:
        os.umask(old_mask)
    with listener:
        _say(f"the analyst serves on {path}")
        listener.serve_forever(poll_interval=0.5)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    _say("the analysis code changed on disk: the analyst ends, a new one will run it")
    return STALE_EXIT


def _warm(run_dir: Path, url: str, analyze: Analyze) -> None:
    """Analyse a copy of `run_dir` until analysis.server.warmed: the JIT has compiled what an
    analysis runs, on the server and here."""
    import shutil
    import tempfile

    from analysis.server import warmed

    took: list[float] = []
    with tempfile.TemporaryDirectory(prefix="sojourn-warmup-") as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(run_dir, copy)
        while not warmed(took):
            started = time.monotonic()
            try:
                analyze(str(copy), url, lambda _message: None, threading.Event())
            except Exception:  # noqa: BLE001 (a failed warm-up leaves a server that works, only colder)
                _say(f"the warm-up analysis failed; going on:\n{traceback.format_exc()}")
                return
            took.append(time.monotonic() - started)
    _say(f"warm-up: {len(took)} analyses of the built-in run, " + ", ".join(f"{t:.1f}" for t in took) + " s")


def _say(message: str) -> None:
    print(f"[sojourn analyst {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """`python -m analysis.analyst --dir D --port P --jvm-pid N [--warm]`: started by the server's
    supervisor, with the token in SPARK_CONNECT_AUTHENTICATE_TOKEN."""
    import argparse
    from functools import partial

    parser = argparse.ArgumentParser(prog="python -m analysis.analyst", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jvm-pid", type=int, required=True)
    parser.add_argument("--warm", action="store_true")
    args = parser.parse_args(argv)
    from analysis import job  # noqa: F401 (imported while the JVM starts, not at the first analysis)
    from analysis.server import WARMUP_RUN, alive, listening

    # every session of this process is a Connect client's, also while another ends (session.connected)
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    while not listening(args.port):
        if not alive(args.jvm_pid):
            return 1
        time.sleep(0.1)
    url = f"sc://localhost:{args.port}/;token={os.environ['SPARK_CONNECT_AUTHENTICATE_TOKEN']}"
    analyze = partial(_analyze_on, alive=lambda: alive(args.jvm_pid))
    return serve(Path(args.dir), url, WARMUP_RUN if args.warm else None, analyze)


if __name__ == "__main__":
    sys.exit(main())
