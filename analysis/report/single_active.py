"""The report's single-active-consumer section: which consumer the broker delivered to when, and each
failover with its gap. Rendered from the summary's `single_active_consumer` block alone
(docs/summary.md); a queue without single active consumer renders nothing at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._format import as_list, dig, esc, fmt_ms, fmt_seconds
from ._table import Column, html_table

__all__ = ["has_single_active", "single_active_body", "HOW_TO_READ"]

Summary = Mapping[str, Any]

HOW_TO_READ = (
    "The queue has x-single-active-consumer: the broker delivers to one consumer at a time and, when it "
    "goes, to the next in the order they subscribed. A period runs from a consumer's first delivery to its "
    "last; a failover's gap is the time between the old consumer's last delivery and the new one's first, "
    "during which nothing was delivered (messages wait in the queue). Overlapping periods would mean two "
    "consumers were delivered to at once."
)

_PERIODS = [Column("consumer"), Column("from", True), Column("to", True), Column("ended by")]
_FAILOVERS = [Column("from"), Column("to"), Column("at", True), Column("gap", True), Column("the old one")]


def has_single_active(summary: Summary) -> bool:
    return bool(dig(summary, "single_active_consumer", default={}))


def single_active_body(summary: Summary) -> str:
    block = dig(summary, "single_active_consumer", default={})
    periods = [p for p in as_list(dig(block, "periods")) if isinstance(p, Mapping)]
    failovers = [f for f in as_list(dig(block, "failovers")) if isinstance(f, Mapping)]
    overlaps = dig(block, "overlaps", default=0)
    chip = (
        '<p class="chip good"><b>✓ one active consumer at a time</b></p>'
        if not overlaps
        else f'<p class="chip bad"><b>✗ {esc(overlaps)} overlapping period(s)</b>: two consumers were '
        "delivered to at once</p>"
    )
    period_rows = [
        [
            f"<code>{esc(dig(p, 'consumer'))}</code>",
            fmt_seconds(dig(p, "from_s")),
            fmt_seconds(dig(p, "to_s")) if dig(p, "to_s") is not None else esc("the end"),
            esc(dig(p, "ended_by") or "–"),
        ]
        for p in periods
    ]
    failover_rows = [
        [
            f"<code>{esc(dig(f, 'from'))}</code>",
            f"<code>{esc(dig(f, 'to'))}</code>",
            fmt_seconds(dig(f, "at_s")),
            fmt_ms(dig(f, "gap_ms")),
            esc(dig(f, "ended_by") or "–"),
        ]
        for f in failovers
    ]
    return (
        f'<p class="howto">{esc(HOW_TO_READ)}</p>{chip}'
        f'<div class="table-wrap">{html_table(_PERIODS, period_rows, empty="no consumer was delivered to")}</div>'
        f'<div class="table-wrap">{html_table(_FAILOVERS, failover_rows, empty="no failover")}</div>'
    )
