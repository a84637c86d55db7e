"""compare.html: several runs side by side (prefetch sweeps, CoDel on/off A/B runs).

The settings that differ between the runs (from each run.json's resolved scenario), a metrics
table with each run's delta against the first, the sojourn distributions overlaid (from each
summary's sojourn_histogram) and the ack rate over time overlaid (from windows).
Self-contained like report.html: inline CSS, plotly.js inlined once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from analysis.history import METRICS, metric_values
from analysis.settings_diff import Missing, differing_settings, format_setting

from ._format import dig, esc, fmt_utc, plot_text
from ._table import Column, html_table
from .charts import _base_layout, _histogram_bins, _series, _windows, figure_html
from .page import _css

__all__ = ["compare_rows", "render_compare"]

Run = tuple[str, Mapping[str, Any]]  # (label, summary)
Scenario = Mapping[str, Any] | None  # run.json's resolved scenario; None without a run.json


def compare_rows(runs: Sequence[Run]) -> list[dict]:
    """Per metric: each run's value, its delta and relative delta vs the first run, and
    whether the change is better or worse in the metric's direction."""
    values = [metric_values(summary) for _label, summary in runs]
    rows = []
    for m in METRICS:
        first = values[0][m.key] if values else None
        cells = []
        for v in values:
            value = v[m.key]
            delta = None if value is None or first is None else value - first
            rel = None if delta is None or not first else delta / first
            better = None if not delta else (delta > 0) == m.higher_is_better
            cells.append({"value": value, "delta": delta, "relative": rel, "better": better})
        rows.append({"key": m.key, "label": m.label, "runs": cells})
    return rows


def _num(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:,.0f}" if abs(v) >= 1000 or float(v).is_integer() else f"{v:,.3g}" if abs(v) < 1 else f"{v:,.1f}"


def _cell(cell: dict, first: bool) -> str:
    text = esc(_num(cell["value"]))
    if first or cell["delta"] is None:
        return text
    if cell["delta"] == 0:
        return f'{text} <span class="muted">(same)</span>'
    cls = "muted" if cell["better"] is None else ("good" if cell["better"] else "bad")
    sign = "+" if cell["delta"] > 0 else ""
    rel = "" if cell["relative"] is None else f", {sign}{cell['relative']:.1%}"
    return f'{text} <span class="{cls}">({sign}{esc(_num(cell["delta"]))}{rel})</span>'


def _figure_html(fig: go.Figure, div_id: str, with_js: bool) -> str:
    return figure_html(fig, div_id, with_js, {"displaylogo": False, "responsive": True})


def _histogram_figure(runs: Sequence[Run]) -> go.Figure:
    """Share of deliveries per bin, one line per run: runs of different length compare."""
    fig = _base_layout(go.Figure(), "buffer sojourn (ms), bin midpoint", "share of deliveries")
    for label, summary in runs:
        lows, widths, counts = _histogram_bins(summary)
        total = sum(counts)
        if total <= 0:
            continue
        fig.add_trace(
            go.Scatter(
                x=[lo + w / 2 for lo, w in zip(lows, widths)],
                y=[c / total for c in counts],
                name=plot_text(label),
                mode="lines+markers",
                line_shape="hvh",
                hovertemplate=f"{plot_text(label)}: %{{y:.1%}}<extra></extra>",
            )
        )
    fig.update_yaxes(tickformat=".0%")
    fig.update_layout(
        updatemenus=[
            dict(
                type="buttons",
                direction="left",
                x=1,
                xanchor="right",
                y=1.02,
                yanchor="bottom",
                buttons=[
                    dict(label="log x", method="relayout", args=[{"xaxis.type": "log"}]),
                    dict(label="linear x", method="relayout", args=[{"xaxis.type": "linear"}]),
                ],
            )
        ]
    )
    return fig


def _throughput_figure(runs: Sequence[Run]) -> go.Figure:
    fig = _base_layout(go.Figure(), "time since start of run (s)", "acks per second")
    for label, summary in runs:
        windows = _windows(summary)
        if windows:
            fig.add_trace(
                go.Scatter(
                    x=[t for t, _ in windows],
                    y=_series(windows, "acked", zero=True),
                    name=plot_text(label),
                    mode="lines",
                )
            )
    fig.update_layout(hovermode="x unified")
    fig.update_yaxes(rangemode="tozero")
    return fig


