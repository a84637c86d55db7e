"""The deeper run views: latency components over time, sojourn CDF and utilisation per
consumer, and the queueing-model check with prefetch and CoDel advice.

Rendered from the summary alone: `windows[].components_ms`, `consumers[].sojourn_quantiles_ms`,
`consumers[].utilisation` and the `model` block (docs/summary.md). Absent data shows "no data"
charts and an empty-table note, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from ._format import as_list, as_number, dig, esc, fmt_count, fmt_ms, fmt_percent, fmt_rate, plot_text
from ._table import Column, html_table
from .charts import _base_layout, _decorate_timeline, _no_data, _series, _windows, chart_div

__all__ = [
    "components_figure",
    "sojourn_cdf_figure",
    "utilisation_figure",
    "model_body",
    "COMPONENT_LABELS",
    "HOW_TO_READ_MODEL",
]

Summary = Mapping[str, Any]

#: (key in components_ms, legend label, colour), stacked bottom to top in this order.
COMPONENT_LABELS = (
    ("broker_network", "broker + network", "#4c78a8"),
    ("sojourn", "buffer sojourn", "#e45756"),
    ("processing", "processing", "#54a24b"),
    ("ack_delay", "ack delay", "#b279a2"),
)
_CONSUMER_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)

HOW_TO_READ_MODEL = (
    "The queueing model (Little's law, docs/report.md) per consumer, from its own traces: p = mean processing time; "
    "R = p + 2 × the smallest broker→consumer time seen (a delivery that found the queue empty "
    "is pure transit, and the ack travels the same path back). A consumer stays busy only with "
    "prefetch ≥ R/p; below that it is busy n·p/R of the time at n/R msg/s, above it every "
    "message waits about (n − R/p)·p in the buffer. Predictions assume the queue never runs "
    "empty: a consumer that was offered less work than it could take measures below them. "
    "Measured wait is the mean buffer sojourn. If the queue never ran empty (a standing backlog), "
    "no delivery was pure transit: R is then overestimated, and so is the advised prefetch."
)


def _consumers(summary: Summary) -> list[Mapping[str, Any]]:
    return [c for c in as_list(summary.get("consumers")) if isinstance(c, Mapping)]


def _model_rows(summary: Summary, block: str = "consumers") -> list[Mapping[str, Any]]:
    return [c for c in as_list(dig(summary, "model", block)) if isinstance(c, Mapping)]


# --- charts --------------------------------------------------------------------------


def components_figure(summary: Summary) -> go.Figure:
    """Per-second means of each end-to-end component, stacked: where each second's latency went."""
    fig = _base_layout(go.Figure(), "time since start of run (s)", "mean per delivery (ms)")
    windows = _windows(summary)
    if not windows or all(not isinstance(dig(row, "components_ms"), Mapping) for _, row in windows):
        return _no_data(fig, "No latency components in this summary")
    t = [second for second, _ in windows]
    for key, label, colour in COMPONENT_LABELS:
        fig.add_trace(
            go.Scatter(
                x=t,
                y=_series(windows, "components_ms", key),
                name=label,
                mode="lines",
                stackgroup="latency",
                line=dict(width=0.5, color=colour),
                fillcolor=colour,
                connectgaps=False,
                hovertemplate=f"{label}: %{{y:.3~f}} ms<extra></extra>",
            )
        )
    fig.update_layout(hovermode="x unified")
    fig.update_yaxes(rangemode="tozero")
    return _decorate_timeline(fig, summary)


def sojourn_cdf_figure(summary: Summary) -> go.Figure:
    """One CDF line per consumer from its sojourn quantiles."""
    fig = _base_layout(go.Figure(), "buffer sojourn (ms)", "share of deliveries at or below")
    drawn = 0
    for c in _consumers(summary):
        qs = [as_number(q) for q in as_list(dig(c, "sojourn_quantiles_ms", "q"))]
        ms = [as_number(v) for v in as_list(dig(c, "sojourn_quantiles_ms", "ms"))]
        points = [(v, q) for v, q in zip(ms, qs) if v is not None and q is not None]
        if not points:
            continue
        name = plot_text(dig(c, "consumer", default="?"))
        fig.add_trace(
            go.Scatter(
                x=[v for v, _ in points],
                y=[q for _, q in points],
                name=name,
                mode="lines+markers",
                line=dict(shape="linear", width=2, color=_CONSUMER_COLOURS[drawn % len(_CONSUMER_COLOURS)]),
                marker=dict(size=4),
                hovertemplate=f"{name}<br>%{{y:.0%}} waited ≤ %{{x:.3~f}} ms<extra></extra>",
            )
        )
        drawn += 1
    if not drawn:
        return _no_data(fig, "No per-consumer sojourn quantiles in this summary")
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    fig.update_xaxes(rangemode="tozero")
    fig.update_layout(
        updatemenus=[
            dict(
                type="buttons",
                direction="left",
                x=1,
                xanchor="right",
                y=1.02,
                yanchor="bottom",
                showactive=True,
                pad=dict(t=0, r=0),
                buttons=[
                    dict(label="linear", method="relayout", args=[{"xaxis.type": "linear"}]),
                    dict(label="log", method="relayout", args=[{"xaxis.type": "log"}]),
                ],
            )
        ]
    )
    return fig


