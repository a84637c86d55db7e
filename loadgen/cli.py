"""The `sojourn` command line: the parser, and `main`, which turns errors into messages and exit codes.

Each command lives in loadgen/commands/: run and analyze, validate, sweep, nightly, record and
compare (broker: loadgen/broker/command.py). Exit status: 0 success, 1 an SLO failed (nightly: or a
regression), 2 bad input (nightly: or another nightly holds the results directory), 3 broker
unreachable, 130 interrupted. The analysis (PySpark) is imported lazily, and never into the process
that runs Locust.
"""

from __future__ import annotations

import argparse
import sys

from loadgen import __version__
from loadgen.commands.common import EXIT_INPUT, EXIT_INTERRUPTED, CliError
from loadgen.commands.stopping import interrupted_status, stop_on_signals

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sojourn",
        description="Trace-replay load testing for RabbitMQ: what prefetch, processing time and "
        "network conditions do to per-message buffer sojourn and latency.",
    )
    p.add_argument("--version", action="version", version=f"sojourn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a scenario headless, then analyze it and write the report",
        description="Run SCENARIO through Locust (headless), analyze the traces with "
        "Spark and write RUN_DIR/summary.json and RUN_DIR/report.html.",
    )
    run.add_argument("scenario", help="scenario YAML file")
    run.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/<UTC time>-<name>)")
    _add_set(run)
    _add_processes(run)
    _add_metrics_port(run)
    _add_verbose(run)
    _add_spark_master(run)
    run.add_argument("--no-analyze", action="store_true", help="only run the load; analyze later")

    ana = sub.add_parser(
        "analyze",
        help="analyze run directories: summary.json and report.html",
        description="Run the PySpark analysis over each RUN_DIR/traces, all on one Spark "
        "session; the JVM's log goes to the first RUN_DIR/spark.log.",
    )
    ana.add_argument("run_dirs", metavar="RUN_DIR", nargs="+")
    # gone: every percentile comes from log buckets now; a script that still passes it is told so
    ana.add_argument("--percentiles", choices=("auto", "exact", "approximate"), help=argparse.SUPPRESS)
    _add_spark_master(ana)

    swp = sub.add_parser(
        "sweep",
        help="run a scenario once per value of one field, then compare the runs",
        description="Run SCENARIO once for each value of one field (e.g. prefetch), "
        "analyze every run, and print per phase the ack rate, the "
        "consumers' utilisation and the buffer sojourn of each, side by side. "
        "Writes DIR/sweep.md and DIR/sweep.json next to the run directories.",
    )
    swp.add_argument("scenario", help="scenario YAML file")
    swp.add_argument(
        "--vary",
        required=True,
        metavar="PATH=V1,V2,...",
        help="the field and its values, e.g. consumers.main.prefetch=1,26,51",
    )
    _add_set(swp)
    swp.add_argument("--out", metavar="DIR", help="where the runs go (default runs/<UTC time>-<name>-sweep)")
    _add_processes(swp)
    _add_metrics_port(swp)
    _add_verbose(swp)
    _add_spark_master(swp)

    nig = sub.add_parser(
        "nightly",
        help="run a suite of scenarios with SLOs; JUnit, history and trends",
        description="Run every scenario of SUITE in order into RESULTS_DIR/runs/<UTC time>-<name>/, "
        "then write RESULTS_DIR/junit.xml, history.json and index.html. Exit 1 "
        "when an SLO failed, a scenario failed or a metric regressed against "
        "its baseline; exit 2 when another nightly holds RESULTS_DIR. See docs/nightly.md.",
    )
    nig.add_argument("suite", help="suite YAML file, e.g. scenarios/suites/nightly.yaml")
    nig.add_argument("--out", required=True, metavar="RESULTS_DIR", help="results directory (kept across nights)")
    _add_set(nig, "applied to every entry, after the entry's own overrides")
    _add_metrics_port(nig)
    _add_verbose(nig)
    _add_spark_master(nig)

    cmp_ = sub.add_parser(
        "compare",
        help="put analysed runs side by side in one HTML page",
        description="Write one self-contained HTML page comparing RUN_DIRs: key metrics "
        "with deltas against the first, overlaid sojourn distributions and "
        "ack rates over time. Reads each RUN_DIR/summary.json.",
    )
    cmp_.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    cmp_.add_argument("--out", metavar="FILE", default="compare.html", help="output file (default compare.html)")

    val = sub.add_parser("validate", help="check a scenario or a suite file without running it")
    val.add_argument("scenario", help="scenario YAML file, or a suite file (every entry's scenario is checked)")
    _add_set(val)

    rec = sub.add_parser(
        "record",
        help="capture live publishes from the RabbitMQ firehose into a replay file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Record every publish on a vhost (time, size, exchange, routing key, priority, headers)\n"
        "from the firehose exchange amq.rabbitmq.trace into a replay file, for a scenario's\n"
        "`replay: {path: FILE}`. Needs firehose tracing on the vhost (rabbitmqctl trace_on -p\n"
        "VHOST, or --trace-on on the broker host). Exit 130 on Ctrl-C, keeping what was\n"
        "recorded. See docs/replay.md.",
        epilog="example:\n"
        "  rabbitmqctl trace_on -p /\n"
        "  sojourn record --out rec.csv --duration 300\n"
        "  rabbitmqctl trace_off -p /",
    )
    rec.add_argument(
        "--out", required=True, metavar="FILE", help="replay file to write: .csv, .jsonl or .parquet (overwritten)"
    )
    rec.add_argument(
        "--url",
        help="broker URL; its path is the vhost (default $SOJOURN_AMQP_URL or amqp://guest:guest@127.0.0.1:5672/)",
    )
    rec.add_argument(
        "--duration", type=float, metavar="S", help="stop after S seconds (default 60, or no limit with --count)"
    )
    rec.add_argument("--count", type=int, metavar="N", help="stop after N messages")
    rec.add_argument(
        "--exchange",
        action="append",
        default=[],
        dest="exchanges",
        metavar="NAME",
        help="record only publishes to this exchange ('' = the default exchange; repeatable)",
    )
    rec.add_argument("--payloads", action="store_true", help="also store each body (payload_b64 column)")
    rec.add_argument(
        "--trace-on",
        action="store_true",
        help="turn firehose tracing on for the recording and off afterwards if it was off "
        "(runs rabbitmqctl; broker on this machine only)",
    )

    from loadgen.broker.command import add_parser as add_broker_parser

    add_broker_parser(sub)

    from loadgen.commands.spark import add_parser as add_spark_parser

    add_spark_parser(sub)

    from loadgen.commands.scenarios import add_parsers as add_scenarios_parsers

    add_scenarios_parsers(sub)
    return p


