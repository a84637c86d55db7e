"""What the analysis derives from the run's events trace: small, read with pyarrow, computed on the
driver without Spark."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

__all__ = ["detail", "seconds_since", "p50_and_max"]


def detail(text: str | None) -> dict[str, Any]:
    """An event's `detail` as a dict: {} when it is null or not a JSON object."""
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def p50_and_max(values: Iterable[float]) -> dict[str, float | None]:
    """{"p50", "max"} of `values` (None for both when there are none); the p50 is a value of the
    data: the ceil(n/2)-th smallest."""
    ordered = sorted(values)
    return {
        "p50": ordered[max(math.ceil(0.5 * len(ordered)) - 1, 0)] if ordered else None,
        "max": ordered[-1] if ordered else None,
    }


def seconds_since(t0_ns: int, ts_ns: int) -> float:
    """`ts_ns` as seconds since t0 (the summary's `t_s`)."""
    return (ts_ns - t0_ns) / 1_000_000_000
