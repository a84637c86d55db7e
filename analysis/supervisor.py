"""The local Spark server's supervisor (analysis.server's module docstring tells the whole server):
the process `analysis.server.start` runs as `python -m analysis.supervisor`, leader of the server's
process group. It starts the JVM (`spark-submit` of Spark's SparkConnectServer) and the analyst
(analysis.analyst), says when the server is ready in server.json, starts a new analyst when the
old one's code went stale, and stops both when told to (SIGTERM) or once no analysis has used the
server for its idle time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from analysis import server
from analysis.analyst import SOCKET_NAME, STALE_EXIT, serving

__all__ = ["serve", "main"]

_CHECK_EVERY_S = 2.0
_CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def serve(directory: Path, port: int, idle_s: float, warm: bool, master: str) -> int:
    """Run the server from `directory` (its token already there) on 127.0.0.1:`port` until told to
    stop or idle for `idle_s`; `warm`: the analyst warms it before it is ready. server.json says
    each state (starting, warming, ready) and goes at the end; the exit status is 0 for a stop
    asked for once ready or for idleness, 1 when the JVM ended by itself or a stop came before the
    server was ready."""
    from analysis.session import max_result_size, total_memory_bytes

    started = time.time()
    stopping = False

    def on_signal(_signo: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    for signo in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signo, on_signal)

    heap = server.heap_mib(total_memory_bytes())
    info = server.ServerInfo(
        pid=os.getpid(),
        jvm_pid=None,
        port=port,
        state="starting",
        started=started,
        ready_after_s=None,
        idle_s=idle_s,
        heap_mib=heap,
        log=str(directory / "server.log"),
        spark_version=server.spark_version(),
        master=master,
    )
    server.write_state(directory, info)
    token = (directory / "token").read_text().strip()
    home = server.spark_home()
    command = [
        str(home / "bin" / "spark-submit"),
        "--class",
        _CONNECT_SERVER_CLASS,
        "--name",
        "sojourn analysis server",
        "--master",
        master,
        "--driver-memory",
        f"{heap}m",
        "--conf",
        f"spark.driver.maxResultSize={max_result_size(heap)}",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        f"spark.local.dir={directory / 'tmp'}",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        # At INFO the server logs each client call in several lines (40,000 lines for one small analysis)
        "--conf",
        "spark.log.level=WARN",
        "--conf",
        "spark.sql.session.timeZone=UTC",
        # The Connect client reads it once per process: when on, every `functions` call walks the
        # Python stack for its call site and tries to import IPython (0.1 s of a warm quickstart
        # analysis's 1.0 s in the analyst, 2026-12-05). The analysis's own errors name the file.
        "--conf",
        "spark.python.sql.dataFrameDebugging.enabled=false",
        # The shuffle files' checksums diagnose corruption on a cluster's disks and network; a local
        # shuffle is written and read by one JVM within seconds.
        "--conf",
        "spark.shuffle.checksum.enabled=false",
        "--conf",
        "spark.sql.shuffle.orderIndependentChecksum.enabled=false",
    ]
    # The token reaches the JVM in its environment (Spark reads SPARK_CONNECT_AUTHENTICATE_TOKEN),
    # not on its command line, which every user of the machine can read.
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONNECT_AUTHENTICATE_TOKEN": token,
    }
    jvm = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env)
    info = replace(info, jvm_pid=jvm.pid)
    server.write_state(directory, info)
    _say(f"the JVM (pid {jvm.pid}) starts, heap up to {heap:,} MiB")
    # the analyst imports the analysis while the JVM starts, then warms it (analysis.analyst)
    analyst = _start_analyst(directory, port, warm, env, jvm.pid)
    try:
        while not server.listening(port):
            if stopping or jvm.poll() is not None:
                _say("the JVM ended before it listened" if jvm.poll() is not None else "stopped while starting")
                return 1
            time.sleep(0.1)
        server.write_state(directory, info := replace(info, state="warming" if warm else "starting"))
        while not serving(directory) and analyst.poll() is None:  # its socket's file comes before it accepts
            if stopping or jvm.poll() is not None:
                _say("the JVM ended while the analyst started" if jvm.poll() is not None else "stopped while starting")
                return 1
            time.sleep(0.1)
        if analyst.poll() is not None:
            _say(f"the analyst ended (exit status {analyst.returncode}): analyses run in their own processes")
        info = replace(info, state="ready", ready_after_s=round(time.time() - started, 2))
        (directory / "last-used").touch()
        server.write_state(directory, info)
        _say(f"ready on 127.0.0.1:{port} after {info.ready_after_s:.1f} s; stops after {idle_s / 60:g} min idle")
        while not stopping:
            if jvm.poll() is not None:
                _say(f"the JVM ended (exit status {jvm.returncode})")
                return 1
            if analyst.poll() == STALE_EXIT:  # its code changed: a new one runs the new code
                analyst = _start_analyst(directory, port, False, env, jvm.pid)
            if server.idle_for(directory) >= idle_s and _stop_if_unused(directory, jvm, idle_s):
                return 0
            time.sleep(_CHECK_EVERY_S)
        _say("stopping (asked to)")
        return 0
    finally:
        _end_process(analyst)
        (directory / SOCKET_NAME).unlink(missing_ok=True)
        _end_process(jvm)
        _remove_state(directory, os.getpid())


def _start_analyst(directory: Path, port: int, warm: bool, env: dict[str, str], jvm_pid: int) -> subprocess.Popen:
    """The analyst (analysis.analyst), once a socket an earlier one left is gone: the server is ready
    when the new one accepts on its socket."""
    (directory / SOCKET_NAME).unlink(missing_ok=True)
    command = [sys.executable, "-m", "analysis.analyst", "--dir", str(directory), "--port", str(port)]
    command += ["--jvm-pid", str(jvm_pid)]
    return subprocess.Popen([*command, "--warm"] if warm else command, stdin=subprocess.DEVNULL, env=env)


def _stop_if_unused(directory: Path, jvm: subprocess.Popen, idle_s: float) -> bool:
    """Stop the JVM if no analysis holds the server; True when it was stopped. The state file goes
    first and the lock is held until the JVM has exited, so an analysis that waits for the lock
    finds no server and starts a new one."""
    with open(directory / "in-use.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if server.idle_for(directory) < idle_s:  # an analysis ended while we waited
            return False
        _remove_state(directory, os.getpid())
        _say(f"idle for {idle_s / 60:g} min: stopping")
        _end_process(jvm)
        return True


def _end_process(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=server.STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _remove_state(directory: Path, pid: int) -> None:
    """Remove server.json if it is this supervisor's."""
    with contextlib.suppress(OSError, ValueError):
        path = directory / "server.json"
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()


def _say(message: str) -> None:
    print(f"[sojourn spark {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m analysis.supervisor",
        description="A local Spark server's supervisor (started by `sojourn spark up` and by analyses).",
    )
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle-s", type=float, required=True)
    parser.add_argument("--no-warm", action="store_true")
    parser.add_argument("--master", default=server.LOCAL_MASTER)
    args = parser.parse_args(argv)
    return serve(Path(args.dir), args.port, args.idle_s, not args.no_warm, args.master)


if __name__ == "__main__":
    sys.exit(main())
