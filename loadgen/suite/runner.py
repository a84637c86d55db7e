"""Runs a suite's entries in order into RESULTS_DIR/runs/, showing each entry's verdict as it
finishes, then writes junit.xml, history.json and index.html. The load and the analysis are
injected (the CLI passes its own `sojourn run` path), so the orchestration is tested without a
broker or Spark.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from analysis.slo import evaluate_slos
from loadgen.suite.junit import CaseResult, write_junit
from loadgen.suite.model import Suite, SuiteEntry
from loadgen.suite.retention import prune_runs, run_dir_name
from loadgen.suite.verdict import EntryResult, Regression, format_entry_result, regression_text

__all__ = ["NightlyOutcome", "run_suite", "read_runs", "write_history"]

RunLoad = Callable[[SuiteEntry, str], bool]  # (entry, run_dir) -> interrupted?
Analyze = Callable[[str], dict]  # run_dir -> summary; raises on failure
Say = Callable[[str], None]
NIGHTLY_JSON = "nightly.json"  # per run: the suite's SLO results


@dataclass
class NightlyOutcome:
    cases: list[CaseResult] = field(default_factory=list)
    run_dirs: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    interrupted: bool = False

    @property
    def failed(self) -> bool:
        return any(c.failure is not None for c in self.cases)


def _slo_case(classname: str, result: dict) -> CaseResult:
    if result.get("passed"):
        return CaseResult(classname, f"slo: {result['expr']}")
    value = result.get("value")
    measured = result.get("reason") or f"measured {value:.6g}"
    return CaseResult(classname, f"slo: {result['expr']}", f"{result['expr']} failed: {measured}")


def _entry_regressions(suite: Suite, results_dir: str, entry: str, run_dir: str) -> tuple[list[Regression], bool]:
    """This run's regressions against the entry's earlier runs (as write_history will find them,
    unless pruning to keep_runs then drops a run of the baseline), and whether it has a baseline."""
    from analysis.history import build_history

    runs = build_history(read_runs(results_dir, entry=entry), window=suite.baseline_runs, tolerance=suite.tolerance)
    this = next((r for r in runs["runs"] if r["run_dir"] == f"runs/{os.path.basename(run_dir)}"), None)
    if this is None:  # no summary.json to read back
        return [], False
    found = [Regression(k, this["metrics"][k], this["baseline"][k]) for k in this["regressions"]]
    return found, any(v is not None for v in this["baseline"].values())


def run_suite(
    suite: Suite,
    results_dir: str,
    *,
    run_load: RunLoad,
    analyze: Analyze,
    say: Say = lambda _m: None,
    show: Say = lambda _m: None,
) -> NightlyOutcome:
    """`say`: progress (the CLI's stderr); `show`: each entry's verdict as it finishes (stdout)."""
    runs_dir = os.path.join(results_dir, "runs")
    outcome = NightlyOutcome()
    for entry in suite.entries:
        classname = f"{suite.name}.{entry.name}"
        run_dir = os.path.join(runs_dir, run_dir_name(entry.name))
        os.makedirs(run_dir, exist_ok=True)
        outcome.run_dirs.append(run_dir)
        say(f"nightly {suite.name}: {entry.name} -> {run_dir}")
        started = time.monotonic()
        try:
            if run_load(entry, run_dir):
                _stopped(suite, entry, run_dir, outcome, started, analyze, say, show)
                break
            summary = analyze(run_dir)
        except KeyboardInterrupt:  # a stop signal while analysing: the run is whole, its summary is not
            _stopped(suite, entry, run_dir, outcome, started, None, say, show)
            break
        except Exception as exc:  # noqa: BLE001 - one failing scenario must not stop the suite
            outcome.cases.append(
                CaseResult(classname, "run", f"{type(exc).__name__}: {exc}", time.monotonic() - started)
            )
            show(format_entry_result(EntryResult(suite.name, entry.name, error=f"{type(exc).__name__}: {exc}")))
            continue
        status = (summary.get("run") or {}).get("status")
        outcome.cases.append(
            CaseResult(
                classname,
                "run",
                None if status in (None, "completed") else f"run status {status!r}",
                time.monotonic() - started,
            )
        )
        scenario_exprs = {s.get("expr") for s in summary.get("slo") or []}
        suite_results = evaluate_slos(summary, [e for e in entry.slo if e not in scenario_exprs])
        with open(os.path.join(run_dir, NIGHTLY_JSON), "w", encoding="utf-8") as f:
            json.dump({"suite": suite.name, "entry": entry.name, "slo": suite_results}, f, indent=2)
        slo_results = [*(summary.get("slo") or []), *suite_results]
        outcome.cases.extend(_slo_case(classname, result) for result in slo_results)
        regressions, has_baseline = _entry_regressions(suite, results_dir, entry.name, run_dir)
        show(
            format_entry_result(
                EntryResult(
                    suite.name,
                    entry.name,
                    status=status,
                    slos=slo_results,
                    regressions=regressions,
                    has_baseline=has_baseline,
                    baseline_runs=suite.baseline_runs,
                    tolerance=suite.tolerance,
                )
            )
        )
    return outcome


def _stopped(
    suite: Suite,
    entry: SuiteEntry,
    run_dir: str,
    outcome: NightlyOutcome,
    started: float,
    analyze: Analyze | None,
    say: Say,
    show: Say,
) -> None:
    """The suite was stopped (SIGINT, SIGTERM, SIGHUP) during `entry`: its case fails as interrupted,
    and what its load captured is analysed (with `analyze`) so that its report shows it; the summary
    says `interrupted`, which keeps it out of every baseline (analysis.history)."""
    outcome.interrupted = True
    outcome.cases.append(CaseResult(f"{suite.name}.{entry.name}", "run", "interrupted", time.monotonic() - started))
    show(format_entry_result(EntryResult(suite.name, entry.name, error="interrupted")))
    if analyze is None or not os.path.isfile(os.path.join(run_dir, "run.json")):
        return
    say(f"nightly {suite.name}: analyzing what {entry.name} captured before the stop")
    try:
        analyze(run_dir)
    except KeyboardInterrupt:
        say(f"nightly {suite.name}: stopped again; {run_dir} is not analysed (sojourn analyze {run_dir})")
    except Exception as exc:  # noqa: BLE001 - the stop is what the exit status reports
        say(f"nightly {suite.name}: analysing {run_dir} failed: {type(exc).__name__}: {exc}")


def read_runs(results_dir: str, *, entry: str | None = None) -> list[dict]:
    """Every analysed run under RESULTS_DIR/runs (only `entry`'s, by directory name, if given):
    its summary plus `run_dir` (relative to RESULTS_DIR) and `suite_slo` (from nightly.json).
    Unreadable runs are skipped."""
    runs_dir = os.path.join(results_dir, "runs")
    out = []
    for name in sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else []:
        if entry is not None and name.split("-", 1)[-1] != entry:
            continue
        path = os.path.join(runs_dir, name)
        try:
            with open(os.path.join(path, "summary.json"), encoding="utf-8") as f:
                summary = json.load(f)
        except (OSError, ValueError):
            continue
        try:
            with open(os.path.join(path, NIGHTLY_JSON), encoding="utf-8") as f:
                nightly = json.load(f)
        except (OSError, ValueError):
            nightly = {}
        out.append(
            {**summary, "run_dir": f"runs/{name}", "suite_slo": nightly.get("slo") or [], "entry": nightly.get("entry")}
        )
    return out


def write_history(suite: Suite, results_dir: str, outcome: NightlyOutcome) -> dict:
    """Prune, then write history.json, index.html and junit.xml; adds regression test cases
    for tonight's runs to `outcome`."""
    from analysis.history import build_history
    from analysis.report.index import render_index

    prune_runs(os.path.join(results_dir, "runs"), suite.keep_runs)
    history = build_history(read_runs(results_dir), window=suite.baseline_runs, tolerance=suite.tolerance)
    tonight = {f"runs/{os.path.basename(d)}" for d in outcome.run_dirs}
    for run in history["runs"]:
        if run["run_dir"] not in tonight:
            continue
        entry = run["run_dir"].split("-", 1)[-1]
        for key in run["regressions"]:
            base, value = run["baseline"][key], run["metrics"][key]
            outcome.regressions.append(f"{entry}: {key}")
            text = regression_text(Regression(key, value, base), suite.baseline_runs, suite.tolerance)
            outcome.cases.append(CaseResult(f"{suite.name}.{entry}", f"regression: {key}", text))
    _write_text(os.path.join(results_dir, "history.json"), json.dumps(history, indent=2))
    _write_text(os.path.join(results_dir, "index.html"), render_index(history, title=f"{suite.name} nightly"))
    write_junit(os.path.join(results_dir, "junit.xml"), suite.name, outcome.cases)
    return history


def _write_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
