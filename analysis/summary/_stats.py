"""A stats dict (a histogram's `stats`, or collected aggregates) as summary.json's plain stats block."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analysis.transforms.stats import STAT_FIELDS

__all__ = ["stats_block"]


def stats_block(struct: Any, fields: Sequence[str] = STAT_FIELDS) -> dict:
    """A stats dict or Row (or None) as the summary's plain dict.

    Every value but `count` is null when the count is 0; a missing struct (no
    rows at all in the group) is an empty block.
    """
    values = struct.asDict() if hasattr(struct, "asDict") else dict(struct or {})
    block = {f: values.get(f) for f in fields}
    if "count" in block:
        block["count"] = int(block["count"] or 0)
        if block["count"] == 0:
            block.update({f: None for f in fields if f != "count"})
    return block
