"""The deeper run views: latency components over time, sojourn CDF and utilisation per
consumer, the queueing-model check (where it applies) with prefetch and CoDel advice, and
processing as drawn against as achieved, with the verdict chip when it ran long.

Rendered from the summary alone: `windows[].components_ms`, `consumers[].sojourn_quantiles_ms`,
`consumers[].utilisation` and the `model` block (docs/summary.md); a summary written before the
model's regimes (no `check`) shows the saturated formula everywhere, as it did then. Absent data
shows "no data" charts and an empty-table note, never an error.
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
    "processing_verdict",
    "COMPONENT_LABELS",
    "HOW_TO_READ_MODEL",
]

Summary = Mapping[str, Any]

#: (key in components_ms, legend label, colour), stacked bottom to top in this order.
COMPONENT_LABELS = (
    ("broker_network", "broker + network", "#4c78a8"),
    ("socket_wait", "socket wait (in the sojourn)", "#f58518"),
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
    "The queueing model (Little's law, docs/report.md) per consumer, from its own traces: p = mean processing time "
    "as achieved; R = p + the median time from an ack to the delivery it drew (a message already waiting in the "
    "broker goes out as soon as the ack frees its slot), or, where no delivery was drawn that way (the queue "
    "emptied), p + 2 × the fastest broker→consumer time. A consumer fed by a backlog stays busy only with "
    "prefetch ≥ R/p; below that it is busy n·p/R of the time at n/R msg/s, above it every message waits about "
    "(n − R/p)·p in the buffer. Those predictions hold only for a consumer kept fed: each row's regime says "
    "whether it was (saturated: busy ≥ 90 % or the buffer nearly never empty; starved: less busy while the queue "
    "held a backlog) or not (unsaturated: the offered load was below capacity, so nothing is predicted). "
    "Measured wait is the mean buffer sojourn."
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
    series = {key: _series(windows, "components_ms", key) for key, _, _ in COMPONENT_LABELS}
    waited = series["socket_wait"]
    if any(v is not None for v in waited):  # kernel receive stamps: the socket wait is a band of its own
        series["sojourn"] = [None if s is None else s - (w or 0.0) for s, w in zip(series["sojourn"], waited)]
    for key, label, colour in COMPONENT_LABELS:
        if not any(v is not None for v in series[key]) and key == "socket_wait":
            continue  # a run without kernel stamps: the sojourn band is the whole sojourn
        fig.add_trace(
            go.Scatter(
                x=t,
                y=series[key],
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
    predicted_by = {dig(m, "consumer"): as_number(dig(_prediction(m), "utilisation")) for m in _model_rows(summary)}
    predicted = [predicted_by.get(dig(c, "consumer")) for c in consumers]
    if any(p is not None for p in predicted):
        fig.add_trace(
            go.Bar(
                x=names,
                y=predicted,
                name="predicted (model, where it applies)",
                marker=dict(color="#bab0ac"),
                hovertemplate="%{x}: %{y:.1%} busy<extra>predicted</extra>",
            )
        )
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%")
    fig.update_xaxes(type="category")
    fig.update_layout(barmode="group", bargap=0.3)
    return fig


# --- model table and advice ----------------------------------------------------------


def _check(m: Mapping[str, Any]) -> Mapping[str, Any] | None:
    check = dig(m, "check")
    return check if isinstance(check, Mapping) else None


def _prediction(m: Mapping[str, Any]) -> Any:
    """The prediction to show: the check's where it applies (null elsewhere); a summary written
    before the regimes has only the saturated formula's."""
    check = _check(m)
    return dig(m, "predicted") if check is None else dig(check, "predicted")


def _vs(predicted: Any, measured: Any, fmt) -> str:
    return f"{fmt(predicted)} / {fmt(measured)}"


_SOURCE = {"ack_to_delivery": "ack→delivery", "transit_min": "2 × fastest transit"}


def _regime_cell(m: Mapping[str, Any]) -> str:
    check = _check(m)
    if check is None:
        return "—"
    reg = dig(m, "regime")
    why = dig(check, "regime_why")
    shown = f'<span title="{esc(why)}">{esc(reg)}</span>' if reg is not None else "—"
    note = dig(check, "not_applicable")
    return f'{shown}<br><span class="muted">{esc(note)}</span>' if note else shown


