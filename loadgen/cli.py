"""The `sojourn` command: run, analyze, validate, sweep and compare scenarios; run nightly suites.

Exit status: 0 success, 1 an SLO failed (nightly: or a regression), 2 bad input (nightly: or
another nightly holds the results directory), 3 broker unreachable,
130 interrupted. Loaders raise; only `main` turns errors into messages and exit
codes. The analysis (PySpark) is imported lazily, and never into the process
that runs Locust.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from loadgen import __version__

__all__ = ["main"]

EXIT_OK, EXIT_SLO, EXIT_INPUT, EXIT_BROKER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

LOCUSTFILE = Path(__file__).with_name("locustfile.py")

BROKER_HELP = """\
Start a local RabbitMQ and try again:
  rabbitmq-server -detached            # installed but stopped
  apt-get install -y rabbitmq-server   # not installed (Debian/Ubuntu)
or point sojourn at another broker with SOJOURN_AMQP_URL=amqp://user:pass@host:5672/ (amqps:// for TLS)."""


class CliError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sojourn",
        description="Trace-replay load testing for RabbitMQ: what prefetch, processing time and "
                    "network conditions do to per-message buffer sojourn and latency.")
    p.add_argument("--version", action="version", version=f"sojourn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run a scenario headless, then analyze it and write the report",
                         description="Run SCENARIO through Locust (headless), analyze the traces with "
                                     "Spark and write RUN_DIR/summary.json and RUN_DIR/report.html.")
    run.add_argument("scenario", help="scenario YAML file")
    run.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/<UTC time>-<name>)")
    _add_set(run)
    _add_processes(run)
    _add_spark_master(run)
    run.add_argument("--no-analyze", action="store_true", help="only run the load; analyze later")

    ana = sub.add_parser("analyze", help="analyze a run directory: summary.json and report.html",
                         description="Run the PySpark analysis over RUN_DIR/traces.")
    ana.add_argument("run_dir", metavar="RUN_DIR")
    _add_spark_master(ana)

    swp = sub.add_parser("sweep", help="run a scenario once per value of one field, then compare the runs",
                         description="Run SCENARIO once for each value of one field (e.g. prefetch), "
                                     "analyze every run, and print per phase the ack rate, the "
                                     "consumers' utilisation and the buffer sojourn of each, side by side. "
                                     "Writes DIR/sweep.md and DIR/sweep.json next to the run directories.")
    swp.add_argument("scenario", help="scenario YAML file")
    swp.add_argument("--vary", required=True, metavar="PATH=V1,V2,...",
                     help="the field and its values, e.g. consumers.main.prefetch=1,26,51")
    _add_set(swp)
    swp.add_argument("--out", metavar="DIR", help="where the runs go (default runs/<UTC time>-<name>-sweep)")
    _add_processes(swp)
    _add_spark_master(swp)

    nig = sub.add_parser("nightly", help="run a suite of scenarios with SLOs; JUnit, history and trends",
                         description="Run every scenario of SUITE in order into RESULTS_DIR/runs/<UTC time>-<name>/, "
                                     "then write RESULTS_DIR/junit.xml, history.json and index.html. Exit 1 "
                                     "when an SLO failed, a scenario failed or a metric regressed against "
                                     "its baseline; exit 2 when another nightly holds RESULTS_DIR. See docs/nightly.md.")
    nig.add_argument("suite", help="suite YAML file, e.g. scenarios/suites/nightly.yaml")
    nig.add_argument("--out", required=True, metavar="RESULTS_DIR", help="results directory (kept across nights)")
    _add_spark_master(nig)

    cmp_ = sub.add_parser("compare", help="put analysed runs side by side in one HTML page",
                          description="Write one self-contained HTML page comparing RUN_DIRs: key metrics "
                                      "with deltas against the first, overlaid sojourn distributions and "
                                      "ack rates over time. Reads each RUN_DIR/summary.json.")
    cmp_.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    cmp_.add_argument("--out", metavar="FILE", default="compare.html", help="output file (default compare.html)")

    val = sub.add_parser("validate", help="check a scenario file without running it")
    val.add_argument("scenario", help="scenario YAML file")
    _add_set(val)

    rec = sub.add_parser(
        "record", help="capture live publishes from the RabbitMQ firehose into a replay file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Record every publish on a vhost (time, size, exchange, routing key, priority, headers)\n"
                    "from the firehose exchange amq.rabbitmq.trace into a replay file, for a scenario's\n"
                    "`replay: {path: FILE}`. Needs firehose tracing on the vhost (rabbitmqctl trace_on -p\n"
                    "VHOST, or --trace-on on the broker host). Exit 130 on Ctrl-C, keeping what was\n"
                    "recorded. See docs/replay.md.",
        epilog="example:\n"
               "  rabbitmqctl trace_on -p /\n"
               "  sojourn record --out rec.csv --duration 300\n"
               "  rabbitmqctl trace_off -p /")
    rec.add_argument("--out", required=True, metavar="FILE",
                     help="replay file to write: .csv, .jsonl or .parquet (overwritten)")
    rec.add_argument("--url",
                     help="broker URL; its path is the vhost (default $SOJOURN_AMQP_URL or "
                          "amqp://guest:guest@127.0.0.1:5672/)")
    rec.add_argument("--duration", type=float, metavar="S",
                     help="stop after S seconds (default 60, or no limit with --count)")
    rec.add_argument("--count", type=int, metavar="N", help="stop after N messages")
    rec.add_argument("--exchange", action="append", default=[], dest="exchanges", metavar="NAME",
                     help="record only publishes to this exchange ('' = the default exchange; repeatable)")
    rec.add_argument("--payloads", action="store_true", help="also store each body (payload_b64 column)")
    rec.add_argument("--trace-on", action="store_true",
                     help="turn firehose tracing on for the recording and off afterwards if it was off "
                          "(runs rabbitmqctl; broker on this machine only)")

    from loadgen.broker.command import add_parser as add_broker_parser
    add_broker_parser(sub)
    return p


