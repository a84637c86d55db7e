"""The report's plotly figures, each built from the summary dict alone.

Every time chart carries the same context: timeline phases as labelled bands (the
implicit `base` phase is left plain), warm-up as a grey band, the end of the
measurement window, and events as dashed vertical lines with hover text.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from ._format import as_list, as_number, dig, fmt_count, fmt_ms, plot_text
from .network import mark_impairments

__all__ = [
    "throughput_figure",
    "sojourn_over_time_figure",
    "sojourn_histogram_figure",
    "phase_colours",
    "chart_div",
    "TIMELINE_PHASE_KINDS",
]

Summary = Mapping[str, Any]

#: Event kinds already visible as phase bands; drawing them as lines too only adds clutter.
TIMELINE_PHASE_KINDS = frozenset({"phase_start", "phase_end"})

_PHASE_COLOURS = ("#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5", "#d9d9d9")
_WARMUP_COLOUR = "#9e9e9e"
_EVENT_COLOUR = "#6d4c41"
_CRASH_COLOUR = "#d62728"
_MAX_EVENT_LINES = 200  # beyond this the lines hide the data; the events table lists them all
_MAX_DENSE_WINDOWS = 1_000_000
_HEIGHT_PX = 420


def _base_layout(fig: go.Figure, x_title: str, y_title: str) -> go.Figure:
    fig.update_layout(  # the template is the page's, put in as the figure is written (figure_html)
        height=_HEIGHT_PX,
        margin=dict(l=60, r=20, t=70, b=50),
        legend=dict(orientation="h", x=0, y=1.02, xanchor="left", yanchor="bottom"),
        xaxis_title=x_title,
        yaxis_title=y_title,
        font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12),
    )
    return fig


@functools.cache
def _template() -> dict[str, Any]:
    """plotly's `plotly_white` template as plain data, read once: set on each figure, plotly checks
    the whole template again (17 ms a figure, a third of a quickstart report's rendering)."""
    return pio.templates["plotly_white"].to_plotly_json()


def figure_html(figure: go.Figure, div_id: str, with_plotlyjs: bool, config: Mapping[str, Any]) -> str:
    """`figure` as an HTML `<div id="DIV_ID">` in the page's template (`plotly_white`), with plotly.js
    inlined when `with_plotlyjs` (a page inlines it once, with its first chart)."""
    spec = figure.to_plotly_json()
    spec["layout"] = {**spec.get("layout", {}), "template": _template()}
    return pio.to_html(
        spec,
        validate=False,  # checked as it was built, but for the template, which is plotly's own
        full_html=False,
        include_plotlyjs=with_plotlyjs,
        div_id=div_id,
        default_height=f"{figure.layout.height or _HEIGHT_PX}px",
        config=dict(config),
    )


def chart_div(figure: go.Figure, key: str, with_plotlyjs: bool) -> str:
    """The chart's HTML as `<div id="chart-KEY">`; the page inlines plotly.js once, with its first chart."""
    config = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"filename": f"sojourn-{key}"}}
    return figure_html(figure, f"chart-{key}", with_plotlyjs, config)


def _no_data(fig: go.Figure, message: str) -> go.Figure:
    fig.add_annotation(
        text=plot_text(message),
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
        font=dict(size=14, color="#777"),
    )
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False)
    return fig


# --- windows -------------------------------------------------------------------------


def _windows(summary: Summary) -> list[tuple[int, Mapping[str, Any]]]:
    """Windows as (second, row), sorted, with seconds missing between rows filled by `{}`.

    The contract promises one row per second, but a gap must read as "nothing happened"
    (zero messages, no percentile) rather than as a line drawn across it.
    """
    rows: dict[int, Mapping[str, Any]] = {}
    for row in as_list(summary.get("windows")):
        t = as_number(dig(row, "t_s"))
        if t is not None:
            rows[int(t)] = row
    if not rows:
        return []
    first, last = min(rows), max(rows)
    if last - first > _MAX_DENSE_WINDOWS:
        return sorted(rows.items())
    return [(t, rows.get(t, {})) for t in range(first, last + 1)]


def _series(windows: list[tuple[int, Mapping[str, Any]]], *path: str, zero: bool = False) -> list:
    values = [as_number(dig(row, *path)) for _, row in windows]
    return [0 if (zero and v is None) else v for v in values]


# --- timeline context (phases, warm-up, events) --------------------------------------


def _phase_bands(summary: Summary) -> list[tuple[str, float, float]]:
    bands = []
    end_default = as_number(dig(summary, "run", "duration_s"))
    for phase in as_list(summary.get("phases")):
        name = dig(phase, "phase")
        if name is None or str(name) == "base":
            continue
        start = as_number(dig(phase, "start_s"))
        end = as_number(dig(phase, "end_s"))
        if end is None:
            end = end_default
        if start is None or end is None or end <= start:
            continue
        bands.append((str(name), float(start), float(end)))
    return bands


