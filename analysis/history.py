"""Trends across nightly runs: each run's key metrics, its baseline and its regression flags.

Pure: takes summary dicts (summary.json contents, optionally carrying `run_dir` and
`suite_slo` and `entry` added by the caller) and returns plain data for history.json and index.html.
The baseline of a metric is the median of the same scenario's previous `window` runs; a run
regresses when it is worse than the baseline by more than `tolerance` (relative), in the
metric's own direction: more sojourn is worse, less throughput is worse. Runs are grouped
by their suite entry (`entry`) when given, else by `run.scenario`, so one scenario run with
two sets of overrides keeps two baselines.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["Metric", "METRICS", "metric_values", "build_history", "regressed"]


class Metric(NamedTuple):
    key: str  # as shown and stored in history.json
    path: tuple[str, ...]  # where it sits in summary.json
    label: str
    higher_is_better: bool


METRICS: tuple[Metric, ...] = (
    Metric("throughput.ack_per_s", ("throughput", "ack_per_s"), "throughput ack/s", True),
    Metric("sojourn_ms.p50", ("sojourn_ms", "p50"), "sojourn p50 (ms)", False),
    Metric("sojourn_ms.p99", ("sojourn_ms", "p99"), "sojourn p99 (ms)", False),
    Metric("latency_ms.end_to_end.p99", ("latency_ms", "end_to_end", "p99"), "e2e p99 (ms)", False),
    Metric("messages.discarded_total", ("messages", "discarded_total"), "discarded", False),
    Metric("messages.unaccounted", ("messages", "unaccounted"), "unaccounted", False),
)


def _number(node: Any, path: Iterable[str]) -> float | None:
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    if isinstance(node, bool) or not isinstance(node, (int, float)) or math.isnan(node):
        return None
    return float(node)


def metric_values(summary: Mapping[str, Any]) -> dict[str, float | None]:
    return {m.key: _number(summary, m.path) for m in METRICS}


def regressed(metric: Metric, value: float | None, baseline: float | None, tolerance: float) -> bool:
    """Worse than `baseline` by more than `tolerance` x baseline. A zero baseline (e.g. no
    discards) makes any increase a regression for a lower-is-better metric."""
    if value is None or baseline is None:
        return False
    if metric.higher_is_better:
        return value < baseline * (1 - tolerance)
    return value > baseline * (1 + tolerance)


def _completed(summary: Mapping[str, Any]) -> bool:
    """The run ran to its end (a summary without a status counts as completed, as the verdict always took it)."""
    return (summary.get("run") or {}).get("status") in (None, "completed")


def _verdict(summary: Mapping[str, Any]) -> tuple[str, list[dict]]:
    slos = [*(summary.get("slo") or []), *(summary.get("suite_slo") or [])]
    if not _completed(summary):
        return "error", slos
    return ("fail" if any(not s.get("passed") for s in slos) else "pass"), slos


def build_history(summaries: Sequence[Mapping[str, Any]], *, window: int = 5, tolerance: float = 0.2) -> dict:
    """`{"window", "tolerance", "metrics", "runs": [...]}`, runs oldest first (by `run.t0_ns`, then run_id).

    Each run: run_id, scenario, t0_ns, run_dir, verdict ("pass"/"fail"/"error"), failed SLO
    expressions, `metrics` {key: value}, `baseline` {key: median or None} over the previous
    `window` runs of the same scenario (None for its first run), `regressions` [keys]. Only
    completed runs make baselines; a run with another status (interrupted, failed) is listed with
    its numbers and verdict "error", and is not flagged for regressions: it measured part of a run.
    """
    ordered = sorted(
        summaries, key=lambda s: ((s.get("run") or {}).get("t0_ns") or 0, str((s.get("run") or {}).get("run_id")))
    )
    past: dict[str, list[dict[str, float | None]]] = {}
    runs = []
    for summary in ordered:
        run = summary.get("run") or {}
        scenario = str(summary.get("entry") or run.get("scenario") or "?")
        values = metric_values(summary)
        previous = past.setdefault(scenario, [])[-window:]
        baseline: dict[str, float | None] = {}
        for m in METRICS:
            seen = [x for x in (v[m.key] for v in previous) if x is not None]
            baseline[m.key] = statistics.median(seen) if seen else None
        complete = _completed(summary)
        flags = [m.key for m in METRICS if complete and regressed(m, values[m.key], baseline[m.key], tolerance)]
        verdict, slos = _verdict(summary)
        runs.append(
            {
                "run_id": run.get("run_id"),
                "scenario": scenario,
                "t0_ns": run.get("t0_ns"),
                "run_dir": summary.get("run_dir"),
                "status": run.get("status"),
                "verdict": verdict,
                "failed_slo": [s.get("expr") for s in slos if not s.get("passed")],
                "metrics": values,
                "baseline": baseline,
                "regressions": flags,
            }
        )
        if complete:  # a run that was stopped, or failed, measured part of a run: no baseline for others
            past[scenario].append(values)
    return {
        "window": window,
        "tolerance": tolerance,
        "metrics": [{"key": m.key, "label": m.label, "higher_is_better": m.higher_is_better} for m in METRICS],
        "runs": runs,
    }
