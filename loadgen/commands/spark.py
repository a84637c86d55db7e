"""`sojourn spark up|status|down`: the warm local Spark Connect server the analysis uses (analysis.server).

Exit status: up 0 (ready, or already up), 2 (the port is taken, a bad setting), 5 (the server did not
start: the message names its log), 130 interrupted (the half-started server is stopped); status 0 up,
1 not; down 0 (stopped, or was not up).
"""

from __future__ import annotations

import argparse
import sys
import time

from loadgen.commands.common import EXIT_ANALYSIS, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, require_analysis

__all__ = ["add_parser", "cmd_spark"]

EXIT_NOT_RUNNING = 1


def add_parser(sub) -> None:
    from analysis.server import DEFAULT_IDLE_S, DEFAULT_PORT

    spark = sub.add_parser(
        "spark",
        help="start, stop or inspect the warm local Spark server the analysis uses",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A Spark Connect server run from the installed pyspark, on 127.0.0.1 only, with an\n"
        "authentication token. `sojourn analyze`, `run`, `sweep` and `nightly` use it (and start\n"
        "it when none runs, unless --no-server or SOJOURN_SPARK_SERVER=0); it stops itself after\n"
        "an idle time. State, token and log in ~/.cache/sojourn/spark (SOJOURN_SPARK_DIR).\n"
        'See docs/analysis.md, "The server".',
        epilog="example:\n  sojourn spark up\n  sojourn analyze runs/slow\n  sojourn spark down",
    )
    actions = spark.add_subparsers(dest="spark_command", metavar="ACTION", required=True)
    up = actions.add_parser(
        "up",
        help="start the server, warm it with a tiny built-in run, print its URL",
        description="Start the server detached and wait until it has analysed a tiny built-in run "
        "(again, until an analysis is no longer clearly faster than the one before); "
        "print its URL (sc://localhost:PORT) on stdout. Already up: say so, exit 0.",
    )
    up.add_argument(
        "--port",
        type=int,
        metavar="PORT",
        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}, or SOJOURN_SPARK_PORT)",
    )
    up.add_argument(
        "--idle-minutes",
        type=float,
        metavar="M",
        help=f"stop after M minutes with no analysis (default {DEFAULT_IDLE_S // 60}, or SOJOURN_SPARK_IDLE_MINUTES)",
    )
    up.add_argument("--no-warm", action="store_true", help="do not analyse the built-in run first")
    status = actions.add_parser(
        "status", help="is it up; pids, port, memory, idle time, log", description="Exit 0 when up, 1 when not."
    )
    down = actions.add_parser(
        "down", help="stop it and wait until its processes are gone", description="Exit 0 also when it was not up."
    )
    for action in (up, status, down):
        action.add_argument(
            "--master",
            metavar="URL",
            help="the server whose Spark master is URL, e.g. spark://host:7077 (default: the local one, local[*]); "
            "its port is a free one unless --port says",
        )


def cmd_spark(args) -> int:
    require_analysis("start the server on a machine that has it, and analyse there")
    from analysis.server import PortInUse, ServerError

    try:
        return {"up": _up, "status": _status, "down": _down}[args.spark_command](args)
    except PortInUse as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ANALYSIS


def _say(message: str) -> None:
    print(f"sojourn spark: {message}", file=sys.stderr, flush=True)


def _up(args) -> int:
    from analysis import server

    if args.port is not None and not 0 < args.port < 65536:
        print(f"error: --port {args.port}: not a port (1-65535)", file=sys.stderr)
        return EXIT_INPUT
    if args.idle_minutes is not None and args.idle_minutes <= 0:
        print(f"error: --idle-minutes {args.idle_minutes:g}: must be above 0", file=sys.stderr)
        return EXIT_INPUT
    running = server.status(server.state_dir(args.master))
    if running is not None:
        _say(f"already up on 127.0.0.1:{running.port} (pid {running.pid}, {running.state}); log: {running.log}")
        if args.port is not None and args.port != running.port:
            _say(f"not started again on port {args.port}: `sojourn spark down` first")
        print(running.url)
        return EXIT_OK
    idle_s = args.idle_minutes * 60 if args.idle_minutes is not None else None
    try:
        info = server.start(args.port, idle_s, warm=not args.no_warm, progress=_say, master=args.master)
    except KeyboardInterrupt:
        _say("interrupted: the server was stopped")
        return EXIT_INTERRUPTED
    _say(
        f"up on 127.0.0.1:{info.port} after {info.ready_after_s:.1f} s (pid {info.pid}, JVM {info.jvm_pid}, "
        f"heap up to {info.heap_mib:,} MiB); stops after {info.idle_s / 60:g} min idle; log: {info.log}"
    )
    _say("stop it with: sojourn spark down")
    print(info.url)
    return EXIT_OK


def _status(args) -> int:
    from analysis import server
    from analysis.analyst import SOCKET_NAME, serving

    directory = server.state_dir(args.master)
    info = server.status(directory)
    if info is None:
        print(f"not up (state directory {directory})")
        return EXIT_NOT_RUNNING
    idle = server.idle_seconds(directory)
    lines = [
        f"up on 127.0.0.1:{info.port} ({info.state})",
        f"  url:      {info.url} (its token: {directory / 'token'})",
        f"  master:   {info.master}",
        f"  pids:     supervisor {info.pid}, JVM {info.jvm_pid}",
        f"  since:    {time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(info.started))}",
        f"  memory:   {_resident_mib(info.jvm_pid)} resident, heap up to {info.heap_mib:,} MiB",
        f"  idle:     {idle / 60:.1f} min of {info.idle_s / 60:g}" if idle is not None else "  idle:     in use",
        f"  log:      {info.log}",
        f"  spark:    {info.spark_version}",
        f"  analyst:  serving on {directory / SOCKET_NAME}"
        if serving(directory)
        else "  analyst:  none (analyses run in their own processes, as clients of the server)",
    ]
    print("\n".join(lines))
    return EXIT_OK


def _resident_mib(pid: int | None) -> str:
    try:
        with open(f"/proc/{pid}/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return "unknown"
    return f"{kib / 1024:,.0f} MiB"


def _down(args) -> int:
    from analysis import server

    info = server.stop(server.state_dir(args.master))
    if info is None:
        _say("not up")
    else:
        _say(f"stopped (pid {info.pid}, JVM {info.jvm_pid})")
    return EXIT_OK
