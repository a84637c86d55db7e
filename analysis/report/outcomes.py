"""The report's consumer-outcomes section: how the consumers settled what they processed (acked,
requeued, discarded, rejected; a handler's errors), beside the outcome rates asked for, and where
the requeued messages ended.

Rendered from the summary's `outcomes` block alone (docs/summary.md); a run whose consumers only
acked renders nothing at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._format import as_list, dig, esc, fmt_count, fmt_ms, fmt_percent
from ._table import Column, html_table
from .churn import counts_by_class

__all__ = ["has_outcomes", "outcomes_body", "HOW_TO_READ"]

Summary = Mapping[str, Any]

HOW_TO_READ = (
    "How each consumer group settled the deliveries it processed, per timeline phase: acked, nacked "
    "with requeue (back to the queue, delivered again), nacked without requeue and rejected (both "
    "discarded, or dead-lettered when the queue has a dead-letter exchange). 'asked' is the group's "
    "outcome rates in that phase; a measured share strays from it as a binomial count does, by about "
    "sqrt(p(1-p)/n). Handler errors are deliveries on which the group's handler raised. The second "
    "table follows every requeued message from its first delivery to its end: how many deliveries it "
    "took and how long until its first ack."
)

_COLUMNS = [
    Column("group"),
    Column("phase"),
    Column("decided", True),
    Column("acked", True),
    Column("requeued", True),
    Column("discarded", True),
    Column("rejected", True),
    Column("handler errors", True),
]

_REQUEUED_COLUMNS = [
    Column("group"),
    Column("requeued messages", True),
    Column("deliveries per message", True),
    Column("they ended as"),
    Column("first delivery → ack p50", True),
    Column("max", True),
]


def _share(row: Mapping[str, Any], field: str, rate_key: str) -> str:
    count = fmt_count(dig(row, field))
    measured = fmt_percent(dig(row, f"{field}_fraction"))
    asked = dig(row, "configured", rate_key)
    text = f"{count} ({measured})"
    return f"{text} <small>asked {fmt_percent(asked)}</small>" if asked is not None else text


def _row(r: Mapping[str, Any]) -> list[str]:
    errors = dig(r, "handler_errors")
    return [
        f"<code>{esc(dig(r, 'group'))}</code>",
        esc(dig(r, "phase", default="all")),
        fmt_count(dig(r, "decided")),
        fmt_count(dig(r, "acked")),
        _share(r, "requeued", "requeue"),
        _share(r, "discarded", "discard"),
        _share(r, "rejected", "reject"),
        f'<span class="{"bad" if errors else ""}">{fmt_count(errors)}</span>',
    ]


def _requeued_row(r: Mapping[str, Any]) -> list[str]:
    times = dig(r, "first_delivery_to_ack_ms", default={})
    per = dig(r, "deliveries_per_message")
    return [
        f"<code>{esc(dig(r, 'group'))}</code>",
        fmt_count(dig(r, "messages")),
        esc(f"{per:.2f}") if isinstance(per, (int, float)) else esc("–"),
        counts_by_class(dig(r, "ended")),
        fmt_ms(dig(times, "p50")),
        fmt_ms(dig(times, "max")),
    ]


def has_outcomes(summary: Summary) -> bool:
    """Whether some group had outcome rates or a handler, or nacked or rejected a processed delivery."""
    return bool(dig(summary, "outcomes", default={}))


def outcomes_body(summary: Summary) -> str:
    """The section's content: the per-phase table, and the requeued messages followed to their end."""
    block = dig(summary, "outcomes", default={})
    phases = [p for p in as_list(dig(block, "phases")) if isinstance(p, Mapping)]
    requeued = [r for r in as_list(dig(block, "requeued")) if isinstance(r, Mapping)]
    out = (
        f'<p class="howto">{esc(HOW_TO_READ)}</p>'
        f'<div class="table-wrap">{html_table(_COLUMNS, [_row(p) for p in phases], empty="")}</div>'
    )
    if requeued:
        rows = [_requeued_row(r) for r in requeued]
        out += f'<div class="table-wrap">{html_table(_REQUEUED_COLUMNS, rows, empty="")}</div>'
    return out
