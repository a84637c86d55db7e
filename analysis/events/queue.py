"""The broker's queue as sojourn sampled it once a second (`queue_sample` events): summary.json's
`queue_depth`, and what `slow_consumers` says of the sampling itself."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from analysis.events import detail, p50_and_max, seconds_since

__all__ = ["queue_samples", "queue_depth", "sampling", "as_long"]


def as_long(value: Any) -> int | None:
    """A JSON value as a long the way Spark casts it (a fraction is cut off; anything else is null)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value) if value.strip().lstrip("+-").replace(".", "", 1).isdigit() else None
        except ValueError:
            return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return int(value)
    return None


def _double(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def queue_samples(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The samples in time order: ts_ns, ready (the event's value), unacked (null without the
    management API), consumers, source, took_ms (from its detail)."""
    samples = []
    for e in events:
        if e["kind"] != "queue_sample":
            continue
        fields = detail(e["detail"])
        source = fields.get("source")
        samples.append(
            {
                "ts_ns": e["ts_ns"],
                "ready": as_long(e["value"]),
                "unacked": as_long(fields.get("unacked")),
                "consumers": as_long(fields.get("consumers")),
                "source": source if source is None or isinstance(source, str) else json.dumps(source),
                "took_ms": _double(fields.get("took_ms")),
            }
        )
    return sorted(samples, key=lambda s: s["ts_ns"])


def queue_depth(samples: Iterable[Mapping[str, Any]], t0_ns: int) -> list[dict[str, Any]]:
    """summary.json's `queue_depth`: t_s (seconds since t0), ready, unacked, consumers, in time order."""
    keys = ("ready", "unacked", "consumers")
    return [{"t_s": seconds_since(t0_ns, s["ts_ns"]), **{k: s[k] for k in keys}} for s in samples]


def sampling(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many samples, the first source named, and the median and longest time a sample took
    (the median is a value of the data: the ceil(n/2)-th smallest)."""
    return {
        "samples": len(samples),
        "source": next((s["source"] for s in samples if s["source"] is not None), None),
        "sample_took_ms": p50_and_max(s["took_ms"] for s in samples if s["took_ms"] is not None),
    }
