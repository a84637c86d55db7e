"""`sojourn sweep`: one run per value of one field, analysed on one Spark session, side by side."""

from __future__ import annotations

import json
import os

from loadgen.commands.common import (
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
    require_analysis,
    run_locust,
    say,
    spark_choice,
)

__all__ = ["cmd_sweep", "sweep_rows", "sweep_table"]


def _vary(text: str) -> tuple[str, list[str]]:
    path, sep, values = text.partition("=")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not path.strip() or len(vals) < 1:
        raise CliError(f"--vary {text!r}: expected PATH=V1,V2,... e.g. consumers.main.prefetch=1,26,51", EXIT_INPUT)
    return path.strip(), vals


def cmd_sweep(args) -> int:
    from loadgen.run.runinfo import default_run_dir

    require_analysis("run each variant with sojourn run --no-analyze and analyze them on a machine that has it")
    path, values = _vary(args.vary)
    scenarios = [load(args.scenario, [*args.overrides, f"{path}={v}"]) for v in values]  # all valid before any run
    check_metrics_ports(args.metrics_port, args.processes)
    out = args.out or default_run_dir(scenarios[0].name) + "-sweep"
    label = path.rsplit(".", 1)[-1]
    runs = [(v, os.path.join(out, f"{label}-{v}")) for v in values]
    for _v, run_dir in runs:
        if os.path.exists(os.path.join(run_dir, "traces")):
            raise CliError(f"{run_dir}: already holds a run's traces; choose another --out", EXIT_INPUT)
    interrupted = False
    internal_errors = 0  # runs a part of the load generator ended early (loadgen.run.guarded)
    for i, (scenario, (v, run_dir)) in enumerate(zip(scenarios, runs)):
        say(f"sweep {path}={v}")
        with broker_for(scenario) as for_run:  # per run: the swept field may be a broker setting
            os.makedirs(run_dir, exist_ok=True)
            interrupted = run_locust(
                for_run, run_dir, args.processes, verbose=args.verbose, metrics_port=args.metrics_port
            )
        if ended_by_internal_error(run_dir):  # said now; the sweep goes on, and exits 6 at the end
            internal_errors += 1
        if interrupted:  # as `sojourn run` does: analyse what ran (this run's part too), then exit 130/143
            runs = [r for r in runs[: i + 1] if os.path.isfile(os.path.join(r[1], "run.json"))]
            say(
                f"sweep interrupted after {i + 1} of {len(values)} runs"
                + ("; analyzing what ran" if runs else "; nothing ran to analyze")
            )
            if not runs:
                return EXIT_INTERRUPTED
            break

    from analysis.analyst import analyses

    say(f"analyzing {len(runs)} runs with Spark")
    summaries = []
    log = os.path.join(out, "spark.log")
    choice = spark_choice(args)
    with analysis_failures(log, choice), analyses([r for _v, r in runs], log_path=log, **choice) as analyze:
        for v, run_dir in runs:
            summaries.append((v, run_dir, analyze(run_dir)))
    rows = sweep_rows(summaries)
    table = sweep_table(path, rows)
    with open(os.path.join(out, "sweep.md"), "w", encoding="utf-8") as f:
        stopped = (
            f"\n\nInterrupted after {len(runs)} of {len(values)} runs; the last one is partial.\n"
            if interrupted
            else ""
        )
        f.write(f"# sweep of {path} over {args.scenario}\n\n{table}\n{stopped}")
    with open(os.path.join(out, "sweep.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "scenario": args.scenario,
                "vary": path,
                "overrides": args.overrides,
                "interrupted": interrupted,
                "rows": rows,
            },
            f,
            indent=2,
        )
    print(table)
    unaccounted = sum((s.get("messages") or {}).get("unaccounted") or 0 for _v, _d, s in summaries)
    if unaccounted:
        print(f"  WARNING: {unaccounted} messages unaccounted for; see each run's report")
    print(f"  runs and reports: {out}/{label}-*/report.html; table: {out}/sweep.md")
    if interrupted:
        return EXIT_INTERRUPTED
    if internal_errors:
        say(f"{internal_errors} of {len(runs)} runs were ended early by an internal error (see above)")
        return EXIT_INTERNAL
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
            net = next(
                (p for p in periods if (p.get("start_s") or 0) <= (phase.get("start_s") or 0) < (p.get("end_s") or 0)),
                None,
            )
            rows.append(
                {
                    "value": value,
                    "run_dir": run_dir,
                    "phase": phase.get("phase"),
                    "start_s": phase.get("start_s"),
                    "end_s": phase.get("end_s"),
                    "network_ms": None
                    if net is None
                    else [
                        (net.get("upstream") or {}).get("latency_ms"),
                        (net.get("downstream") or {}).get("latency_ms"),
                    ],
                    "ack_per_s": ack,
                    "utilisation": None
                    if ack is None or processing_ms is None
                    else ack * processing_ms / 1000.0 / consumers,
                    "sojourn_p50_ms": (phase.get("sojourn_ms") or {}).get("p50"),
                    "sojourn_p99_ms": (phase.get("sojourn_ms") or {}).get("p99"),
                    "e2e_p50_ms": ((phase.get("latency_ms") or {}).get("end_to_end") or {}).get("p50"),
                    "unaccounted": (summary.get("messages") or {}).get("unaccounted"),
                }
            )
    return rows


def sweep_table(path: str, rows: list[dict]) -> str:
    def num(v, fmt="{:,.1f}"):
        return "–" if v is None else fmt.format(v)

    lines = [
        f"| {path} | phase | s | network up/down (ms) | ack/s | utilisation | "
        f"sojourn p50 (ms) | sojourn p99 (ms) | e2e p50 (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        net = "–" if r["network_ms"] is None else "/".join(num(x, "{:g}") for x in r["network_ms"])
        lines.append(
            f"| {r['value']} | {r['phase']} | {num(r['start_s'], '{:g}')}–{num(r['end_s'], '{:g}')} "
            f"| {net} | {num(r['ack_per_s'])} | {num(r['utilisation'], '{:.1%}')} "
            f"| {num(r['sojourn_p50_ms'])} | {num(r['sojourn_p99_ms'])} | {num(r['e2e_p50_ms'], '{:,.0f}')} |"
        )
    return "\n".join(lines)
