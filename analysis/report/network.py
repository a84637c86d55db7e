"""The report's network section, and the outage marks every time chart carries.

Rendered from the summary's `network` block alone (docs/summary.md, docs/network.md);
a run without the proxy (`network` null or absent) renders no section and no marks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from ._format import as_list, as_number, dig, esc, fmt_count, fmt_ms, fmt_seconds, plot_text
from ._table import Column, html_table

__all__ = ["has_network", "network_body", "mark_impairments", "HOW_TO_READ", "ERROR_TARGET_MS"]

Summary = Mapping[str, Any]

ERROR_TARGET_MS = 1.0
"""The delay line's p99 timing error is good when below this (docs/network.md)."""

_DOWN_COLOUR = "#b3261e"
_LINK_COLOUR = "#5c6bc0"

HOW_TO_READ = (
    "sojourn's delay-line proxy sat between the producers and consumers and the broker "
    "(upstream = client → broker: publishes and acks; downstream = broker → client: deliveries "
    "and confirms). Each row is one period of constant settings, as the proxy applied them; the "
    "time charts above carry them as a strip along the bottom, outages as red bands and resets as "
    "red lines. 'applied' is the delay the proxy measured on the chunks it released in that period "
    "(median), next to what was configured; 'late p99' is how much later than scheduled it released "
    "them. Latency is added once per direction, so a consumer's round trip grows by up + down."
)

HOW_TO_READ_PROXY = (
    "The proxy's self-measurement over the whole run, per direction: chunks released, and how late "
    "each was against its scheduled release (scheduled = arrival + configured delay, in order, after "
    "the bandwidth cap). A p99 under 1 ms means the delays on the charts are the configured ones. "
    "Dropped chunks were in flight when an outage or reset cut their connection."
)


def _periods(summary: Summary) -> list[Mapping[str, Any]]:
    return [p for p in as_list(dig(summary, "network", "periods")) if isinstance(p, Mapping)]


def _link_text(link: Any) -> str:
    latency = as_number(dig(link, "latency_ms"))
    if latency is None:
        return "–"
    text = f"{latency:g} ms"
    jitter = as_number(dig(link, "jitter_ms"))
    if jitter:
        text += f" + 0–{jitter:g}"
    bandwidth = as_number(dig(link, "bandwidth_bytes_per_s"))
    if bandwidth:
        text += f", ≤ {_bytes_rate(bandwidth)}"
    return text