def _add_spark_master(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", dest="spark_master", metavar="URL",
                   help="Spark master for the analysis (default local[*] or SPARK_MASTER)")


def _add_processes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--processes", type=int, default=0, metavar="N",
                   help="Locust worker processes per run (default: one process)")


def _add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], dest="overrides", metavar="PATH=VALUE",
                   help="override a scenario field, e.g. --set consumers.main.prefetch=51 (repeatable)")


def _load(path: str, overrides: list[str]):
    from loadgen.replay.sources import load_sources
    from loadgen.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(path, overrides)
        load_sources(scenario)  # replay files: a bad row is an input error before anything runs
        return scenario
    except ScenarioError as exc:
        raise CliError(str(exc), EXIT_INPUT) from None


def _print_warnings(scenario, capture: bool = True) -> None:
    """Settings that are valid but probably not what the user meant: stderr, exit status unchanged.
    `capture=False`: leave the dead-letter capture warnings to the load generator, which prints
    them when the run starts (also under a bare `locust`)."""
    from loadgen.codel import codel_warnings
    from loadgen.deadletter import capture_warnings
    from loadgen.egress import egress_warnings

    for warning in [*codel_warnings(scenario), *egress_warnings(scenario),
                    *(capture_warnings(scenario) if capture else [])]:
        print(f"warning: {warning}", file=sys.stderr)