def phase_colours(summary: Summary) -> dict[str, str]:
    """Band colour per shaded phase name, so tables can show the same colour as the charts."""
    colours: dict[str, str] = {}
    for name, _, _ in _phase_bands(summary):
        if name not in colours:
            colours[name] = _PHASE_COLOURS[len(colours) % len(_PHASE_COLOURS)]
    return colours


def _band(x0: float, x1: float, label: str, colour: str, opacity: float, name: str) -> dict:
    return dict(
        type="rect",
        xref="x",
        yref="paper",
        x0=x0,
        x1=x1,
        y0=0,
        y1=1,
        fillcolor=colour,
        opacity=opacity,
        line=dict(width=0),
        layer="below",
        name=name,
        label=dict(text=plot_text(label), textposition="top center", font=dict(size=11, color="#333")),
    )


def _timeline_events(summary: Summary) -> list[Mapping[str, Any]]:
    events = []
    for event in as_list(summary.get("events")):
        if as_number(dig(event, "t_s")) is None:
            continue
        if str(dig(event, "kind", default="")) in TIMELINE_PHASE_KINDS:
            continue
        events.append(event)
    events.sort(key=lambda e: e["t_s"])
    return events[:_MAX_EVENT_LINES]


def _event_hover(event: Mapping[str, Any]) -> str:
    parts = [f"<b>{plot_text(dig(event, 'kind', default='event'))}</b> at {event['t_s']:g} s"]
    for key in ("name", "source", "value"):
        value = dig(event, key)
        if value is not None and value != "":
            parts.append(f"{key}: {plot_text(value)}")
    return "<br>".join(parts)


def _decorate_timeline(fig: go.Figure, summary: Summary) -> go.Figure:
    """Shade warm-up and phases, mark the end of measurement and every event."""
    # The shapes are set at once: plotly checks every shape again on each add_shape, which took
    # tens of seconds for a run with a few hundred events.
    shapes = []
    warmup = as_number(dig(summary, "run", "warmup_s"))
    if warmup is not None and warmup > 0:
        shapes.append(_band(0, float(warmup), "warm-up", _WARMUP_COLOUR, 0.18, name="warm-up"))
    colours = phase_colours(summary)
    for name, start, end in _phase_bands(summary):
        shapes.append(_band(start, end, name, colours[name], 0.35, name=f"phase {name}"))

    duration = as_number(dig(summary, "run", "duration_s"))
    if duration is not None and duration > 0:
        shapes.append(
            dict(
                type="line",
                xref="x",
                yref="paper",
                x0=duration,
                x1=duration,
                y0=0,
                y1=1,
                line=dict(color="#444", width=1, dash="dot"),
                name="end of measurement",
                label=dict(
                    text="end of measurement ",
                    textposition="end",
                    textangle=0,
                    yanchor="top",
                    xanchor="right",
                    font=dict(size=10, color="#444"),
                ),
            )
        )

    events = _timeline_events(summary)
    shapes += [
        dict(
            type="line",
            xref="x",
            yref="paper",
            x0=event["t_s"],
            x1=event["t_s"],
            y0=0,
            y1=1,
            line=dict(color=_EVENT_COLOUR, width=1, dash="dash"),
            name=f"event {plot_text(dig(event, 'kind', default=''))}",
        )
        for event in events
    ]
    fig.update_layout(shapes=[*fig.layout.shapes, *shapes])
    if events:
        # Shapes cannot carry hover text, so a marker on a hidden 0..1 axis does it for them.
        fig.add_trace(
            go.Scatter(
                x=[e["t_s"] for e in events],
                y=[0.98] * len(events),
                yaxis="y2",
                mode="markers",
                name="events",
                marker=dict(symbol="triangle-down", size=10, color=_EVENT_COLOUR),
                hovertext=[_event_hover(e) for e in events],
                hoverinfo="text",
            )
        )
        fig.update_layout(yaxis2=dict(overlaying="y", range=[0, 1], visible=False, fixedrange=True))
        crashes = [e for e in events if dig(e, "kind") == "consumer_crash"]
        if crashes:  # a crash requeues what the consumer held: mark it apart from the other events
            fig.add_trace(
                go.Scatter(
                    x=[e["t_s"] for e in crashes],
                    y=[0.9] * len(crashes),
                    yaxis="y2",
                    mode="markers",
                    name="consumer crash",
                    marker=dict(symbol="x", size=11, color=_CRASH_COLOUR),
                    hovertext=[_event_hover(e) for e in crashes],
                    hoverinfo="text",
                )
            )
    return mark_impairments(fig, summary)


# --- figures -------------------------------------------------------------------------


def throughput_figure(summary: Summary) -> go.Figure:
    """Published, delivered and acked messages per one-second window."""
    fig = _base_layout(go.Figure(), "time since start of run (s)", "messages per second")
    windows = _windows(summary)
    if not windows:
        return _no_data(fig, "No per-second windows in this summary")
    t = [second for second, _ in windows]
    for key, label, colour in (
        ("published", "published", "#1f77b4"),
        ("delivered", "delivered", "#ff7f0e"),
        ("acked", "acked", "#2ca02c"),
    ):
        fig.add_trace(
            go.Scatter(
                x=t,
                y=_series(windows, key, zero=True),
                name=label,
                mode="lines",
                line=dict(color=colour, width=2),
                hovertemplate=f"{label}: %{{y:,}} msg/s<extra></extra>",
            )
        )
    fig.update_layout(hovermode="x unified")
    fig.update_yaxes(rangemode="tozero")
    return _decorate_timeline(fig, summary)