def _bytes_rate(value: float) -> str:
    for unit, size in (("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{value:g} B/s"


def _short(link: Any) -> str:
    latency = as_number(dig(link, "latency_ms"))
    return "–" if latency is None else f"{latency:g}"


def _second(value: Any) -> str:
    """Period bounds: timeline steps are round numbers, the run's end is not (one decimal)."""
    n = as_number(value)
    return fmt_seconds(None if n is None else round(float(n), 1), unit=False)


def _state(period: Mapping[str, Any]) -> str:
    parts = []
    if dig(period, "down") is True:
        parts.append('<span class="bad">down</span>')
    if dig(period, "reset") is True:
        parts.append('<span class="bad">reset at start</span>')
    return " · ".join(parts) or "up"


def _applied(link: Any) -> str:
    measured = dig(link, "measured")
    if not isinstance(measured, Mapping) or not as_number(dig(measured, "count")):
        return "–"
    return f"{fmt_ms(dig(measured, 'delay_p50_ms'))} / {fmt_ms(dig(measured, 'error_p99_ms'))}"


def periods_table(summary: Summary) -> str:
    columns = [
        Column("start–end (s)", True),
        Column("phase"),
        Column("link"),
        Column("upstream"),
        Column("downstream"),
        Column("applied up p50 / late p99 (ms)", True),
        Column("applied down p50 / late p99 (ms)", True),
    ]
    rows = []
    for p in _periods(summary):
        span = f"{_second(dig(p, 'start_s'))}–{_second(dig(p, 'end_s'))}"
        rows.append(
            [
                span,
                esc(dig(p, "phase")),
                _state(p),
                esc(_link_text(dig(p, "upstream"))),
                esc(_link_text(dig(p, "downstream"))),
                _applied(dig(p, "upstream")),
                _applied(dig(p, "downstream")),
            ]
        )
    return html_table(columns, rows, empty="No impairment periods were recorded.")


def proxy_table(summary: Summary) -> str:
    columns = [
        Column("direction"),
        Column("proxies", True),
        Column("chunks", True),
        Column("bytes", True),
        Column("dropped", True),
        Column("late p50 (ms)", True),
        Column("late p99 (ms)", True),
        Column("late max (ms)", True),
        Column("applied p50 (ms)", True),
        Column("applied mean (ms)", True),
    ]
    rows = []
    for direction in ("upstream", "downstream"):
        m = dig(summary, "network", "proxy", direction)
        if not isinstance(m, Mapping):
            continue
        p99 = as_number(dig(m, "error_p99_ms"))
        p99_cell = fmt_ms(p99)
        if p99 is not None:
            p99_cell = f'<span class="{"good" if p99 < ERROR_TARGET_MS else "warn"}">{p99_cell}</span>'
        rows.append(
            [
                esc(direction),
                fmt_count(dig(m, "proxies")),
                fmt_count(dig(m, "count")),
                fmt_count(dig(m, "bytes")),
                fmt_count(dig(m, "dropped")),
                fmt_ms(dig(m, "error_p50_ms")),
                p99_cell,
                fmt_ms(dig(m, "error_max_ms")),
                fmt_ms(dig(m, "delay_p50_ms")),
                fmt_ms(dig(m, "delay_mean_ms")),
            ]
        )
    return html_table(columns, rows, empty="The proxy recorded no self-measurement (it did not stop cleanly).")


def has_network(summary: Summary) -> bool:
    """Whether the run went through the delay-line proxy: the section is shown only then."""
    return bool(_periods(summary))


def network_body(summary: Summary) -> str:
    """The section's content: the impairment periods, then the proxy's own timing."""
    return (
        f'<p class="howto">{esc(HOW_TO_READ)}</p>'
        f'<div class="table-wrap">{periods_table(summary)}</div>'
        f'<h3 style="margin-top:16px">Proxy timing (self-measured)</h3>'
        f'<p class="howto">{esc(HOW_TO_READ_PROXY)}</p>'
        f'<div class="table-wrap">{proxy_table(summary)}</div>'
    )


def mark_impairments(fig: go.Figure, summary: Summary) -> go.Figure:
    """On a time chart: each impairment period as a labelled strip along the bottom (one-way
    latency up/down in ms), outages as red bands over the whole height, resets as red lines."""
    for p in _periods(summary):
        start, end = as_number(dig(p, "start_s")), as_number(dig(p, "end_s"))
        if start is None or end is None or end < start:
            continue
        if dig(p, "down") is True:
            fig.add_shape(
                type="rect",
                xref="x",
                yref="paper",
                x0=start,
                x1=max(end, start + 1e-3),
                y0=0,
                y1=1,
                fillcolor=_DOWN_COLOUR,
                opacity=0.22,
                line=dict(width=0),
                layer="below",
                name="network down",
                label=dict(text="network down", textposition="middle center", font=dict(size=11, color=_DOWN_COLOUR)),
            )
        else:
            fig.add_shape(
                type="rect",
                xref="x",
                yref="paper",
                x0=start,
                x1=end,
                y0=0,
                y1=0.045,
                fillcolor=_LINK_COLOUR,
                opacity=0.18,
                line=dict(width=1, color="white"),
                layer="below",
                name="network",
                label=dict(
                    text=plot_text(f"net ↑{_short(dig(p, 'upstream'))} ↓{_short(dig(p, 'downstream'))} ms"),
                    textposition="middle center",
                    font=dict(size=9, color="#303f9f"),
                ),
            )
        if dig(p, "reset") is True:
            fig.add_shape(
                type="line",
                xref="x",
                yref="paper",
                x0=start,
                x1=start,
                y0=0,
                y1=1,
                line=dict(color=_DOWN_COLOUR, width=2),
                name="connections reset",
                label=dict(
                    text="reset",
                    textposition="end",
                    textangle=0,
                    yanchor="top",
                    xanchor="left",
                    font=dict(size=10, color=_DOWN_COLOUR),
                ),
            )
    return fig