def _settings_section(labels: Sequence[str], scenarios: Sequence[Scenario]) -> str:
    howto = (
        '<p class="howto">From each run\'s run.json: the resolved scenario, overrides applied, '
        "passwords masked. Only the settings (dotted paths as <code>--set</code> spells them) whose "
        "values differ are listed; – marks a setting a run does not have.</p>"
    )
    unknown = [label for label, s in zip(labels, scenarios) if s is None]
    note = f'<p class="howto">No run.json, settings not known: {esc(", ".join(unknown))}.</p>' if unknown else ""
    if len(scenarios) - len(unknown) < 2:
        body = '<p class="empty">Settings not compared: fewer than two runs have a run.json.</p>'
    else:
        diffs = differing_settings(scenarios)
        columns = [Column("setting")] + [Column(label) for label in labels]
        rows = [
            [f"<code>{esc(d.path)}</code>"]
            + [
                f'<span class="muted">{esc(format_setting(v))}</span>'
                if isinstance(v, Missing)
                else esc(format_setting(v))
                for v in d.values
            ]
            for d in diffs
        ]
        body = (
            f'<div class="table-wrap">{html_table(columns, rows, "")}</div>'
            if rows
            else '<p class="settings-identical">Settings identical: the runs\' resolved scenarios are the same.</p>'
        )
    return f'<section id="settings"><h2>Settings</h2>{howto}{note}{body}</section>'


def render_compare(
    runs: Sequence[Run],
    *,
    links: Mapping[str, str] | None = None,
    scenarios: Sequence[Scenario] | None = None,
    run_dirs: Sequence[str] | None = None,
) -> str:
    """The page as a string. `links` maps each label to its report (relative href); `scenarios`
    (run.json's `scenario` per run, or None) adds the settings that differ; `run_dirs` names each
    run's directory in the runs table."""
    if not runs:
        raise ValueError("compare needs at least one run")
    labels = [label for label, _ in runs]
    dirs = list(run_dirs) if run_dirs is not None else [None] * len(runs)

    def where(label: str, run_dir: str | None) -> str:
        href = (links or {}).get(label)
        text = esc(run_dir) if run_dir else "report"
        return f'<a href="{esc(href)}">{text}</a>' if href else (esc(run_dir) if run_dir else "–")

    head = "".join(
        f"<tr><td>{esc(label)}</td><td>{esc(dig(s, 'run', 'scenario'))}</td>"
        f"<td>{where(label, d)}</td><td>{esc(fmt_utc(dig(s, 'run', 't0_ns')))}</td></tr>"
        for (label, s), d in zip(runs, dirs)
    )
    runs_table = (
        "<table><thead><tr><th>run</th><th>scenario</th>"
        f"<th>{'run directory (report)' if run_dirs is not None else ''}</th><th>started</th></tr></thead>"
        f"<tbody>{head}</tbody></table>"
    )
    settings = "" if scenarios is None else _settings_section(labels, scenarios)
    columns = [Column("metric")] + [Column(label, numeric=True) for label in labels]
    rows = [[esc(r["label"])] + [_cell(c, i == 0) for i, c in enumerate(r["runs"])] for r in compare_rows(runs)]
    metrics = html_table(columns, rows, "No metrics")
    charts = (
        f'<section id="sojourn"><h2>Sojourn distribution</h2><div class="chart">'
        f"{_figure_html(_histogram_figure(runs), 'chart-sojourn', True)}</div>"
        f'<p class="howto">Share of each run\'s deliveries per sojourn bin (warm-up excluded). '
        f"A curve further right waits longer in the client buffer.</p></section>"
        f'<section id="throughput"><h2>Ack rate over time</h2><div class="chart">'
        f"{_figure_html(_throughput_figure(runs), 'chart-throughput', False)}</div></section>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>sojourn · compare {esc(' vs '.join(labels))}</title><style>{_css()}</style></head><body>"
        f'<header><h1><span class="product">sojourn</span>compare {len(runs)} runs</h1></header><main>'
        f'<section id="runs"><h2>Runs</h2><div class="table-wrap">{runs_table}</div></section>'
        f"{settings}"
        f'<section id="metrics"><h2>Key metrics</h2><p class="howto">Deltas are against the first run '
        f"({esc(labels[0])}); green is better, red worse, in each metric's direction.</p>"
        f'<div class="table-wrap">{metrics}</div></section>{charts}</main>'
        "<footer>Rendered by sojourn compare from summary.json and run.json files. Self-contained: opens offline."
        "</footer></body></html>\n"
    )