def sojourn_over_time_figure(summary: Summary) -> go.Figure:
    """Buffer sojourn p50/p95/p99/max per window, with a linear/log switch."""
    fig = _base_layout(go.Figure(), "time since start of run (s)", "buffer sojourn (ms)")
    windows = _windows(summary)
    if not windows:
        return _no_data(fig, "No per-second windows in this summary")
    t = [second for second, _ in windows]
    for key, colour, dash in (
        ("p50", "#2ca02c", "solid"),
        ("p95", "#ff7f0e", "solid"),
        ("p99", "#d62728", "solid"),
        ("max", "#7f7f7f", "dot"),
    ):
        fig.add_trace(
            go.Scatter(
                x=t,
                y=_series(windows, "sojourn_ms", key),
                name=key,
                mode="lines+markers" if len(t) <= 60 else "lines",
                marker=dict(size=4),
                connectgaps=False,
                line=dict(color=colour, width=2, dash=dash),
                hovertemplate=f"{key}: %{{y:.3~f}} ms<extra></extra>",
            )
        )
    if all(trace.y is None or all(v is None for v in trace.y) for trace in fig.data):
        fig.add_annotation(
            text="No delivery started processing in any window",
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            showarrow=False,
            font=dict(size=14, color="#777"),
        )
    fig.update_layout(
        hovermode="x unified",
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
                    dict(label="linear", method="relayout", args=[{"yaxis.type": "linear"}]),
                    dict(label="log", method="relayout", args=[{"yaxis.type": "log"}]),
                ],
            )
        ],
    )
    fig.update_yaxes(rangemode="tozero")
    return _decorate_timeline(fig, summary)


def _histogram_bins(summary: Summary) -> tuple[list[float], list[float], list[float]]:
    """(lower edges, widths, counts) of the valid bins; empty lists if the histogram is unusable."""
    edges = [as_number(e) for e in as_list(dig(summary, "sojourn_histogram", "edges_ms"))]
    counts = [as_number(c) for c in as_list(dig(summary, "sojourn_histogram", "counts"))]
    n = min(len(edges) - 1, len(counts))
    lows, widths, kept = [], [], []
    for i in range(max(n, 0)):
        lo, hi, count = edges[i], edges[i + 1], counts[i]
        if lo is None or hi is None or hi <= lo:
            continue
        lows.append(float(lo))
        widths.append(float(hi - lo))
        kept.append(count or 0)
    return lows, widths, kept


def sojourn_histogram_figure(summary: Summary) -> go.Figure:
    """Deliveries per sojourn bin; bins of unequal width are shown side by side, labelled."""
    fig = _base_layout(go.Figure(), "buffer sojourn (ms)", "deliveries")
    lows, widths, counts = _histogram_bins(summary)
    total = sum(counts)
    if not counts or total <= 0:
        return _no_data(fig, "No sojourn histogram (no deliveries were measured)")
    labels = [f"{fmt_ms(lo)}–{fmt_ms(lo + w)}" for lo, w in zip(lows, widths)]
    hover = [f"{label} ms: {fmt_count(c)} deliveries ({c / total:.1%})" for label, c in zip(labels, counts)]
    uniform = max(widths) <= 1.5 * min(widths)
    if uniform:
        fig.add_trace(
            go.Bar(
                x=lows,
                y=counts,
                width=widths,
                offset=0,
                name="deliveries per bin",
                marker=dict(color="#4c78a8", line=dict(width=0)),
                hovertext=hover,
                hoverinfo="text",
            )
        )
        # As legend entries rather than text on the plot: p50 and p99 often sit in the same bin.
        top = max(counts) * 1.05
        for key, colour in (("p50", "#2ca02c"), ("p99", "#d62728")):
            value = as_number(dig(summary, "sojourn_ms", key))
            if value is not None:
                fig.add_trace(
                    go.Scatter(
                        x=[value, value],
                        y=[0, top],
                        mode="lines",
                        name=f"{key} {fmt_ms(value)} ms",
                        line=dict(color=colour, width=2, dash="dash"),
                        hovertemplate=f"overall {key}: {fmt_ms(value)} ms<extra></extra>",
                    )
                )
    else:
        # Log-spaced bins would be slivers on a linear axis: give every bin the same room.
        fig.add_trace(
            go.Bar(
                x=labels,
                y=counts,
                name="deliveries per bin",
                marker=dict(color="#4c78a8", line=dict(width=0)),
                hovertext=hover,
                hoverinfo="text",
            )
        )
        fig.update_xaxes(type="category")
    fig.update_layout(bargap=0.05)
    return fig