# -- validate -----------------------------------------------------------------
def cmd_validate(args) -> int:
    from loadgen.redact import mask_url
    from loadgen.replay.sources import describe, load_sources

    s = _load(args.scenario, args.overrides)
    _print_warnings(s)
    print(f"{s.source_path}: ok — scenario {s.name!r}, {s.run.duration_s:g} s "
          f"(warm-up {s.run.warmup_s:g} s, drain up to {s.run.drain_timeout_s:g} s), "
          f"broker {mask_url(s.broker.url)}{' (a private node sojourn run starts)' if s.broker.managed else ''}, "
          f"queue {s.queue.name!r} ({s.queue.queue_type})")
    for x in s.exchanges:
        print(f"  exchange {x.name}: {x.type}, {'durable' if x.durable else 'not durable'}"
              f"{', deleted at the end' if x.delete_on_end else ''}")
    for b in s.bindings:
        print(f"  binding: {b.exchange} -> queue with key {b.routing_key!r}"
              f"{f' and arguments {dict(b.arguments)}' if b.arguments else ''}")
    replay = describe(s, load_sources(s))
    for g in s.producers:
        confirms = f"confirms {'window ' + str(g.confirm_window) if g.confirms else 'off'}"
        if g.replay is None:
            print(f"  producer {g.name}: {g.count} x {g.rate_text()} msg/s {g.arrival}, {g.size_bytes} B, {confirms}")
            continue
        r = replay[g.name]
        print(f"  producer {g.name}: {g.count} x replaying {r['source']} ({r['format']}, {r['rows']:,} rows over "
              f"{r['span_s']:g} s) at speed {r['speed']:g}: {r['expected']:,} publishes in the run, {confirms}")
        if r["ignored_columns"]:
            print(f"  warning: {r['source']}: ignored columns {', '.join(r['ignored_columns'])}", file=sys.stderr)
    for g in s.consumers:
        print(f"  consumer {g.name}: {g.count} x prefetch {g.prefetch} ({g.prefetch_scope}), "
              f"{g.ack_mode} ack, processing mean {g.processing.mean_ms:g} ms ({g.processing.distribution})"
              + (f", egress {', '.join(name for name, _ in g.egress.classes)} at most "
                 f"{g.egress.max_depth_units:,} units each (min burst {g.egress.min_burst})" if g.egress else ""))
    if s.network is not None:
        print(f"  network (delay-line proxy): {_link_text('up', s.network.upstream)}, "
              f"{_link_text('down', s.network.downstream)}{', DOWN' if s.network.down else ''}")
    for name, start, end in s.phase_windows():
        print(f"  phase {name}: {start:g}–{end:g} s")
    for slo in s.slo:
        print(f"  slo: {slo}")
    return EXIT_OK


def _link_text(direction: str, link) -> str:
    text = f"{direction} {link.latency_ms:g} ms"
    if link.jitter_ms:
        text += f" + 0–{link.jitter_ms:g} ms jitter"
    if link.bandwidth_bytes_per_s:
        text += f" at most {link.bandwidth_bytes_per_s:g} B/s"
    return text


# -- run ----------------------------------------------------------------------
def cmd_run(args) -> int:
    from loadgen.broker.for_run import broker_for_run
    from loadgen.broker.managed import BrokerError
    from loadgen.errors import BrokerUnreachable
    from loadgen.runinfo import default_run_dir

    scenario = _load(args.scenario, args.overrides)
    _print_warnings(scenario, capture=False)
    run_dir = args.out or default_run_dir(scenario.name)
    if os.path.exists(os.path.join(run_dir, "traces")):
        raise CliError(f"{run_dir}: already holds a run's traces; choose another --out", EXIT_INPUT)
    try:
        with broker_for_run(scenario, lambda message: print(f"sojourn: {message}", file=sys.stderr)) as url:
            if url is not None:  # a private node stands in for the default broker
                args.overrides = [*args.overrides, f"broker.url={url}"]
            os.makedirs(run_dir, exist_ok=True)
            interrupted = _run_locust(args, run_dir)
    except BrokerUnreachable as exc:
        raise CliError(f"{exc}\n{BROKER_HELP}", EXIT_BROKER) from None
    except BrokerError as exc:
        raise CliError(f"the private broker did not start: {exc}", EXIT_BROKER) from None
    if args.no_analyze:
        print(f"traces written to {run_dir}; analyze with: sojourn analyze {run_dir}")
        return EXIT_INTERRUPTED if interrupted else EXIT_OK
    code = _analyze(run_dir, args.spark_master)
    return EXIT_INTERRUPTED if interrupted else code


