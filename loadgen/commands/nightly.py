"""`sojourn nightly`: a suite of scenarios with SLOs, JUnit, history and trends (docs/nightly.md)."""

from __future__ import annotations

import contextlib
import os

from loadgen.commands.common import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SLO,
    CliError,
    analysis_failures,
    broker_for,
    check_metrics_ports,
    load,
    require_analysis,
    run_locust,
    say,
    spark_choice,
)
from loadgen.commands.run import format_summary

__all__ = ["cmd_nightly"]


def cmd_nightly(args) -> int:
    from loadgen.scenario import ScenarioError
    from loadgen.suite import LockHeld, ResultsLock, load_suite, with_overrides
    from loadgen.suite.runner import run_suite, write_history

    require_analysis("run the suite on a machine that has it: its verdicts are the analysis's")
    try:
        suite = with_overrides(load_suite(args.suite), args.overrides)
    except ScenarioError as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    scenarios = [load(e.scenario_path, list(e.overrides)) for e in suite.entries]  # all valid before any run
    scenario_of = {id(e): s for e, s in zip(suite.entries, scenarios)}
    check_metrics_ports(args.metrics_port)
    lock = ResultsLock(args.out)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    sessions = contextlib.ExitStack()  # the Spark session, opened at the first analysis
    analyze = None

    def run_load(entry, run_dir: str) -> bool:
        with broker_for(scenario_of[id(entry)]) as for_run:  # per entry: each scenario names its own broker
            return run_locust(for_run, run_dir, verbose=args.verbose, metrics_port=args.metrics_port)

    def analyze_run(run_dir: str) -> dict:
        nonlocal analyze
        from analysis.analyst import analyses

        log = os.path.join(args.out, "spark.log")
        choice = spark_choice(args)
        with analysis_failures(log, choice):
            if analyze is None:  # a Spark of this process is sized for the first run: a suite's runs are alike
                analyze = sessions.enter_context(analyses([run_dir], log_path=log, **choice))
            summary = analyze(run_dir)
        print(format_summary(summary, run_dir), flush=True)
        return summary

    def show(text: str) -> None:  # an entry's verdict, right under its summary: flushed for a log file
        print(text, flush=True)

    try:
        outcome = run_suite(suite, args.out, run_load=run_load, analyze=analyze_run, say=say, show=show)
        write_history(suite, args.out, outcome)
    finally:
        sessions.close()
        lock.release()
    failures = [f"{c.classname} {c.name}" for c in outcome.cases if c.failure]
    print(
        f"nightly {suite.name}: {len(suite.entries)} scenarios, {len(failures)} failed checks"
        + "".join(f"\n  FAIL {f}" for f in failures)
    )
    print(f"  junit: {os.path.join(args.out, 'junit.xml')}  trends: {os.path.join(args.out, 'index.html')}")
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_SLO if outcome.failed else EXIT_OK