def _add_spark_master(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--remote",
        dest="spark_remote",
        metavar="URL",
        help="analyse on this Spark Connect server, e.g. sc://host:15002 (or SOJOURN_SPARK_REMOTE)",
    )
    p.add_argument(
        "--master",
        dest="spark_master",
        metavar="URL",
        help="the Spark master of the analysis's server, e.g. spark://host:7077 (or SPARK_MASTER; default local[*])",
    )
    p.add_argument(
        "--no-server",
        dest="spark_server",
        action="store_false",
        default=None,
        help="analyse in a Spark of this process rather than on a warm local server (`sojourn spark up`), "
        "which is otherwise started when none runs (or SOJOURN_SPARK_SERVER=0)",
    )


def _add_processes(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--processes", type=int, default=0, metavar="N", help="Locust worker processes per run (default: one process)"
    )


def _add_metrics_port(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics while each run goes on (worker process N "
        "of --processes on PORT+1+N; docs/metrics.md)",
    )


def _add_verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also print Locust's statistics tables at the end of each run (always in RUN_DIR/locust.html, "
        "the CSV files and locust_stats.json)",
    )


def _add_set(p: argparse.ArgumentParser, where: str = "") -> None:
    p.add_argument(
        "--set",
        action="append",
        default=[],
        dest="overrides",
        metavar="PATH=VALUE",
        help="override a scenario field, e.g. --set consumers.main.prefetch=51 (repeatable"
        + (f"; {where})" if where else ")"),
    )


def _commands() -> dict:
    from loadgen.broker.command import cmd_broker
    from loadgen.commands.nightly import cmd_nightly
    from loadgen.commands.record_compare import cmd_compare, cmd_record
    from loadgen.commands.run import cmd_analyze, cmd_run
    from loadgen.commands.scenarios import cmd_locustfile, cmd_scenarios
    from loadgen.commands.spark import cmd_spark
    from loadgen.commands.sweep import cmd_sweep
    from loadgen.commands.validate import cmd_validate

    return {
        "run": cmd_run,
        "analyze": cmd_analyze,
        "validate": cmd_validate,
        "sweep": cmd_sweep,
        "nightly": cmd_nightly,
        "compare": cmd_compare,
        "record": cmd_record,
        "broker": cmd_broker,
        "spark": cmd_spark,
        "scenarios": cmd_scenarios,
        "locustfile": cmd_locustfile,
    }


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    commands = _commands()
    if args.command is None:
        parser.print_help()
        return EXIT_INPUT
    with stop_on_signals():  # SIGTERM and SIGHUP stop a command as Ctrl-C does (loadgen/commands/stopping.py)
        try:
            code = commands[args.command](args)
        except CliError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.code
        except KeyboardInterrupt:
            print("sojourn: interrupted", file=sys.stderr)
            return interrupted_status()
        except BrokenPipeError:  # `sojourn validate x.yaml | head`: the reader went, nothing to say
            _quiet_stdout()
            return 0
        return interrupted_status() if code == EXIT_INTERRUPTED else code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's flush at exit would raise on the closed pipe again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