def model_table(summary: Summary, block: str = "consumers") -> str:
    by_phase = block == "phases"
    columns = [
        Column("consumer"),
        *([Column("phase")] if by_phase else []),
        Column("regime"),
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
        check = _check(m)
        pred = _prediction(m)
        if check is None:
            round_trip = fmt_ms(dig(m, "round_trip_ms"))
            saturation = fmt_count(dig(m, "predicted", "saturation_prefetch"))
        else:
            source = _SOURCE.get(str(dig(check, "round_trip_source")))
            round_trip = fmt_ms(dig(check, "round_trip_ms"))
            if source and as_number(dig(check, "round_trip_ms")) is not None:
                round_trip += f' <span class="muted">({esc(source)})</span>'
            saturation = fmt_count(dig(check, "saturation_prefetch"))
        rows.append(
            [
                f'<code style="white-space:nowrap">{esc(dig(m, "consumer"))}</code>',
                *([esc(dig(m, "phase"))] if by_phase else []),
                _regime_cell(m),
                shown,
                fmt_ms(dig(m, "processing_ms")),
                round_trip,
                saturation,
                _vs(dig(pred, "utilisation"), dig(m, "measured", "utilisation"), fmt_percent),
                _vs(dig(pred, "throughput_per_s"), dig(m, "measured", "throughput_per_s"), fmt_rate),
                _vs(dig(pred, "buffer_wait_ms"), dig(m, "measured", "buffer_wait_ms"), fmt_ms),
            ]
        )
    return html_table(columns, rows, empty="No consumer had enough measured deliveries for the model.")


def _prefetch_item(m: Mapping[str, Any]) -> str:
    advice = dig(m, "prefetch_advice")
    if isinstance(advice, Mapping):
        value, why = as_number(dig(advice, "prefetch")), dig(advice, "why")
    else:  # a summary from before prefetch_advice
        value, why = as_number(dig(m, "advice", "prefetch")), dig(m, "advice", "prefetch_why")
    return "" if value is None else f"<li><b>prefetch {fmt_count(value)}</b> — {esc(why)}</li>"


def advice_list(summary: Summary) -> str:
    items = []
    for m in _model_rows(summary):
        a = dig(m, "advice", default={})
        parts = [_prefetch_item(m)] if _prefetch_item(m) else []
        for key, label, why in (
            ("codel_interval_ms", "CoDel interval", "codel_interval_why"),
            ("codel_target_ms", "CoDel target", "codel_target_why"),
        ):
            value = as_number(dig(a, key))
            if value is None:
                continue
            parts.append(f"<li><b>{esc(label)} {fmt_ms(value)} ms</b> — {esc(dig(a, why))}</li>")
        if parts:
            items.append(f'<div class="advice"><h3>{esc(dig(m, "consumer"))}</h3><ul>{"".join(parts)}</ul></div>')
    if not items:
        return '<p class="empty">No advice: no consumer had enough measured deliveries.</p>'
    return "".join(items)


# --- processing: drawn vs achieved --------------------------------------------------


def _processing_rows(summary: Summary) -> list[tuple[Mapping[str, Any], str]]:
    """(row, phase label) for every model row that measured processing both ways."""
    rows = [(m, "whole run") for m in _model_rows(summary)]
    rows += [(m, str(dig(m, "phase", default="?"))) for m in _model_rows(summary, "phases")]
    return [(m, phase) for m, phase in rows if as_number(dig(m, "processing", "count"))]


def _overshoot(value: Any) -> str:
    n = as_number(value)
    return "—" if n is None else f"{n * 100:+.1f} %"


def processing_table(summary: Summary) -> str:
    columns = [
        Column("consumer"),
        Column("phase"),
        Column("deliveries", True),
        Column("drawn (ms)", True),
        Column("achieved (ms)", True),
        Column("overshoot", True),
    ]
    rows = []
    for m, phase in _processing_rows(summary):
        stretched = dig(m, "processing", "stretched") is True
        over = _overshoot(dig(m, "processing", "overshoot"))
        rows.append(
            [
                f'<code style="white-space:nowrap">{esc(dig(m, "consumer"))}</code>',
                esc(phase),
                fmt_count(dig(m, "processing", "count")),
                fmt_ms(dig(m, "processing", "drawn_ms")),
                fmt_ms(dig(m, "processing", "achieved_ms")),
                f'<span class="warn">{over} ✗</span>' if stretched else over,
            ]
        )
    return html_table(columns, rows, empty="No delivery recorded both its drawn and its achieved processing time.")


def processing_verdict(summary: Summary) -> str:
    """The verdict chip when simulated processing ran longer than drawn (the load generator's own CPU
    contention): the rows marked `processing.stretched`, worst first; nothing otherwise."""
    stretched = [(m, ph) for m, ph in _processing_rows(summary) if dig(m, "processing", "stretched") is True]
    if not stretched:
        return ""
    stretched.sort(key=lambda row: -(as_number(dig(row[0], "processing", "overshoot")) or 0))
    m, phase = stretched[0]
    worst = (
        f"{_overshoot(dig(m, 'processing', 'overshoot'))} for <code>{esc(dig(m, 'consumer'))}</code> "
        f"({esc(phase)}): {fmt_ms(dig(m, 'processing', 'achieved_ms'))} ms achieved for "
        f"{fmt_ms(dig(m, 'processing', 'drawn_ms'))} ms drawn"
    )
    more = f"; {len(stretched) - 1} more row{'s' if len(stretched) > 2 else ''}" if len(stretched) > 1 else ""
    limit = as_number(dig(summary, "model", "rules", "overshoot_limit"))
    return (
        f'<div class="chip warn"><b>processing ran long</b>: the load generator\'s own CPU contention stretched '
        f"simulated processing by more than {fmt_percent(limit if limit is not None else 0.05)} — {worst}{more}; "
        f"throughput and the model follow the achieved time, not the scenario's</div>"
    )


def _phase_part(summary: Summary) -> str:
    if not _model_rows(summary, "phases"):
        return ""
    return (
        '<h3 style="margin-top:16px">Per consumer and phase</h3><p class="howto">The same check over '
        "the deliveries received in each phase, for consumers that saw more than one: a phase that "
        "slows processing or the network changes p or R, and so the prefetch that fits.</p>"
        f'<div class="table-wrap">{model_table(summary, "phases")}</div>'
    )


def capacity_table(summary: Summary) -> str:
    """The capacity check made before the run (run.json's `capacity`), beside what each phase measured:
    offered against capacity, the utilisation and buffer wait it predicted, the ack rate and buffer
    sojourn measured (phases[], over the phase's deliveries after warm-up)."""
    measured = {(dig(p, "phase"), as_number(dig(p, "start_s"))): p for p in as_list(dig(summary, "phases"))}
    columns = [
        Column("phase"),
        Column("group"),
        Column("consumers", True),
        Column("offered (msg/s)", True),
        Column("capacity (msg/s)", True),
        Column("utilisation pred", True),
        Column("ack rate meas (msg/s)", True),
        Column("buffer wait (ms) pred / sojourn mean meas", True),
    ]
    rows = []
    for c in as_list(dig(summary, "run", "capacity")):
        phase = measured.get((dig(c, "phase"), as_number(dig(c, "start_s"))), {})
        growth = as_number(dig(c, "backlog_growth_per_s")) or 0
        utilisation = fmt_percent(dig(c, "utilisation"))
        if growth > 0:
            utilisation += f' <span class="muted">(backlog +{fmt_rate(growth)}/s)</span>'
        rows.append(
            [
                f'{esc(dig(c, "phase"))} <span class="muted">{fmt_count(dig(c, "start_s"))}–'
                f"{fmt_count(dig(c, 'end_s'))} s</span>",
                esc(dig(c, "group")),
                fmt_count(dig(c, "consumers")),
                fmt_rate(dig(c, "offered_per_s")),
                fmt_rate(dig(c, "capacity_per_s")),
                utilisation,
                fmt_rate(dig(phase, "throughput", "ack_per_s")),
                _vs(dig(c, "buffer_wait_ms"), dig(phase, "sojourn_ms", "mean"), fmt_ms),
            ]
        )
    if not rows:
        return ""
    return (
        '<h3 style="margin-top:16px">Before the run: the capacity check</h3><p class="howto">What '
        "<code>sojourn validate</code> and <code>sojourn run</code> predicted from the scenario alone (per "
        "consumer min(prefetch / R, 1 / p), R = p + the network's round trip; the groups share what the "
        "producers offer), beside what each phase measured.</p>"
        f'<div class="table-wrap">{html_table(columns, rows, empty="")}</div>'
    )


def model_body(summary: Summary) -> str:
    """The section's content: the predicted-vs-measured table, utilisation bars, the advice,
    and processing as drawn against as achieved."""
    chart_html = chart_div(utilisation_figure(summary), "utilisation", False)
    legacy = all(_check(m) is None for m in _model_rows(summary))
    advice_howto = (
        "Prefetch from R_p95 = p + 2 × the p95 over seconds of each second's smallest broker→consumer time "
        "(the round trip as it is in the slower seconds)."
        if legacy and _model_rows(summary)
        else "Prefetch ⌈R/p⌉ from the same R and p as the table: the fewest unacked deliveries that keep the "
        "consumer busy through a round trip."
    )
    return (
        f'<p class="howto">{esc(HOW_TO_READ_MODEL)}</p>'
        f'<div class="table-wrap">{model_table(summary)}</div>'
        f"{_phase_part(summary)}"
        f"{capacity_table(summary)}"
        f'<h3 style="margin-top:16px">Utilisation per consumer</h3><div class="chart">{chart_html}</div>'
        f'<h3 style="margin-top:16px">Advice</h3>'
        f'<p class="howto">{esc(advice_howto)}</p>'
        f"{advice_list(summary)}"
        f'<h3 style="margin-top:16px">Processing: drawn vs achieved</h3>'
        f'<p class="howto">The simulated processing time each delivery drew against the time it took (start to '
        f"end), over the same deliveries after warm-up. Above the drawn time by more than 5 % (✗, and a chip in "
        f"the verdict) the load generator's own CPU contention stretched it: the run measured a slower consumer "
        f"than the scenario asked for.</p>"
        f'<div class="table-wrap">{processing_table(summary)}</div>'
    )
