"""The report's "Slow consumers" section: per consumer and minute, the share of sampled seconds in
which its prefetch window was full while the queue had messages ready, and the queue's depth.

Rendered from the summary's `slow_consumers` and `queue_depth` blocks (docs/summary.md,
docs/slow-consumers.md); a run without queue samples renders no section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from ._format import as_list, as_number, dig, esc, fmt_count, fmt_percent
from ._table import Column, html_table
from .charts import _base_layout, _decorate_timeline, _no_data, chart_div

__all__ = ["has_queue_samples", "slow_consumers_body", "shares_table", "queue_depth_figure", "HOW_TO_READ"]

Summary = Mapping[str, Any]

MAX_MINUTE_COLUMNS = 30
"""Past this many minutes the table keeps the overall and worst-minute columns only (the
summary keeps every minute)."""
SLOW_SHARE_WARN = 0.5

HOW_TO_READ = (
    "The broker's queue was sampled once a second. A second counts as slow for a consumer when, at "
    "the sample, it held as many unacked deliveries as its prefetch allows (its window was full) "
    "while the queue still had messages ready: the broker had work for it but could not send any. "
    "Each cell is the share of that minute's sampled seconds that were slow; consumers with any slow "
    "second come first, worst minute first. With a backlog every busy consumer is full most of the "
    "time; a consumer near 100 % while others are low is the one holding messages back. Auto-ack "
    "consumers and prefetch 0 have no window and are left out."
)

HOW_TO_READ_DEPTH = (
    "Messages ready in the queue at each sample (passive queue.declare: exact at that moment), and "
    "unacked (delivered, not yet acked) when the management API answered; its counters are the "
    "broker's periodic statistics and can lag by a few seconds."
)


def _block(summary: Summary) -> Mapping[str, Any]:
    block = dig(summary, "slow_consumers")
    return block if isinstance(block, Mapping) else {}


def _consumers(summary: Summary) -> list[Mapping[str, Any]]:
    rows = [c for c in as_list(dig(_block(summary), "consumers")) if isinstance(c, Mapping)]
    # The summary lists them worst first already; keep that, but never let a reordered
    # summary put a consumer without slow seconds above one with them.
    return sorted(rows, key=lambda c: not as_number(dig(c, "slow_seconds")))


def _share_cell(share: Any) -> str:
    n = as_number(share)
    if n is None:
        return "–"
    css = "warn" if n >= SLOW_SHARE_WARN else ("" if n == 0 else "muted")
    text = fmt_percent(n)
    return f'<span class="{css}">{text}</span>' if css else text


def shares_table(summary: Summary) -> str:
    consumers = _consumers(summary)
    minutes = sorted(
        {
            int(m["minute"])
            for c in consumers
            for m in as_list(dig(c, "minutes"))
            if isinstance(m, Mapping) and as_number(dig(m, "minute")) is not None
        }
    )
    per_minute = len(minutes) <= MAX_MINUTE_COLUMNS
    columns = [
        Column("consumer"),
        Column("group"),
        Column("seconds sampled", True),
        Column("slow seconds", True),
        Column("share", True),
        Column("worst minute", True),
    ]
    if per_minute:
        columns += [Column(f"min {m}", True) for m in minutes]
    rows = []
    for c in consumers:
        worst = dig(c, "worst_minute", default={})
        worst_minute = as_number(dig(worst, "minute"))
        row = [
            f"<code>{esc(dig(c, 'consumer'))}</code>",
            esc(dig(c, "group")),
            fmt_count(dig(c, "seconds_sampled")),
            fmt_count(dig(c, "slow_seconds")),
            _share_cell(dig(c, "share")),
            "–" if worst_minute is None else f"{_share_cell(dig(worst, 'share'))} (min {int(worst_minute)})",
        ]
        if per_minute:
            by_minute = {
                int(m["minute"]): m
                for m in as_list(dig(c, "minutes"))
                if isinstance(m, Mapping) and as_number(dig(m, "minute")) is not None
            }
            row += [_share_cell(dig(by_minute.get(m), "share")) for m in minutes]
        rows.append(row)
    return html_table(
        columns, rows, empty="No consumer with a prefetch window received anything while the queue was sampled."
    )


def _excluded(summary: Summary) -> str:
    excluded = [e for e in as_list(dig(_block(summary), "excluded")) if isinstance(e, Mapping)]
    if not excluded:
        return ""
    names = ", ".join(f"<code>{esc(dig(e, 'consumer'))}</code> ({esc(dig(e, 'reason'))})" for e in excluded)
    return f'<p class="howto">Left out (no prefetch window): {names}.</p>'


def _samples_line(summary: Summary) -> str:
    block = _block(summary)
    took = dig(block, "sample_took_ms", default={})
    p50, top = as_number(dig(took, "p50")), as_number(dig(took, "max"))
    cost = f"; each took {p50:.2f} ms (median), {top:.2f} ms at most" if p50 is not None and top is not None else ""
    return (
        f'<p class="howto">{fmt_count(dig(block, "samples"))} samples from '
        f"<code>{esc(dig(block, 'source'))}</code>{cost}.</p>"
    )


def queue_depth_figure(summary: Summary) -> go.Figure:
    """Messages ready (and unacked, when known) at each queue sample."""
    fig = _base_layout(go.Figure(), "time since start of run (s)", "messages")
    points = [
        p
        for p in as_list(summary.get("queue_depth"))
        if isinstance(p, Mapping) and as_number(dig(p, "t_s")) is not None
    ]
    if not points:
        return _no_data(fig, "No queue samples in this summary")
    t = [p["t_s"] for p in points]
    fig.add_trace(
        go.Scatter(
            x=t,
            y=[dig(p, "ready") for p in points],
            name="ready",
            mode="lines",
            line=dict(color="#1f77b4", width=2),
            hovertemplate="ready: %{y:,}<extra></extra>",
        )
    )
    if any(as_number(dig(p, "unacked")) is not None for p in points):
        fig.add_trace(
            go.Scatter(
                x=t,
                y=[dig(p, "unacked") for p in points],
                name="unacked (management API)",
                mode="lines",
                line=dict(color="#ff7f0e", width=2),
                hovertemplate="unacked: %{y:,}<extra></extra>",
            )
        )
    fig.update_layout(hovermode="x unified")
    fig.update_yaxes(rangemode="tozero")
    return _decorate_timeline(fig, summary)


def has_queue_samples(summary: Summary) -> bool:
    """Whether the broker's queue was sampled during the run: the section is shown only then."""
    return bool(as_number(dig(_block(summary), "samples"))) or bool(as_list(summary.get("queue_depth")))


def slow_consumers_body(summary: Summary) -> str:
    """The section's content: the shares table, then the queue depth chart (plotly.js must already
    be on the page)."""
    return (
        f'<p class="howto">{esc(HOW_TO_READ)}</p>'
        f'<div class="table-wrap">{shares_table(summary)}</div>{_excluded(summary)}{_samples_line(summary)}'
        f'<h3 style="margin-top:16px">Queue depth</h3><p class="howto">{esc(HOW_TO_READ_DEPTH)}</p>'
        f'<div class="chart">{chart_div(queue_depth_figure(summary), "queue-depth", False)}</div>'
    )
