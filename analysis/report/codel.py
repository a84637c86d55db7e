"""The report's CoDel section: per consumer, what CoDel nacked and what it did to buffer sojourn.

Rendered from the summary's `codel` block alone (docs/summary.md); an absent or
empty block (CoDel off everywhere) renders nothing at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._format import as_list, as_number, dig, esc, fmt_count, fmt_ms, fmt_percent
from ._table import Column, html_table

__all__ = ["has_codel", "codel_body", "HOW_TO_READ"]

Summary = Mapping[str, Any]

HOW_TO_READ = (
    "CoDel nacks a delivery as it leaves a consumer's buffer once deliveries have waited there "
    "longer than the target for at least an interval, and nacks faster while that lasts. "
    "'Before' is every delivery that left the buffer before the consumer's first nack, 'after' "
    "is from that nack on (warm-up excluded). Well tuned, CoDel nacks almost nothing while "
    "processing is normal; when a consumer slows down, its 'after' p99 stays near the target and "
    "the messages it requeued are acked by other consumers ('acked from others': messages another "
    "consumer requeued, acked by this one). 'dropping' is the time in CoDel's dropping state, counted "
    "from each decision taken in it to the consumer's next decision (an upper bound)."
)


def _pair(block: Any) -> str:
    """`p50 / p99` of a stats block in one cell."""
    return f"{fmt_ms(dig(block, 'p50'))} / {fmt_ms(dig(block, 'p99'))}"


def _consumer_rows(consumers: list[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for c in consumers:
        on = dig(c, "codel_on")
        rows.append(
            [
                f'<code style="white-space:nowrap">{esc(dig(c, "consumer"))}</code>',
                esc(dig(c, "group")),
                esc("on" if on is True else "off" if on is False else None),
                fmt_count(dig(c, "nacks")),
                fmt_count(dig(c, "requeued")),
                fmt_count(dig(c, "discarded")),
                fmt_percent(dig(c, "nack_share")),
                fmt_ms(dig(c, "dropping_s")),
                _pair(dig(c, "sojourn_before_ms")),
                _pair(dig(c, "sojourn_after_ms")),
                fmt_count(dig(c, "acked_requeued_from_others")),
            ]
        )
    return rows


def _totals_line(totals: Any) -> str:
    if not isinstance(totals, Mapping):
        return ""
    requeued_messages = as_number(dig(totals, "requeued_messages"))
    follow = ""
    if requeued_messages:
        follow = (
            f" Of the {fmt_count(requeued_messages)} messages requeued, "
            f"{fmt_count(dig(totals, 'requeued_acked_by_other'))} were then acked by another consumer, "
            f"{fmt_count(dig(totals, 'requeued_acked_by_same'))} by the consumer that requeued them, "
            f"and {fmt_count(dig(totals, 'requeued_not_acked'))} never (left in the broker, or lost)."
        )
    return (
        f'<p class="muted">In total {fmt_count(dig(totals, "nacks"))} nacks '
        f"({fmt_count(dig(totals, 'requeued'))} requeued, {fmt_count(dig(totals, 'discarded'))} "
        f"discarded): {fmt_percent(dig(totals, 'nack_share'))} of the deliveries CoDel decided on."
        f"{follow}</p>"
    )


def _consumers(summary: Summary) -> list[Mapping[str, Any]]:
    return [c for c in as_list(dig(summary, "codel", "consumers")) if isinstance(c, Mapping)]


def has_codel(summary: Summary) -> bool:
    """Whether a consumer ran CoDel: the section is shown only then."""
    return bool(_consumers(summary))


def codel_body(summary: Summary) -> str:
    """The section's content: per consumer, its nacks and its sojourn before and after the first."""
    columns = [
        Column("consumer"),
        Column("group"),
        Column("CoDel"),
        Column("nacks", True),
        Column("requeued", True),
        Column("discarded", True),
        Column("share", True),
        Column("dropping (s)", True),
        Column("sojourn before p50/p99 (ms)", True),
        Column("after p50/p99 (ms)", True),
        Column("acked from others", True),
    ]
    table = html_table(columns, _consumer_rows(_consumers(summary)), empty="")
    return (
        f'<p class="howto">{esc(HOW_TO_READ)}</p>'
        f'<div class="table-wrap">{table}</div>{_totals_line(dig(summary, "codel", "totals"))}'
    )
