"""The report's egress section: per consumer group and class, what its buffer delivered and discarded.

Rendered from the summary's `egress` block alone (docs/summary.md); an absent or empty block (no
group had `egress`) renders nothing at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._format import as_list, dig, esc, fmt_count, fmt_ms, fmt_percent
from ._table import Column, html_table

__all__ = ["has_egress", "egress_body", "HOW_TO_READ"]

Summary = Mapping[str, Any]

HOW_TO_READ = (
    "The consumers' client buffers split into priority classes, each holding at most max depth work units "
    "of 2,048 bytes: past that the oldest deliveries of the class are discarded (acked, never processed; "
    "accounted as egress_discard), except that the newest min burst messages always stay. The application "
    "takes the highest class first, so a class below it fills up and discards while the one above is served. "
    "High water and mean are the class's depth as each delivery joined it (the mean is what an arriving "
    "message found, itself included); a discard indication marks the first message taken after a discard. "
    "Sojourn is the wait in the buffer of delivered messages, after warm-up."
)


def _priorities(value: Any) -> str:
    low, high = (as_list(value) + [None, None])[:2]
    if low is None:
        return esc(None)
    return esc(low if low == high else f"{low}–{high}")


def _pair(block: Any) -> str:
    """`messages / units` of a depth block (fmt_count shows a mean with one decimal)."""
    return f"{fmt_count(dig(block, 'messages'))} / {fmt_count(dig(block, 'units'))}"


def _rows(egress: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for group, spec in egress.items():
        for c in as_list(dig(spec, "classes")):
            if not isinstance(c, Mapping):
                continue
            rows.append(
                [
                    esc(group),
                    f"<code>{esc(dig(c, 'class'))}</code>",
                    _priorities(dig(c, "priorities")),
                    f"{fmt_count(dig(spec, 'max_depth_units'))} / {fmt_count(dig(spec, 'min_burst'))}",
                    fmt_count(dig(c, "delivered")),
                    fmt_count(dig(c, "discards")),
                    fmt_percent(dig(c, "discard_share")),
                    fmt_count(dig(c, "discard_indications")),
                    _pair(dig(c, "high_water")),
                    _pair(dig(c, "mean_length")),
                    fmt_count(dig(c, "in_buffer_at_end")),
                    f"{fmt_ms(dig(c, 'sojourn_ms', 'p50'))} / {fmt_ms(dig(c, 'sojourn_ms', 'p99'))}",
                ]
            )
    return rows


def has_egress(summary: Summary) -> bool:
    """Whether a consumer group had egress classes: the section is shown only then."""
    egress = dig(summary, "egress")
    return isinstance(egress, Mapping) and bool(egress)


def egress_body(summary: Summary) -> str:
    """The section's content: one row per class of each group."""
    columns = [
        Column("group"),
        Column("class"),
        Column("priorities seen"),
        Column("max depth (units) / min burst", True),
        Column("delivered", True),
        Column("discards", True),
        Column("discarded share", True),
        Column("discard indications", True),
        Column("high water (msgs / units)", True),
        Column("mean (msgs / units)", True),
        Column("left in buffer", True),
        Column("sojourn p50 / p99 (ms)", True),
    ]
    table = html_table(columns, _rows(dig(summary, "egress", default={})), empty="")
    return f'<p class="howto">{esc(HOW_TO_READ)}</p><div class="table-wrap">{table}</div>'
