"""The report's consumer-churn section: crashes, lost connections, requeues and double processing.

Rendered from the summary's `consumers_churn` block alone (docs/summary.md); a run without churn
(no rejoin, crash, lost connection or redelivery) renders nothing at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._format import as_list, dig, esc, fmt_count
from ._table import Column, html_table

__all__ = ["has_churn", "churn_body", "counts_by_class", "HOW_TO_READ"]

Summary = Mapping[str, Any]

HOW_TO_READ = (
    "Consumers that left on the timeline. A clean leave cancels, processes and acks its buffer; a crash "
    "(leave: crash) finishes the message in hand without acking it and drops the connection, and a lost "
    "connection does the same unplanned. Either way the broker requeues every unacked delivery and "
    "delivers it again with redelivered=true: 'requeued' counts the deliveries a crash or a closed channel "
    "left behind, 'redelivered' the deliveries received with the flag. A message processed but not acked "
    "when its consumer went is processed again ('processed twice'); an ack lost with the connection shows "
    "as 'acked twice'. The last columns follow every message a requeued delivery held to the accounting "
    "class it ended in: none may end unaccounted."
)

_COLUMNS = [
    Column("group"),
    Column("joins", True),
    Column("clean leaves", True),
    Column("crashes", True),
    Column("connections lost", True),
    Column("requeued (crash)", True),
    Column("requeued (closed)", True),
    Column("redelivered", True),
    Column("processed twice", True),
    Column("acked twice", True),
    Column("held messages", True),
    Column("they ended as"),
    Column("unaccounted", True),
]


def counts_by_class(counts: Any) -> str:
    """`{acked: 17, consumer_reject: 2}` as "acked 17, consumer_reject 2" ("–" when empty): where the
    messages a row follows ended, by accounting class."""
    if not isinstance(counts, Mapping) or not counts:
        return esc("–")
    return ", ".join(f"{esc(k)} {fmt_count(v)}" for k, v in counts.items())


def _row(name: str, r: Mapping[str, Any]) -> list[str]:
    unaccounted = dig(r, "held_unaccounted")
    return [
        name,
        *(
            fmt_count(dig(r, k))
            for k in (
                "joins",
                "clean_leaves",
                "crashes",
                "connections_lost",
                "requeued_crashed",
                "requeued_unsettled",
                "redelivered",
                "processed_twice",
                "acked_twice",
                "held_messages",
            )
        ),
        counts_by_class(dig(r, "held_then")),
        f'<span class="{"bad" if unaccounted else ""}">{fmt_count(unaccounted)}</span>',
    ]


def _verdict(block: Mapping[str, Any]) -> str:
    totals = dig(block, "totals", default={})
    held = fmt_count(dig(totals, "held_messages"))
    if dig(block, "nothing_lost") is True:
        return (
            f'<p class="chip good"><b>✓ nothing lost to churn</b>: every one of the {held} messages a '
            f"requeued delivery held ended acked, discarded with a reason or in the broker.</p>"
        )
    return (
        f'<p class="chip bad"><b>✗ {fmt_count(dig(totals, "held_unaccounted"))} of the {held} messages a '
        f"requeued delivery held ended unaccounted</b></p>"
    )


def has_churn(summary: Summary) -> bool:
    """Whether a consumer rejoined, crashed, lost its connection or was redelivered to: the section
    is shown only then."""
    return dig(summary, "consumers_churn", "churn") is True


def churn_body(summary: Summary) -> str:
    """The section's content: per group, what its consumers' leaving did, and where it ended."""
    block = dig(summary, "consumers_churn", default={})
    groups = [g for g in as_list(dig(block, "groups")) if isinstance(g, Mapping)]
    rows = [_row(f"<code>{esc(dig(g, 'group'))}</code>", g) for g in groups]
    if len(groups) > 1 and isinstance(dig(block, "totals"), Mapping):
        rows.append(_row("<b>all</b>", dig(block, "totals")))
    return (
        f'<p class="howto">{esc(HOW_TO_READ)}</p>'
        f'{_verdict(block)}<div class="table-wrap">{html_table(_COLUMNS, rows, empty="")}</div>'
    )
