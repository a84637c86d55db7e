"""The report's publish-fidelity parts: a loud banner at the top of the page when a producer
group fell behind its schedule, and the "Replay fidelity" section (just "Publish lateness"
for a run without replay).

Rendered from summary.json's `fidelity` block alone (docs/summary.md); a summary without
one renders neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from ._format import as_list, as_number, dig, esc, fmt_count, fmt_exact, fmt_ms, fmt_percent
from ._table import Column, html_table
from .charts import _base_layout, _decorate_timeline, _no_data, chart_div

__all__ = [
    "behind_banner",
    "lateness_table",
    "replay_figure",
    "has_fidelity",
    "fidelity_title",
    "fidelity_body",
    "HOW_TO_READ_LATENESS",
    "HOW_TO_READ_REPLAY",
]

Summary = Mapping[str, Any]

HOW_TO_READ_LATENESS = (
    "Lateness = actual publish time − the time the schedule (or the replayed file) wanted the message "
    "sent, over every publish of the group, warm-up included. Sojourn publishes open loop, so a late "
    "publish is the load generator's own delay, not the broker's: when the p99 is over 10 ms or any "
    "publish is over a second late, the group is marked behind and the broker saw a later, burstier "
    "arrival process than the scenario asked for."
)

HOW_TO_READ_REPLAY = (
    "Did the replay publish every row of its file once, at the recorded times? 'expected' is what the "
    "replay plan publishes over the run; 'distinct' counts distinct (row, pass) pairs, so 'duplicates' "
    "are rows published more than once and 'missing' rows the plan expected that never went out. The "
    "chart puts the messages per second the file asked for (by intended time) beside those actually "
    "published; the gaps table compares the spacing between consecutive messages of the group."
)

_INTENDED_COLOUR = "#9ecae1"
_PUBLISHED_COLOUR = "#08519c"
_MAX_BAR_SECONDS = 600  # beyond this bars are slivers: draw lines instead


def _groups(summary: Summary) -> list[tuple[str, Mapping[str, Any]]]:
    block = summary.get("fidelity")
    if not isinstance(block, Mapping):
        return []
    return sorted((str(g), entry) for g, entry in block.items() if isinstance(entry, Mapping))


def _replayed(entry: Mapping[str, Any]) -> bool:
    return dig(entry, "replayed") is True or isinstance(dig(entry, "replay"), Mapping)


# --- banner --------------------------------------------------------------------------


def behind_banner(summary: Summary) -> str:
    """`<div class="banner">` naming every group that fell behind; "" when none did."""
    behind = [(group, entry) for group, entry in _groups(summary) if dig(entry, "behind") is True]
    if not behind:
        return ""
    parts = [
        f"producer group <code>{esc(group)}</code> published p99 {fmt_ms(dig(entry, 'lateness_ms', 'p99'))} ms "
        f"late (max {fmt_ms(dig(entry, 'lateness_ms', 'max'))} ms, "
        f"{fmt_percent(dig(entry, 'late_share', 'over_10_ms'))} of its publishes over 10 ms)"
        for group, entry in behind
    ]
    return (
        f'<div class="banner" role="alert"><b>⚠ The load generator could not keep up:</b> '
        f"{'; '.join(parts)}. The results under-state the offered load: the broker saw a later, "
        f"burstier arrival process than the scenario asked for. Add load-generating processes or "
        f'lower the rate, and see <a href="#fidelity">publish lateness</a>.</div>'
    )


# --- tables --------------------------------------------------------------------------


def _status(entry: Mapping[str, Any]) -> str:
    behind = dig(entry, "behind")
    if behind is True:
        return '<span class="bad">behind</span>'
    if behind is False:
        return '<span class="good">on time</span>'
    return esc(None)


def lateness_table(summary: Summary) -> str:
    columns = [
        Column("producer group"),
        Column("arrivals"),
        Column("publishes", True),
        Column("late p50 (ms)", True),
        Column("late p99 (ms)", True),
        Column("late p99.9 (ms)", True),
        Column("late max (ms)", True),
        Column("> 1 ms", True),
        Column("> 10 ms", True),
        Column("status"),
    ]
    rows = []
    for group, entry in _groups(summary):
        late = dig(entry, "lateness_ms", default={})
        rows.append(
            [
                f"<code>{esc(group)}</code>",
                "replay" if _replayed(entry) else "synthetic",
                fmt_count(dig(late, "count")),
                fmt_ms(dig(late, "p50")),
                fmt_ms(dig(late, "p99")),
                fmt_ms(dig(late, "p99_9")),
                fmt_ms(dig(late, "max")),
                fmt_percent(dig(entry, "late_share", "over_1_ms")),
                fmt_percent(dig(entry, "late_share", "over_10_ms")),
                _status(entry),
            ]
        )
    return html_table(columns, rows, empty="No publishes were recorded.")


def _flagged(value: Any, css: str) -> str:
    """A count, coloured when it is not zero."""
    n = as_number(value)
    return f'<span class="{css}">{fmt_count(n)}</span>' if n else fmt_count(value)


def _window(value: Any) -> str:
    bounds = as_list(value)
    if len(bounds) != 2:
        return esc(None)
    start, end = (fmt_exact(b) if as_number(b) is not None else "end" for b in bounds)
    return f"{start}–{end} s"


def replay_table(replay: Mapping[str, Any]) -> str:
    config = dig(replay, "config", default={})
    loop = dig(config, "loop")
    columns = [
        Column("source"),
        Column("rows", True),
        Column("speed", True),
        Column("window"),
        Column("loop"),
        Column("expected", True),
        Column("published", True),
        Column("distinct", True),
        Column("duplicates", True),
        Column("missing", True),
        Column("max |Δ| per s", True),
        Column("per-second correlation", True),
    ]
    row = [
        f"<code>{esc(dig(config, 'source'))}</code>",
        fmt_count(dig(config, "rows")),
        f"{fmt_exact(dig(config, 'speed'))}×" if as_number(dig(config, "speed")) is not None else esc(None),
        _window(dig(config, "window")),
        esc({True: "yes", False: "no"}.get(loop)),
        fmt_count(dig(replay, "expected")),
        fmt_count(dig(replay, "published")),
        fmt_count(dig(replay, "distinct")),
        _flagged(dig(replay, "duplicates"), "warn"),
        _flagged(dig(replay, "missing"), "bad"),
        fmt_count(dig(replay, "per_second_max_diff")),
        _fixed(dig(replay, "per_second_correlation"), ".3f"),
    ]
    return html_table(columns, [row], empty="")


def _fixed(value: Any, spec: str) -> str:
    n = as_number(value)
    return esc(None) if n is None else format(n, spec)


def gaps_table(replay: Mapping[str, Any]) -> str:
    stats = ("mean", "p10", "p50", "p90", "p99")
    columns = [Column("gap between consecutive messages"), Column("count", True)]
    columns += [Column(f"{s} (ms)", True) for s in stats]
    rows = []
    for key, label in (("intended", "intended (what the file asked for)"), ("published", "actual publishes")):
        gaps = dig(replay, "inter_arrival_ms", key, default={})
        rows.append([esc(label), fmt_count(dig(gaps, "count"))] + [fmt_ms(dig(gaps, s)) for s in stats])
    table = html_table(columns, rows, empty="")
    distance = as_number(dig(replay, "inter_arrival_ms", "ks_distance"))
    if distance is None:
        return table
    faithful = dig(replay, "inter_arrival_ms", "faithful") is True
    verdict = (
        '<span class="good">the spacing was kept</span>'
        if faithful
        else '<span class="bad">the publishes bunched or spread: the broker saw other gaps than the file</span>'
    )
    return (
        f"{table}<p>Kolmogorov-Smirnov distance between the two gap distributions (to 0.1 ms): "
        f"<b>{distance:.3f}</b> (kept at ≤ 0.05): {verdict}.</p>"
    )


# --- chart ---------------------------------------------------------------------------


def replay_figure(summary: Summary, group: str) -> go.Figure:
    """Messages per second the file asked for (by intended time) beside those published."""
    fig = _base_layout(go.Figure(), "time since start of run (s)", "messages per second")
    series = dig(summary, "fidelity", group, "replay", "per_second", default={})
    t = [as_number(v) for v in as_list(dig(series, "t_s"))]
    intended = [as_number(v) for v in as_list(dig(series, "intended"))]
    published = [as_number(v) for v in as_list(dig(series, "published"))]
    n = min(len(t), len(intended), len(published))
    if n == 0:
        return _no_data(fig, f"Producer group {group} published no replayed row")
    t, intended, published = t[:n], intended[:n], published[:n]
    bars = n <= _MAX_BAR_SECONDS
    for label, values, colour in (
        ("intended (file)", intended, _INTENDED_COLOUR),
        ("published", published, _PUBLISHED_COLOUR),
    ):
        hover = f"{label}: %{{y:,}} msg/s<extra></extra>"
        if bars:
            fig.add_trace(
                go.Bar(x=t, y=values, name=label, marker=dict(color=colour, line=dict(width=0)), hovertemplate=hover)
            )
        else:
            fig.add_trace(
                go.Scatter(
                    x=t, y=values, name=label, mode="lines", line=dict(color=colour, width=2), hovertemplate=hover
                )
            )
    fig.update_layout(barmode="group", bargap=0.15, hovermode="x unified")
    fig.update_yaxes(rangemode="tozero")
    return _decorate_timeline(fig, summary)


# --- section -------------------------------------------------------------------------


def has_fidelity(summary: Summary) -> bool:
    """Whether the summary has a fidelity block: the section is shown only then."""
    return bool(_groups(summary))


def fidelity_title(summary: Summary) -> str:
    """The section's title: "Replay fidelity" when a group replayed a file, else "Publish lateness"."""
    return "Replay fidelity" if any(_replayed(entry) for _, entry in _groups(summary)) else "Publish lateness"


def fidelity_body(summary: Summary) -> str:
    """The section's content: every group's lateness, then per replayed group its counts, gaps and
    chart (plotly.js must already be on the page)."""
    replays = [(i, group, entry) for i, (group, entry) in enumerate(_groups(summary)) if _replayed(entry)]
    parts = [f'<p class="howto">{esc(HOW_TO_READ_LATENESS)}</p><div class="table-wrap">{lateness_table(summary)}</div>']
    if replays:
        parts.append(f'<p class="howto" style="margin-top:12px">{esc(HOW_TO_READ_REPLAY)}</p>')
    for i, group, entry in replays:
        replay = dig(entry, "replay", default={})
        parts.append(
            f'<h3 style="margin-top:16px">Replay: <code>{esc(group)}</code></h3>'
            f'<div class="table-wrap">{replay_table(replay)}</div>'
            f'<div class="table-wrap" style="margin-top:8px">{gaps_table(replay)}</div>'
            f'<div class="chart" style="margin-top:8px">'
            f"{chart_div(replay_figure(summary, group), f'fidelity-{i}', False)}</div>"
        )
    return "".join(parts)
