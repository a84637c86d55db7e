"""What `sojourn nightly` prints when an entry finishes: its verdict, then each failing SLO with
its metric, measured value and bound, each regression against its baseline, or that all passed.
Pure text; the runner calls it with the entry's results (docs/nightly.md shows the output)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from analysis.slo import SloError, parse_slo

__all__ = ["Regression", "EntryResult", "slo_failure_text", "regression_text", "format_entry_result"]


class Regression(NamedTuple):
    key: str  # a key metric, e.g. "sojourn_ms.p99"
    value: float
    baseline: float


@dataclass(frozen=True)
class EntryResult:
    suite: str
    entry: str
    error: str | None = None  # the run or its analysis failed: nothing was checked
    status: str | None = None  # run.json's status; anything but "completed" fails the entry
    slos: Sequence[Mapping[str, Any]] = ()  # evaluate_slos results: the scenario's, then the suite's
    regressions: Sequence[Regression] = ()
    has_baseline: bool = False  # False on an entry's first run: nothing to regress against
    baseline_runs: int = 5
    tolerance: float = 0.2


def slo_failure_text(result: Mapping[str, Any]) -> str:
    """`sojourn_ms.p99 = 12.5, bound < 5`; a metric with no value says so in place of the value."""
    expr = str(result.get("expr"))
    try:
        slo = parse_slo(expr)
    except SloError:
        return f"{expr}: {result.get('reason') or 'failed'}"
    bound = f"bound {slo.op} {slo.threshold:g}"
    value = result.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{slo.metric} has no numeric value in the summary, {bound}"
    return f"{slo.metric} = {value:.6g}, {bound}"


def regression_text(regression: Regression, baseline_runs: int, tolerance: float) -> str:
    """As junit.xml's regression failure: `sojourn_ms.p99 = 30, baseline 10 (median of the last 3
    runs), tolerance 20%`."""
    return (
        f"{regression.key} = {regression.value:.6g}, baseline {regression.baseline:.6g} "
        f"(median of the last {baseline_runs} runs), tolerance {tolerance:.0%}"
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_entry_result(r: EntryResult) -> str:
    """A verdict line, then one indented `FAIL` line per failed check."""
    title = f"nightly {r.suite}: {r.entry}:"
    if r.error is not None:
        return f"{title} FAIL, the run did not finish: {r.error} (no SLO checked)"
    failed_slos = [s for s in r.slos if not s.get("passed")]
    bad_status = r.status not in (None, "completed")
    if not failed_slos and not r.regressions and not bad_status:
        slos = f"all {_plural(len(r.slos), 'SLO')} passed" if r.slos else "no SLOs to check"
        if r.has_baseline:
            baseline = f"no regression against the baseline (median of the last {r.baseline_runs} runs)"
        else:
            baseline = "no baseline yet (the entry's first run)"
        return f"{title} PASS, {slos}, {baseline}"
    parts = []
    if bad_status:
        parts.append(f"run status {r.status!r}")
    if failed_slos:
        parts.append(f"{len(failed_slos)} of {_plural(len(r.slos), 'SLO')} failed")
    if r.regressions:
        parts.append(_plural(len(r.regressions), "regression"))
    lines = [f"{title} FAIL, {', '.join(parts)}"]
    if bad_status:
        lines.append(f"  FAIL run status {r.status!r} (not 'completed')")
    lines += [f"  FAIL SLO {slo_failure_text(s)}" for s in failed_slos]
    lines += [f"  FAIL regression {regression_text(g, r.baseline_runs, r.tolerance)}" for g in r.regressions]
    return "\n".join(lines)