def _run_locust(args, run_dir: str) -> bool:
    """Run Locust headless in a child process; return True if it was interrupted."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
           "--scenario", args.scenario, "--run-dir", run_dir,
           "--html", os.path.join(run_dir, "locust.html"),
           "--csv", os.path.join(run_dir, "locust"),
           "--exit-code-on-error", "0", "--loglevel", "WARNING"]
    for override in args.overrides:
        cmd += ["--set", override]
    if args.processes:
        cmd += ["--processes", str(args.processes)]
    print(f"sojourn: running {args.scenario} -> {run_dir}", file=sys.stderr)
    with open(os.path.join(run_dir, "locust.log"), "w") as log_file:
        child = subprocess.Popen(cmd, stdout=log_file, stderr=None)
        interrupted = False
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:
                # The child got the same SIGINT and is flushing its traces; wait for it.
                interrupted = True
                print("sojourn: interrupted; waiting for the load generator to flush its traces "
                      "(Ctrl-C again to force)", file=sys.stderr)
                try:
                    code = child.wait()
                    break
                except KeyboardInterrupt:
                    child.send_signal(signal.SIGTERM)
    if code == EXIT_BROKER:
        raise CliError("the load generator could not reach the broker (see above)\n" + BROKER_HELP, EXIT_BROKER)
    if code == EXIT_INPUT:
        raise CliError("the run did not start: the scenario, or what it declares on the broker, was refused "
                       "(see above)", EXIT_INPUT)
    if code not in (0, 1) and not interrupted:
        print(f"sojourn: locust exited with status {code}; see {run_dir}/locust.log", file=sys.stderr)
    return interrupted


# -- sweep --------------------------------------------------------------------
def _vary(text: str) -> tuple[str, list[str]]:
    path, sep, values = text.partition("=")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not path.strip() or len(vals) < 1:
        raise CliError(f"--vary {text!r}: expected PATH=V1,V2,... e.g. consumers.main.prefetch=1,26,51",
                       EXIT_INPUT)
    return path.strip(), vals


def cmd_sweep(args) -> int:
    import json
    import types

    from loadgen.amqp.connection import probe
    from loadgen.errors import BrokerUnreachable
    from loadgen.runinfo import default_run_dir

    path, values = _vary(args.vary)
    variants = [(v, [*args.overrides, f"{path}={v}"]) for v in values]
    scenarios = [_load(args.scenario, overrides) for _v, overrides in variants]  # all valid before any run
    try:
        probe(scenarios[0].broker.url, timeout_s=scenarios[0].broker.connect_timeout_s)
    except BrokerUnreachable as exc:
        raise CliError(f"{exc}\n{BROKER_HELP}", EXIT_BROKER) from None
    out = args.out or default_run_dir(scenarios[0].name) + "-sweep"
    label = path.rsplit(".", 1)[-1]
    runs = [(v, os.path.join(out, f"{label}-{v}"), overrides) for v, overrides in variants]
    for _v, run_dir, _o in runs:
        if os.path.exists(os.path.join(run_dir, "traces")):
            raise CliError(f"{run_dir}: already holds a run's traces; choose another --out", EXIT_INPUT)
    for v, run_dir, overrides in runs:
        os.makedirs(run_dir, exist_ok=True)
        print(f"sojourn: sweep {path}={v}", file=sys.stderr)
        run_args = types.SimpleNamespace(scenario=args.scenario, overrides=overrides, processes=args.processes)
        if _run_locust(run_args, run_dir):
            print(f"sojourn: sweep interrupted; finished runs are in {out}", file=sys.stderr)
            return EXIT_INTERRUPTED

    from analysis.errors import AnalysisError
    from analysis.job import analyze
    from analysis.session import get_spark

    print(f"sojourn: analyzing {len(runs)} runs with Spark", file=sys.stderr)
    spark = get_spark(args.spark_master)
    summaries = []
    try:
        for v, run_dir, _o in runs:
            try:
                summaries.append((v, run_dir, analyze(run_dir, spark=spark)))
            except AnalysisError as exc:
                raise CliError(str(exc), EXIT_INPUT) from None
    finally:
        spark.stop()
    rows = sweep_rows(summaries)
    table = sweep_table(path, rows)
    with open(os.path.join(out, "sweep.md"), "w", encoding="utf-8") as f:
        f.write(f"# sweep of {path} over {args.scenario}\n\n{table}\n")
    with open(os.path.join(out, "sweep.json"), "w", encoding="utf-8") as f:
        json.dump({"scenario": args.scenario, "vary": path, "overrides": args.overrides, "rows": rows}, f, indent=2)
    print(table)
    unaccounted = sum((s.get("messages") or {}).get("unaccounted") or 0 for _v, _d, s in summaries)
    if unaccounted:
        print(f"  WARNING: {unaccounted} messages unaccounted for; see each run's report", file=sys.stderr)
    print(f"  runs and reports: {out}/{label}-*/report.html; table: {out}/sweep.md")
    failed = any(not s.get("passed") for _v, _d, summary in summaries for s in summary.get("slo", []))
    return EXIT_SLO if failed else EXIT_OK


def sweep_rows(summaries: list[tuple[str, str, dict]]) -> list[dict]:
    """One row per run and phase. Utilisation is estimated as acks/s x mean processing time per
    consumer (the summary's per-phase block has no processing time of its own)."""
    rows = []
    for value, run_dir, summary in summaries:
        processing_ms = ((summary.get("latency_ms") or {}).get("processing") or {}).get("mean")
        consumers = max(1, len(summary.get("consumers") or []))
        periods = ((summary.get("network") or {}).get("periods")) or []
        for phase in summary.get("phases") or []:
            ack = (phase.get("throughput") or {}).get("ack_per_s")
            # the impairment period in force when the phase began (periods follow network changes only)
            net = next((p for p in periods
                        if (p.get("start_s") or 0) <= (phase.get("start_s") or 0) < (p.get("end_s") or 0)), None)
            rows.append({
                "value": value, "run_dir": run_dir, "phase": phase.get("phase"),
                "start_s": phase.get("start_s"), "end_s": phase.get("end_s"),
                "network_ms": None if net is None else [(net.get("upstream") or {}).get("latency_ms"),
                                                        (net.get("downstream") or {}).get("latency_ms")],
                "ack_per_s": ack,
                "utilisation": None if ack is None or processing_ms is None
                else ack * processing_ms / 1000.0 / consumers,
                "sojourn_p50_ms": (phase.get("sojourn_ms") or {}).get("p50"),
                "sojourn_p99_ms": (phase.get("sojourn_ms") or {}).get("p99"),
                "e2e_p50_ms": ((phase.get("latency_ms") or {}).get("end_to_end") or {}).get("p50"),
                "unaccounted": (summary.get("messages") or {}).get("unaccounted"),
            })
    return rows


def sweep_table(path: str, rows: list[dict]) -> str:
    def num(v, fmt="{:,.1f}"):
        return "–" if v is None else fmt.format(v)

    lines = [f"| {path} | phase | s | network up/down (ms) | ack/s | utilisation | "
             f"sojourn p50 (ms) | sojourn p99 (ms) | e2e p50 (ms) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        net = "–" if r["network_ms"] is None else "/".join(num(x, "{:g}") for x in r["network_ms"])
        lines.append(f"| {r['value']} | {r['phase']} | {num(r['start_s'], '{:g}')}–{num(r['end_s'], '{:g}')} "
                     f"| {net} | {num(r['ack_per_s'])} | {num(r['utilisation'], '{:.1%}')} "
                     f"| {num(r['sojourn_p50_ms'])} | {num(r['sojourn_p99_ms'])} | {num(r['e2e_p50_ms'], '{:,.0f}')} |")
    return "\n".join(lines)


# -- nightly ------------------------------------------------------------------
def cmd_nightly(args) -> int:
    import types

    from loadgen.amqp.connection import probe
    from loadgen.errors import BrokerUnreachable
    from loadgen.scenario import ScenarioError
    from loadgen.suite import LockHeld, ResultsLock, load_suite
    from loadgen.suite.runner import run_suite, write_history

    try:
        suite = load_suite(args.suite)
    except ScenarioError as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    scenarios = [_load(e.scenario_path, list(e.overrides)) for e in suite.entries]  # all valid before any run
    try:
        probe(scenarios[0].broker.url, timeout_s=scenarios[0].broker.connect_timeout_s)
    except BrokerUnreachable as exc:
        raise CliError(f"{exc}\n{BROKER_HELP}", EXIT_BROKER) from None
    lock = ResultsLock(args.out)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    spark = None

    def run_load(entry, run_dir: str) -> bool:
        return _run_locust(types.SimpleNamespace(scenario=entry.scenario_path, overrides=list(entry.overrides),
                                                 processes=0), run_dir)

    def analyze_run(run_dir: str) -> dict:
        nonlocal spark
        from analysis.job import analyze
        from analysis.session import get_spark

        if spark is None:
            spark = get_spark(args.spark_master)
        summary = analyze(run_dir, spark=spark)
        print(format_summary(summary, run_dir))
        return summary

    try:
        outcome = run_suite(suite, args.out, run_load=run_load, analyze=analyze_run,
                            say=lambda m: print(f"sojourn: {m}", file=sys.stderr))
        write_history(suite, args.out, outcome)
    finally:
        if spark is not None:
            spark.stop()
        lock.release()
    failures = [f"{c.classname} {c.name}" for c in outcome.cases if c.failure]
    print(f"nightly {suite.name}: {len(suite.entries)} scenarios, {len(failures)} failed checks"
          + "".join(f"\n  FAIL {f}" for f in failures))
    print(f"  junit: {os.path.join(args.out, 'junit.xml')}  trends: {os.path.join(args.out, 'index.html')}")
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_SLO if outcome.failed else EXIT_OK


# -- record -------------------------------------------------------------------
def cmd_record(args) -> int:
    from loadgen.errors import BrokerUnreachable
    from loadgen.record import RecordError, RecordOptions, record
    from loadgen.replay.writer import TraceFileError

    duration = args.duration if args.duration is not None else (None if args.count is not None else 60.0)
    url = args.url or os.environ.get("SOJOURN_AMQP_URL") or "amqp://guest:guest@127.0.0.1:5672/"
    opts = RecordOptions(url=url, out=args.out, duration_s=duration, count=args.count,
                         exchanges=tuple(args.exchanges), payloads=args.payloads, trace_on=args.trace_on)
    try:
        result = record(opts)
    except (RecordError, TraceFileError) as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    except BrokerUnreachable as exc:
        raise CliError(f"{exc}\n{BROKER_HELP}", EXIT_BROKER) from None
    print(result.summary())
    if result.connection_lost:
        return EXIT_BROKER
    return EXIT_INTERRUPTED if result.interrupted else EXIT_OK


# -- broker -------------------------------------------------------------------
def cmd_broker(args) -> int:
    from loadgen.broker.command import cmd_broker as run_broker_command
    return run_broker_command(args)


# -- compare ------------------------------------------------------------------
def cmd_compare(args) -> int:
    import json

    from analysis.report.compare import render_compare

    runs, links = [], {}
    out_dir = os.path.dirname(os.path.abspath(args.out))
    for run_dir in args.run_dirs:
        path = os.path.join(run_dir, "summary.json")
        try:
            with open(path, encoding="utf-8") as f:
                summary = json.load(f)
        except FileNotFoundError:
            raise CliError(f"{run_dir}: no summary.json; analyze it first with: sojourn analyze {run_dir}",
                           EXIT_INPUT) from None
        except (OSError, ValueError) as exc:
            raise CliError(f"{path}: can not read: {exc}", EXIT_INPUT) from None
        label = os.path.basename(os.path.normpath(run_dir))
        if label in links:
            label = os.path.normpath(run_dir)
        runs.append((label, summary))
        links[label] = os.path.relpath(os.path.join(os.path.abspath(run_dir), "report.html"), out_dir)
    html = render_compare(runs, links=links)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(html)
    print(f"comparison of {len(runs)} runs: {args.out}")
    return EXIT_OK


# -- analyze ------------------------------------------------------------------
def cmd_analyze(args) -> int:
    if not os.path.isfile(os.path.join(args.run_dir, "run.json")):
        raise CliError(f"{args.run_dir}: not a run directory (no run.json)", EXIT_INPUT)
    return _analyze(args.run_dir, args.spark_master)


def _analyze(run_dir: str, master: str | None) -> int:
    from analysis.errors import AnalysisError
    from analysis.job import analyze

    print(f"sojourn: analyzing {run_dir} with Spark", file=sys.stderr)
    try:
        summary = analyze(run_dir, master=master,
                          progress=lambda msg: print(f"  {msg}", file=sys.stderr))
    except AnalysisError as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    print(format_summary(summary, run_dir))
    failed = [s for s in summary.get("slo", []) if not s.get("passed")]
    return EXIT_SLO if failed else EXIT_OK


def format_summary(summary: dict, run_dir: str) -> str:
    m = summary.get("messages", {})
    t = summary.get("throughput", {})
    sj = summary.get("sojourn_ms", {})
    e2e = summary.get("latency_ms", {}).get("end_to_end", {})

    def ms(v):
        return "–" if v is None else f"{v:,.1f}"

    lines = [
        f"run {summary.get('run', {}).get('run_id', '?')}  ({summary.get('run', {}).get('status', '?')})",
        f"  messages   published {m.get('published', 0):,}  acked {m.get('acked', 0):,}  "
        f"discarded {m.get('discarded_total', 0):,}  left in broker {m.get('left_in_broker', 0):,}  "
        f"unaccounted {m.get('unaccounted', 0):,}",
        f"  throughput publish {t.get('publish_per_s', 0) or 0:,.1f}/s  deliver {t.get('deliver_per_s', 0) or 0:,.1f}/s  "
        f"ack {t.get('ack_per_s', 0) or 0:,.1f}/s",
        f"  sojourn ms p50 {ms(sj.get('p50'))}  p95 {ms(sj.get('p95'))}  p99 {ms(sj.get('p99'))}  "
        f"max {ms(sj.get('max'))}",
        f"  e2e ms     p50 {ms(e2e.get('p50'))}  p99 {ms(e2e.get('p99'))}",
    ]
    for phase in summary.get("phases", []):
        psj = phase.get("sojourn_ms", {})
        span = f"{phase.get('start_s', 0):g}–{phase.get('end_s', 0):g} s"
        lines.append(f"  phase {phase.get('phase')} ({span}): sojourn p50 {ms(psj.get('p50'))} "
                     f"p99 {ms(psj.get('p99'))}")
    for s in summary.get("slo", []):
        value = s.get("value")
        shown = "none" if value is None else f"{value:,.6g}"
        lines.append(f"  SLO {'PASS' if s.get('passed') else 'FAIL'}  {s.get('expr')}  (value {shown})")
    for group, f in sorted((summary.get("fidelity") or {}).items()):
        if not isinstance(f, dict):
            continue
        late = f.get("lateness_ms") or {}
        if f.get("behind"):
            lines.append(f"  WARNING: producer group {group} fell behind its schedule: p99 {ms(late.get('p99'))} ms "
                         f"late (max {ms(late.get('max'))} ms); the results under-state the offered load")
        replay = f.get("replay") if isinstance(f.get("replay"), dict) else {}
        if replay.get("missing") or replay.get("duplicates"):
            lines.append(f"  WARNING: replay {group}: {replay.get('missing') or 0:,} rows missing, "
                         f"{replay.get('duplicates') or 0:,} duplicate publishes")
    if m.get("unaccounted"):
        lines.append(f"  WARNING: {m['unaccounted']} messages unaccounted for, e.g. {m.get('unaccounted_ids', [])[:5]}")
    lines.append(f"  report: {os.path.join(run_dir, 'report.html')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    commands = {"run": cmd_run, "analyze": cmd_analyze, "validate": cmd_validate, "sweep": cmd_sweep,
                "nightly": cmd_nightly, "compare": cmd_compare, "record": cmd_record,
                "broker": cmd_broker}
    if args.command is None:
        parser.print_help()
        return EXIT_INPUT
    try:
        return commands[args.command](args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("sojourn: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
