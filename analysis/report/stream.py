"""The report's stream section: each consumer group's reading of the stream, where it started, what it
acked, and how many of the run's messages it has not read yet. Rendered from the summary's `stream`
block alone (docs/summary.md); a queue that is not a stream renders nothing at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._format import as_list, as_number, dig, esc, fmt_count
from ._table import Column, html_table

__all__ = ["has_stream", "stream_body", "HOW_TO_READ"]

Summary = Mapping[str, Any]

HOW_TO_READ = (
    "The queue is a stream: an append-only log every consumer group reads whole, each from where it "
    "started (its offset: first reads from the oldest message, next from what is published after it "
    "attached). Nothing leaves a stream, so a message counts as acked once every group that reads it "
    "acked it; 'not yet read' are the run's messages a group reads but had not acked when the run "
    "ended (it fell behind, or the drain timed out)."
)

_GROUPS = [
    Column("group"),
    Column("offset"),
    Column("first offset read", True),
    Column("acked deliveries", True),
    Column("not yet read", True),
]


def has_stream(summary: Summary) -> bool:
    """Whether the run's queue was a stream: the summary's `stream` block is not empty."""
    return bool(dig(summary, "stream", default={}))


def stream_body(summary: Summary) -> str:
    groups = [g for g in as_list(dig(summary, "stream", "groups")) if isinstance(g, Mapping)]
    behind = [g for g in groups if as_number(dig(g, "not_yet_read"))]
    idle = [g for g in groups if dig(g, "first_offset") is None]
    chip = (
        '<p class="chip good"><b>✓ every group read every message it reads</b></p>'
        if not behind and not idle
        else "".join(
            f'<p class="chip bad"><b>✗ {len(some)} group(s) {why}</b>: '
            + ", ".join(f"<code>{esc(dig(g, 'group'))}</code>" for g in some)
            + "</p>"
            for some, why in ((behind, "had not read every message"), (idle, "read nothing"))
            if some
        )
    )
    rows = [
        [
            f"<code>{esc(dig(g, 'group'))}</code>",
            esc(dig(g, "offset")),
            fmt_count(dig(g, "first_offset")) if dig(g, "first_offset") is not None else "–",
            fmt_count(dig(g, "acked")),
            fmt_count(dig(g, "not_yet_read")),
        ]
        for g in groups
    ]
    return (
        f'<p class="howto">{esc(HOW_TO_READ)}</p>{chip}'
        f'<div class="table-wrap">{html_table(_GROUPS, rows, empty="no consumer group")}</div>'
    )
