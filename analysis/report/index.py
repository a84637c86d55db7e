"""index.html of a nightly results directory: every run with its verdict and, under a run that
did not pass, why (in text, not a hover), and each key metric as a trend across nights with
regressions against the baseline marked.

Rendered from `analysis.history.build_history` output alone; self-contained like report.html.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import plotly.graph_objects as go

from analysis.slo import SloError, parse_slo

from ._format import esc, fmt_utc
from .charts import _base_layout
from .compare import _figure_html, _num
from .page import _css

__all__ = ["render_index", "run_reasons"]

_VERDICT_CLASS = {"pass": "good", "fail": "bad", "error": "warn"}
# A run's reason line sits under its row, joined to it: no rule between them.
_INDEX_CSS = "tr.has-reason td { border-bottom: none; } tr.reason td { padding-top: 0; font-size: 13px; }"


def _when(t0_ns: Any) -> datetime | None:
    return None if not isinstance(t0_ns, (int, float)) else datetime.fromtimestamp(t0_ns / 1e9, tz=timezone.utc)


def _trend_figure(history: Mapping[str, Any], metric: Mapping[str, Any]) -> go.Figure:
    key = metric["key"]
    fig = _base_layout(go.Figure(), "run start (UTC)", metric["label"])
    fig.update_layout(height=320)
    by_scenario: dict[str, list[dict]] = {}
    for run in history["runs"]:
        by_scenario.setdefault(run["scenario"], []).append(run)
    for scenario, runs in by_scenario.items():
        x = [_when(r["t0_ns"]) for r in runs]
        fig.add_trace(
            go.Scatter(
                x=x, y=[r["metrics"].get(key) for r in runs], name=scenario, mode="lines+markers", legendgroup=scenario
            )
        )
        flagged = [r for r in runs if key in r["regressions"]]
        if flagged:
            fig.add_trace(
                go.Scatter(
                    x=[_when(r["t0_ns"]) for r in flagged],
                    y=[r["metrics"].get(key) for r in flagged],
                    name=f"{scenario}: regression",
                    mode="markers",
                    legendgroup=scenario,
                    marker=dict(symbol="x", size=13, color="#b3261e", line=dict(width=2)),
                    customdata=[r["baseline"].get(key) for r in flagged],
                    hovertemplate="regression: %{y:.4g} vs baseline %{customdata:.4g}<extra></extra>",
                )
            )
    return fig


def _slo_reason(expr: str, run: Mapping[str, Any]) -> str:
    """`SLO failed: sojourn_ms.p99 < 5 (measured 12.5)`: history.json keeps the value of the key
    metrics only, so another metric's SLO shows its expression alone."""
    try:
        value = run["metrics"].get(parse_slo(expr).metric)
    except SloError:
        value = None
    return f"SLO failed: {expr}" + ("" if value is None else f" (measured {_num(value)})")


def _regression_reason(key: str, run: Mapping[str, Any], metrics: Mapping[str, Mapping[str, Any]]) -> str:
    value, base = run["metrics"].get(key), run["baseline"].get(key)
    change = f", {(value - base) / base:+.0%}" if value is not None and base else ""
    worse = "higher" if not metrics.get(key, {}).get("higher_is_better") else "lower"
    return f"regression: {key} {_num(value)} vs baseline {_num(base)} ({worse} is worse{change})"


def run_reasons(run: Mapping[str, Any], metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Why a run did not pass, as plain text: its status when it did not complete, each failed
    SLO, each regression against its baseline. Empty for a run that passed."""
    reasons = []
    if run.get("verdict") == "error":
        reasons.append(f"run did not complete: status {run.get('status')!r}")
    reasons += [_slo_reason(str(expr), run) for expr in run.get("failed_slo") or []]
    reasons += [_regression_reason(key, run, metrics) for key in run.get("regressions") or []]
    return reasons


def _runs_table(history: Mapping[str, Any]) -> str:
    metrics = history["metrics"]
    by_key = {m["key"]: m for m in metrics}
    width = 3 + len(metrics)
    head = "<th>run (UTC)</th><th>scenario</th><th>verdict</th>" + "".join(
        f'<th class="num">{esc(m["label"])}</th>' for m in metrics
    )
    rows = []
    for run in reversed(history["runs"]):
        link = f"{run['run_dir']}/report.html" if run.get("run_dir") else None
        when = esc(fmt_utc(run["t0_ns"]))
        cells = [f'<a href="{esc(link)}">{when}</a>' if link else when, esc(run["scenario"])]
        verdict = run["verdict"] + (" + regression" if run["regressions"] else "")
        cls = "bad" if run["regressions"] else _VERDICT_CLASS.get(run["verdict"], "muted")
        cells.append(f'<span class="badge {cls}">{esc(verdict)}</span>')
        for m in metrics:
            value, base = run["metrics"].get(m["key"]), run["baseline"].get(m["key"])
            text = esc(_num(value))
            if m["key"] in run["regressions"]:
                text = (
                    f'<span class="bad" title="baseline {esc(_num(base))}">{text} ▲</span>'
                    if not m["higher_is_better"]
                    else f'<span class="bad" title="baseline {esc(_num(base))}">{text} ▼</span>'
                )
            cells.append(text)
        reasons = run_reasons(run, by_key)
        rows.append(
            f"<tr{' class=has-reason' if reasons else ''}>"
            + "".join(f"<td{' class=num' if i >= 3 else ''}>{c}</td>" for i, c in enumerate(cells))
            + "</tr>"
        )
        if reasons:
            text = " · ".join(esc(r) for r in reasons)
            rows.append(
                f'<tr class="reason"><td></td><td colspan="{width - 1}"><span class="{cls}">{text}</span></td></tr>'
            )
    body = "".join(rows) or f'<tr><td colspan="{width}">No runs yet</td></tr>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_index(history: Mapping[str, Any], *, title: str = "nightly") -> str:
    charts = "".join(
        '<div class="chart">'
        f"{_figure_html(_trend_figure(history, m), 'trend-' + m['key'].replace('.', '-'), i == 0)}"
        "</div>"
        for i, m in enumerate(history["metrics"])
    )
    flagged = sum(bool(r["regressions"]) for r in history["runs"])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>sojourn · {esc(title)}</title><style>{_css()}\n{_INDEX_CSS}</style></head><body>"
        f'<header><h1><span class="product">sojourn</span>{esc(title)}</h1>'
        f"<p>{len(history['runs'])} runs; {flagged} with a regression. Baseline: the median of the same "
        f"scenario's previous {history['window']} runs; a regression is worse than it by more than "
        f"{history['tolerance']:.0%}.</p></header><main>"
        f'<section id="runs"><h2>Runs</h2><p class="howto">Newest first. Under a run that did not pass, why: '
        f"its status, each failed SLO, each regression with its baseline. A flagged value is a regression "
        f"(▲ higher is worse, ▼ lower is worse).</p>"
        f'<div class="table-wrap scroll">{_runs_table(history)}</div></section>'
        f'<section id="trends"><h2>Trends</h2>{charts}</section></main>'
        "<footer>Rendered by sojourn nightly from history.json. Self-contained: opens offline.</footer>"
        "</body></html>\n"
    )