def utilisation_figure(summary: Summary) -> go.Figure:
    """Measured utilisation per consumer as bars, the model's prediction beside it."""
    fig = _base_layout(go.Figure(), "consumer", "utilisation")
    consumers = [c for c in _consumers(summary) if as_number(dig(c, "utilisation")) is not None]
    if not consumers:
        return _no_data(fig, "No consumer utilisation in this summary")
    names = [plot_text(dig(c, "consumer", default="?")) for c in consumers]
    measured = [as_number(dig(c, "utilisation")) for c in consumers]
    fig.add_trace(
        go.Bar(
            x=names,
            y=measured,
            name="measured",
            marker=dict(color="#4c78a8"),
            text=[fmt_percent(u) for u in measured],
            textposition="outside",
            hovertemplate="%{x}: %{y:.1%} busy<extra>measured</extra>",
        )
    )
    predicted_by = {dig(m, "consumer"): as_number(dig(m, "predicted", "utilisation")) for m in _model_rows(summary)}
    predicted = [predicted_by.get(dig(c, "consumer")) for c in consumers]
    if any(p is not None for p in predicted):
        fig.add_trace(
            go.Bar(
                x=names,
                y=predicted,
                name="predicted (model, with a backlog)",
                marker=dict(color="#bab0ac"),
                hovertemplate="%{x}: %{y:.1%} busy<extra>predicted</extra>",
            )
        )
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%")
    fig.update_xaxes(type="category")
    fig.update_layout(barmode="group", bargap=0.3)
    return fig


# --- model table and advice ----------------------------------------------------------


def _vs(predicted: Any, measured: Any, fmt) -> str:
    return f"{fmt(predicted)} / {fmt(measured)}"


def model_table(summary: Summary, block: str = "consumers") -> str:
    by_phase = block == "phases"
    columns = [
        Column("consumer"),
        *([Column("phase")] if by_phase else []),
        Column("prefetch", True),
        Column("p (ms)", True),
        Column("R (ms)", True),
        Column("saturation prefetch ⌈R/p⌉", True),
        Column("utilisation pred / meas", True),
        Column("throughput (msg/s) pred / meas", True),
        Column("buffer wait (ms) pred / meas", True),
    ]
    rows = []
    for m in _model_rows(summary, block):
        prefetch = dig(m, "prefetch")
        low = as_number(dig(m, "prefetch_min"))
        shown = fmt_count(prefetch)
        if low is not None and as_number(prefetch) is not None and low != prefetch:
            shown = f"{fmt_count(low)}–{shown}"
        if as_number(prefetch) == 0:
            shown = "unlimited"
        rows.append(
            [
                f'<code style="white-space:nowrap">{esc(dig(m, "consumer"))}</code>',
                *([esc(dig(m, "phase"))] if by_phase else []),
                shown,
                fmt_ms(dig(m, "processing_ms")),
                fmt_ms(dig(m, "round_trip_ms")),
                fmt_count(dig(m, "predicted", "saturation_prefetch")),
                _vs(dig(m, "predicted", "utilisation"), dig(m, "measured", "utilisation"), fmt_percent),
                _vs(dig(m, "predicted", "throughput_per_s"), dig(m, "measured", "throughput_per_s"), fmt_rate),
                _vs(dig(m, "predicted", "buffer_wait_ms"), dig(m, "measured", "buffer_wait_ms"), fmt_ms),
            ]
        )
    return html_table(columns, rows, empty="No consumer had enough measured deliveries for the model.")


def advice_list(summary: Summary) -> str:
    items = []
    for m in _model_rows(summary):
        a = dig(m, "advice", default={})
        parts = []
        for key, label, why, unit in (
            ("prefetch", "prefetch", "prefetch_why", ""),
            ("codel_interval_ms", "CoDel interval", "codel_interval_why", " ms"),
            ("codel_target_ms", "CoDel target", "codel_target_why", " ms"),
        ):
            value = as_number(dig(a, key))
            if value is None:
                continue
            shown = fmt_count(value) if key == "prefetch" else fmt_ms(value)
            parts.append(f"<li><b>{esc(label)} {shown}{unit}</b> — {esc(dig(a, why))}</li>")
        if parts:
            items.append(f'<div class="advice"><h3>{esc(dig(m, "consumer"))}</h3><ul>{"".join(parts)}</ul></div>')
    if not items:
        return '<p class="empty">No advice: no consumer had enough measured deliveries.</p>'
    return "".join(items)


def _phase_part(summary: Summary) -> str:
    if not _model_rows(summary, "phases"):
        return ""
    return (
        '<h3 style="margin-top:16px">Per consumer and phase</h3><p class="howto">The same check over '
        "the deliveries received in each phase, for consumers that saw more than one: a phase that "
        "slows processing or the network changes p or R, and so the prefetch that fits.</p>"
        f'<div class="table-wrap">{model_table(summary, "phases")}</div>'
    )


def model_body(summary: Summary) -> str:
    """The section's content: the predicted-vs-measured table, utilisation bars, the advice."""
    chart_html = chart_div(utilisation_figure(summary), "utilisation", False)
    return (
        f'<p class="howto">{esc(HOW_TO_READ_MODEL)}</p>'
        f'<div class="table-wrap">{model_table(summary)}</div>'
        f"{_phase_part(summary)}"
        f'<h3 style="margin-top:16px">Utilisation per consumer</h3><div class="chart">{chart_html}</div>'
        f'<h3 style="margin-top:16px">Advice</h3>'
        f'<p class="howto">Prefetch from R_p95 = p + 2 × the p95 over seconds of each second\'s smallest '
        f"broker→consumer time (the round trip as it is in the slower seconds).</p>"
        f"{advice_list(summary)}"
    )
