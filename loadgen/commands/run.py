"""`sojourn run` (the load, then the analysis) and `sojourn analyze`, and the summary lines both print."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from loadgen.commands.common import (
    EXIT_BROKER,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SLO,
    CliError,
    analysis_failures,
    broker_for,
    check_metrics_ports,
    ended_by_internal_error,
    load,
    print_capacity,
    print_warnings,
    recover_traces,
    require_analysis,
    run_locust,
    say,
    spark_choice,
)

__all__ = ["cmd_run", "cmd_analyze", "analyze_runs", "format_summary"]


def cmd_run(args) -> int:
    from loadgen.run.runinfo import default_run_dir

    scenario = load(args.scenario, args.overrides)
    check_metrics_ports(args.metrics_port, args.processes)
    if not args.no_analyze:  # before the load, not after it
        require_analysis(
            "run the load only (sojourn run --no-analyze) and analyze the run directory on a machine that has it"
        )
    print_warnings(scenario, capture=False)
    print_capacity(scenario)
    run_dir = args.out or default_run_dir(scenario.name)
    if os.path.exists(os.path.join(run_dir, "traces")):
        raise CliError(f"{run_dir}: already holds a run's traces; choose another --out", EXIT_INPUT)
    with broker_for(scenario) as for_run:
        os.makedirs(run_dir, exist_ok=True)
        interrupted = run_locust(for_run, run_dir, args.processes, verbose=args.verbose, metrics_port=args.metrics_port)
    census_error = _census_error(run_dir)
    internal_error = ended_by_internal_error(run_dir, analysed=not args.no_analyze)
    if census_error:
        say(
            f"the census at the end failed ({census_error}): the messages still in the broker are not known "
            "by id and count as unaccounted"
        )
    if args.no_analyze:
        print(f"traces written to {run_dir}; analyze with: sojourn analyze {run_dir}")
        code = EXIT_OK
    else:
        code = analyze_runs([run_dir], spark_choice(args))
    if interrupted:
        return EXIT_INTERRUPTED
    if internal_error:  # the run ended early: its analysis, SLOs included, covers only what it captured
        return EXIT_INTERNAL
    return EXIT_BROKER if census_error else code


def _census_error(run_dir: str) -> str | None:
    """run.json's census_error: why the census at the end failed (None when it did not)."""
    from loadgen.run.runinfo import read_run_json

    try:
        error = read_run_json(run_dir).get("census_error")
    except (OSError, ValueError, AttributeError):
        return None
    return str(error) if error else None


def cmd_analyze(args) -> int:
    for run_dir in args.run_dirs:
        if not os.path.isfile(os.path.join(run_dir, "run.json")):
            raise CliError(f"{run_dir}: not a run directory (no run.json)", EXIT_INPUT)
    for run_dir in args.run_dirs:
        recover_traces(run_dir)
    if args.percentiles is not None:
        say(
            f"--percentiles {args.percentiles} is ignored: every percentile now comes from log-bucket "
            "histograms, within 0.4975 % of the exact value at any size (summary.json's `percentiles`)"
        )
    return analyze_runs(args.run_dirs, spark_choice(args))


def analyze_runs(run_dirs: list[str], spark: Mapping[str, Any]) -> int:
    """Analyse each run on one Spark (analysis.analyst.analyses, with `spark`: spark_choice), print
    each summary; the exit status is the worst: bad input (2) stops at that run, a failed SLO (1)
    does not."""
    from analysis.analyst import analyses

    code = EXIT_OK
    log = os.path.join(run_dirs[0], "spark.log")
    with analysis_failures(log, spark):
        say(
            f"analyzing {' '.join(run_dirs)} with Spark"
            if len(run_dirs) < 4
            else f"analyzing {len(run_dirs)} runs with Spark"
        )
        with analyses(run_dirs, log_path=log, progress=_progress, **spark) as analyze:
            for run_dir in run_dirs:
                if len(run_dirs) > 1:
                    say(f"analyzing {run_dir}")
                summary = analyze(run_dir)
                print(format_summary(summary, run_dir))
                if any(not s.get("passed") for s in summary.get("slo", [])):
                    code = EXIT_SLO
    return code


def _progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


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
        f"discarded {m.get('discarded_total', 0):,}  "
        + (
            f"not yet read {m.get('not_yet_read', 0):,}  "
            if summary.get("stream")  # a stream's run (analysis.report.stream.has_stream; no analysis import here)
            else f"left in broker {m.get('left_in_broker', 0):,}  "
        )
        + f"unaccounted {m.get('unaccounted', 0):,}",
        f"  throughput publish {t.get('publish_per_s', 0) or 0:,.1f}/s  "
        f"deliver {t.get('deliver_per_s', 0) or 0:,.1f}/s  "
        f"ack {t.get('ack_per_s', 0) or 0:,.1f}/s",
        f"  sojourn ms p50 {ms(sj.get('p50'))}  p95 {ms(sj.get('p95'))}  p99 {ms(sj.get('p99'))}  "
        f"max {ms(sj.get('max'))}",
        f"  e2e ms     p50 {ms(e2e.get('p50'))}  p99 {ms(e2e.get('p99'))}",
    ]
    for phase in summary.get("phases", []):
        psj = phase.get("sojourn_ms", {})
        span = f"{phase.get('start_s', 0):g}–{phase.get('end_s', 0):g} s"
        lines.append(
            f"  phase {phase.get('phase')} ({span}): sojourn p50 {ms(psj.get('p50'))} p99 {ms(psj.get('p99'))}"
        )
    for s in summary.get("slo", []):
        value = s.get("value")
        shown = "none" if value is None else f"{value:,.6g}"
        lines.append(f"  SLO {'PASS' if s.get('passed') else 'FAIL'}  {s.get('expr')}  (value {shown})")
    for group, f in sorted((summary.get("fidelity") or {}).items()):
        if not isinstance(f, dict):
            continue
        late = f.get("lateness_ms") or {}
        if f.get("behind"):
            lines.append(
                f"  WARNING: producer group {group} fell behind its schedule: p99 {ms(late.get('p99'))} ms "
                f"late (max {ms(late.get('max'))} ms); the results under-state the offered load"
            )
        replay = f["replay"] if isinstance(f.get("replay"), dict) else {}
        if replay.get("missing") or replay.get("duplicates"):
            lines.append(
                f"  WARNING: replay {group}: {replay.get('missing') or 0:,} rows missing, "
                f"{replay.get('duplicates') or 0:,} duplicate publishes"
            )
    if summary.get("run", {}).get("status") == "running":
        lines.append(
            f"  WARNING: the run did not finish (run.json still says running: it was killed); no census was taken and "
            f"trace rows its processes held are lost: {m['unknown_after_crash']:,} messages can not be placed "
            "(unknown_after_crash)"
        )
    missing = summary.get("run", {}).get("workers_missing") or []
    if missing:
        names = ", ".join(str(w.get("worker")) for w in missing if isinstance(w, dict))
        lines.append(
            f"  WARNING: the traces of {len(missing)} worker(s) never reached the master ({names}; run.json, "
            f"workers_missing): {m.get('unknown_workers_missing', 0):,} messages can not be placed "
            "(unknown_workers_missing)"
        )
    if m.get("unaccounted"):
        lines.append(f"  WARNING: {m['unaccounted']} messages unaccounted for, e.g. {m.get('unaccounted_ids', [])[:5]}")
    lines.append(f"  report: {os.path.join(run_dir, 'report.html')}")
    return "\n".join(lines)
