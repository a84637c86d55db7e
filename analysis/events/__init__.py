"""What the analysis derives from the run's events trace: small, read with pyarrow, computed on the
driver without Spark."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["detail", "seconds_since"]


def detail(text: str | None) -> dict[str, Any]:
    """An event's `detail` as a dict: {} when it is null or not a JSON object."""
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def seconds_since(t0_ns: int, ts_ns: int) -> float:
    """`ts_ns` as seconds since t0 (the summary's `t_s`)."""
    return (ts_ns - t0_ns) / 1_000_000_000
