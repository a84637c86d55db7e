"""summary.json's `events`: the run's timeline (phase changes, consumers joining and leaving ...)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from analysis.events import seconds_since

__all__ = ["timeline", "in_order"]


def in_order(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Events by time, then kind, name and source (a null first, as Spark orders)."""
    return sorted(events, key=lambda e: tuple((e[k] is not None, e[k]) for k in ("ts_ns", "kind", "name", "source")))


def timeline(events: Iterable[Mapping[str, Any]], t0_ns: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The events but the queue samples (those are `queue_depth`), in order, each with `t_s` (seconds
    since t0) and without ts_ns; at most `limit`, and whether more were left out."""
    shown = [e for e in in_order(events) if e["kind"] != "queue_sample"]
    rows = [
        {
            "t_s": seconds_since(t0_ns, e["ts_ns"]),
            **{k: e[k] for k in ("kind", "name", "source", "value", "detail")},
        }
        for e in shown[:limit]
    ]
    return rows, len(shown) > limit
