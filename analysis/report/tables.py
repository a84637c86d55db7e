"""The report's HTML tables: latency decomposition, consumers, phases, accounting, events.

Each function takes the summary and returns an HTML fragment; every piece of text
goes through `esc`, every number through a `fmt_*` helper.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, cast

from ._format import (
    MISSING,
    as_list,
    as_number,
    dig,
    esc,
    fmt_count,
    fmt_exact,
    fmt_ms,
    fmt_percent,
    fmt_rate,
    fmt_seconds,
)
from ._table import Column, html_table
from .charts import phase_colours
from .stream import has_stream

__all__ = [
    "latency_table",
    "consumers_table",
    "phases_table",
    "accounting_table",
    "events_table",
    "accounting_identity",
    "AccountingCheck",
    "priorities_table",
    "flow_control_table",
    "has_priorities",
    "has_flow_control",
]

Summary = Mapping[str, Any]


# --- latency decomposition -----------------------------------------------------------

# (label, where the stats block lives, what the interval is, part of end-to-end?)
_LATENCY_ROWS = (
    ("end_to_end", ("latency_ms", "end_to_end"), "publish → processing end", False),
    ("broker_network", ("latency_ms", "broker_network"), "publish → bytes at the consumer's socket", True),
    ("sojourn", ("sojourn_ms",), "bytes at the socket → processing start (client buffer)", True),
    ("socket_wait", ("latency_ms", "socket_wait"), "of which: bytes at the socket → read by the process", False),
    ("processing", ("latency_ms", "processing"), "processing start → processing end", True),
    ("ack_delay", ("latency_ms", "ack_delay"), "processing end → ack sent (manual ack)", False),
    ("confirm", ("latency_ms", "confirm"), "publish → broker confirm (publisher side)", False),
)
_STATS = ("mean", "p50", "p95", "p99", "max")


def latency_table(summary: Summary) -> str:
    e2e_mean = as_number(dig(summary, "latency_ms", "end_to_end", "mean"))
    columns = [Column("segment"), Column("interval"), Column("count", True)]
    columns += [Column(f"{s} (ms)", True) for s in _STATS]
    columns.append(Column("share of e2e mean", True))
    rows = []
    for label, path, interval, in_e2e in _LATENCY_ROWS:
        block = dig(summary, *path, default={})
        mean = as_number(dig(block, "mean"))
        share = MISSING
        if in_e2e and mean is not None and e2e_mean:
            share = f"{mean / e2e_mean:.0%}"
        rows.append(
            [f"<code>{esc(label)}</code>", esc(interval), fmt_count(dig(block, "count"))]
            + [fmt_ms(dig(block, s)) for s in _STATS]
            + [share]
        )
    return html_table(columns, rows, empty="")


# --- consumers and phases ------------------------------------------------------------


def consumers_table(summary: Summary) -> str:
    columns = [
        Column("consumer"),
        Column("group"),
        Column("delivered", True),
        Column("acked", True),
        Column("utilisation", True),
        Column("sojourn p50 (ms)", True),
        Column("sojourn p99 (ms)", True),
        Column("e2e p99 (ms)", True),
    ]
    rows = []
    for c in as_list(summary.get("consumers")):
        if not isinstance(c, Mapping):
            continue
        rows.append(
            [
                f"<code>{esc(dig(c, 'consumer'))}</code>",
                esc(dig(c, "group")),
                fmt_count(dig(c, "delivered")),
                fmt_count(dig(c, "acked")),
                fmt_percent(dig(c, "utilisation")),
                fmt_ms(dig(c, "sojourn_ms", "p50")),
                fmt_ms(dig(c, "sojourn_ms", "p99")),
                fmt_ms(dig(c, "latency_ms", "end_to_end", "p99")),
            ]
        )
    return html_table(columns, rows, empty="No consumer delivered anything.")


def phases_table(summary: Summary) -> str:
    colours = phase_colours(summary)
    columns = [
        Column("phase"),
        Column("start–end (s)", True),
        Column("published", True),
        Column("acked", True),
        Column("publish (msg/s)", True),
        Column("ack (msg/s)", True),
        Column("sojourn p50 (ms)", True),
        Column("sojourn p99 (ms)", True),
    ]
    rows = []
    for p in as_list(summary.get("phases")):
        if not isinstance(p, Mapping):
            continue
        name = dig(p, "phase")
        colour = colours.get(str(name))
        swatch = (
            f'<span class="swatch" style="background:{colour}"></span>' if colour else '<span class="swatch"></span>'
        )
        span = f"{fmt_seconds(dig(p, 'start_s'), unit=False)}–{fmt_seconds(dig(p, 'end_s'), unit=False)}"
        rows.append(
            [
                f"{swatch}{esc(name)}",
                span,
                fmt_count(dig(p, "published")),
                fmt_count(dig(p, "acked")),
                fmt_rate(dig(p, "throughput", "publish_per_s")),
                fmt_rate(dig(p, "throughput", "ack_per_s")),
                fmt_ms(dig(p, "sojourn_ms", "p50")),
                fmt_ms(dig(p, "sojourn_ms", "p99")),
            ]
        )
    return html_table(columns, rows, empty="No phases in this summary.")


# --- accounting ----------------------------------------------------------------------


class AccountingCheck(NamedTuple):
    """`published = acked + discarded + left_in_broker + unaccounted`, as far as it can be checked."""

    published: int | float | None
    accounted: int | float | None  # the right-hand side; None if a term is missing
    holds: bool | None  # None: not enough numbers to tell


def _discard_reasons(messages: Mapping[str, Any]) -> list[tuple[str, Any]]:
    reasons = dig(messages, "discarded", default={})
    return list(reasons.items()) if isinstance(reasons, Mapping) else []


def _discarded(messages: Mapping[str, Any]) -> int | float | None:
    """`discarded_total` (the contract's term), else the summed reasons when all are numbers."""
    total = as_number(dig(messages, "discarded_total"))
    if total is not None:
        return total
    reasons = [as_number(v) for _, v in _discard_reasons(messages)]
    return sum(cast("list[float]", reasons)) if reasons and all(v is not None for v in reasons) else None


def accounting_identity(summary: Summary) -> AccountingCheck:
    messages = dig(summary, "messages", default={})
    published = as_number(dig(messages, "published"))
    terms = [
        as_number(dig(messages, "acked")),
        _discarded(messages),
        as_number(dig(messages, "left_in_broker")),
        as_number(dig(messages, "not_yet_read", default=0)),  # a stream's; absent before it
        as_number(dig(messages, "unaccounted")),
    ]
    accounted = None if any(t is None for t in terms) else sum(cast("list[float]", terms))
    holds = None if published is None or accounted is None else published == accounted
    return AccountingCheck(published, accounted, holds)


def accounting_table(summary: Summary) -> str:
    messages = dig(summary, "messages", default={})
    rows = [
        ["published", "", fmt_count(dig(messages, "published"))],
        ["= acked", "delivered and acked (or auto-acked)", fmt_count(dig(messages, "acked"))],
    ]
    rows.append(
        [
            "+ discarded",
            "lost with a reason: rejected, returned, dropped or expired by the broker, "
            "given up while blocked, failed to publish, nack-discarded, egress-discarded, lost with a "
            "connection or with the queue when the broker restarted (below)",
            fmt_count(_discarded(messages)),
        ]
    )
    for reason, count in _discard_reasons(messages):
        rows.append(
            [
                f'<span class="sub">of which <code>{esc(reason)}</code></span>',
                "",
                f'<span class="sub">{fmt_count(count)}</span>',
            ]
        )
    rows.append(["+ left in broker", "still in the queue after the drain", fmt_count(dig(messages, "left_in_broker"))])
    if has_stream(summary):
        rows.append(
            [
                "+ not yet read",
                "in the stream, not yet acked by every consumer group that reads it (the Stream section)",
                fmt_count(dig(messages, "not_yet_read")),
            ]
        )
    unaccounted = as_number(dig(messages, "unaccounted"))
    rows.append(
        [
            "+ unaccounted",
            "none of the above: a bug",
            f'<span class="{"bad" if unaccounted else ""}">{fmt_count(unaccounted)}</span>',
        ]
    )

    reasons_sum = sum(as_number(v) or 0 for _, v in _discard_reasons(messages))
    total = as_number(dig(messages, "discarded_total"))
    if _discard_reasons(messages) and total is not None and total != reasons_sum:
        rows.append(
            [
                "",
                f'<span class="bad">note: discarded_total {fmt_count(total)} differs from '
                f"the sum of the reasons {fmt_count(reasons_sum)}</span>",
                "",
            ]
        )

    check = accounting_identity(summary)
    if check.holds is True:
        verdict = '<span class="good">✓ the identity holds</span>'
    elif check.holds is False:
        verdict = (
            f'<span class="bad">✗ does not hold: the terms add up to {fmt_count(check.accounted)}'
            f", published is {fmt_count(check.published)}</span>"
        )
    else:
        verdict = '<span class="muted">cannot be checked: counts are missing</span>'
    rows.append(["sum of the terms", verdict, fmt_count(check.accounted)])

    table = html_table([Column("term"), Column(""), Column("messages", True)], rows, empty="", css_class="accounting")
    info = (
        f'<p class="muted">Also: {fmt_count(dig(messages, "confirmed"))} confirmed by the broker, '
        f"{fmt_count(dig(messages, 'redelivered'))} deliveries flagged redelivered, "
        f"{fmt_count(dig(messages, 'duplicates'))} message ids acked more than once.</p>"
    )
    return table + info


# --- events --------------------------------------------------------------------------


def events_table(summary: Summary) -> str:
    events = [e for e in as_list(summary.get("events")) if isinstance(e, Mapping)]
    events.sort(key=lambda e: (as_number(e.get("t_s")) is None, as_number(e.get("t_s")) or 0))
    columns = [Column("time (s)", True), Column("kind"), Column("name"), Column("source"), Column("value", True)]
    rows = []
    for e in events:
        value = dig(e, "value")
        shown = fmt_exact(value) if as_number(value) is not None else esc(value)
        rows.append(
            [
                fmt_seconds(dig(e, "t_s"), unit=False),
                esc(dig(e, "kind")),
                esc(dig(e, "name")),
                esc(dig(e, "source")),
                shown,
            ]
        )
    return html_table(columns, rows, empty="No events were recorded.")


# --- per priority --------------------------------------------------------------------


def _priority_rows(summary: Summary) -> list[Mapping[str, Any]]:
    return [r for r in as_list(summary.get("priorities")) if isinstance(r, Mapping)]


def has_priorities(summary: Summary) -> bool:
    """Whether any publish carried a priority: the per-priority table is shown only then."""
    return bool(_priority_rows(summary))


def priorities_table(summary: Summary) -> str:
    """Counts and latencies per AMQP priority."""
    rows = _priority_rows(summary)
    columns = [
        Column("priority"),
        Column("published", True),
        Column("acked", True),
        Column("discarded", True),
        Column("left in broker", True),
        Column("sojourn p50 ms", True),
        Column("sojourn p99 ms", True),
        Column("end-to-end p50 ms", True),
        Column("end-to-end p99 ms", True),
    ]
    body = []
    for r in rows:
        priority = r.get("priority")
        body.append(
            [
                esc("none" if priority is None else str(priority)),
                fmt_count(r.get("published")),
                fmt_count(r.get("acked")),
                fmt_count(r.get("discarded")),
                fmt_count(r.get("left_in_broker")),
                fmt_ms(dig(r, "sojourn_ms", "p50")),
                fmt_ms(dig(r, "sojourn_ms", "p99")),
                fmt_ms(dig(r, "end_to_end_ms", "p50")),
                fmt_ms(dig(r, "end_to_end_ms", "p99")),
            ]
        )
    return html_table(columns, body, "no publishes")


# --- producer flow control -----------------------------------------------------------


def has_flow_control(summary: Summary) -> bool:
    """Whether the broker blocked a producer: the flow-control table is shown only then."""
    block = summary.get("flow_control")
    return isinstance(block, Mapping) and bool(block)


def flow_control_table(summary: Summary) -> str:
    """Blocked connections and publishes per producer group."""
    block = summary.get("flow_control")
    groups = sorted(block.items()) if isinstance(block, Mapping) else []
    columns = [
        Column("producer group"),
        Column("blocked periods", True),
        Column("blocked s", True),
        Column("publishes that waited", True),
        Column("wait p50 ms", True),
        Column("wait p99 ms", True),
        Column("wait max ms", True),
        Column("given up (blocked_timeout)", True),
    ]
    body = []
    for group, entry in groups:
        if not isinstance(entry, Mapping):
            continue
        body.append(
            [
                esc(str(group)),
                fmt_count(entry.get("blocked_periods")),
                fmt_exact(entry.get("blocked_s")),
                fmt_count(entry.get("publishes_waited")),
                fmt_ms(dig(entry, "blocked_ms", "p50")),
                fmt_ms(dig(entry, "blocked_ms", "p99")),
                fmt_ms(dig(entry, "blocked_ms", "max")),
                fmt_count(entry.get("blocked_timeout")),
            ]
        )
    return html_table(columns, body, "no producer was blocked")
