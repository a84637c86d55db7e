"""Tolerant access to a summary dict and the number/text formatting the report uses.

A summary may be partial (an interrupted run, an older writer, `{}`): every helper
here turns a missing key, a null or a wrong type into "no value" instead of raising.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from collections.abc import Mapping
from typing import Any

from analysis.redact import mask_urls

__all__ = [
    "MISSING",
    "dig",
    "as_list",
    "as_number",
    "mask_urls",
    "esc",
    "plot_text",
    "fmt_count",
    "fmt_exact",
    "fmt_ms",
    "fmt_rate",
    "fmt_seconds",
    "fmt_percent",
    "fmt_utc",
]

#: Shown wherever a value is absent or null (an en dash, never "None" or "nan").
MISSING = "–"


def dig(node: Any, *path: str | int, default: Any = None) -> Any:
    """`dig(summary, "run", "scenario")`; `default` if any step is missing or not a container."""
    for key in path:
        if isinstance(key, int):
            if isinstance(node, (list, tuple)) and -len(node) <= key < len(node):
                node = node[key]
                continue
            return default
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        else:
            return default
    return default if node is None else node


def as_list(value: Any) -> list:
    """The value if it is a list, else an empty list (a null or a dict where a list belongs)."""
    return list(value) if isinstance(value, (list, tuple)) else []


def as_number(value: Any) -> float | int | None:
    """A finite int or float, or None; booleans and numeric strings are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def esc(value: Any) -> str:
    """Text for HTML: None becomes the dash, URL passwords are masked, then escaped."""
    if value is None:
        return MISSING
    return html.escape(mask_urls(str(value)))


def plot_text(value: Any) -> str:
    """Text for a plotly label or hover: plotly reads it as pseudo-HTML, so escape it too."""
    if value is None:
        return ""
    return html.escape(mask_urls(str(value)), quote=False)


def fmt_count(value: Any) -> str:
    n = as_number(value)
    if n is None:
        return MISSING
    if float(n).is_integer():
        return f"{int(n):,}"
    return f"{n:,.1f}"


def fmt_exact(value: Any) -> str:
    """A number shown close to as-is (SLO values, event values): `910.5`, `17`, `0.001`."""
    n = as_number(value)
    if n is None:
        return MISSING
    if float(n).is_integer():
        return f"{int(n):,}"
    if abs(n) < 0.001:
        return f"{n:.2e}"
    return f"{n:,.3f}".rstrip("0").rstrip(".")


def _sig(x: float) -> str:
    """Three significant digits for small values, whole numbers (with separators) for large."""
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    if a == 0:
        return "0"
    if a >= 0.001:
        return f"{x:.3f}"
    return f"{x:.1e}"


def fmt_ms(value: Any) -> str:
    """A duration already in milliseconds, without the unit (the column header carries it)."""
    n = as_number(value)
    return MISSING if n is None else _sig(float(n))


def fmt_rate(value: Any) -> str:
    n = as_number(value)
    return MISSING if n is None else _sig(float(n))


def fmt_seconds(value: Any, unit: bool = True) -> str:
    n = as_number(value)
    if n is None:
        return MISSING
    text = f"{n:g}" if abs(n) < 1e6 else f"{n:,.0f}"
    if not unit:
        return text
    if abs(n) >= 120:
        minutes, seconds = divmod(float(n), 60)
        return f"{text} s ({int(minutes)} min {seconds:02.0f} s)"
    return f"{text} s"


def fmt_percent(fraction: Any) -> str:
    """`0.873` -> `87.3 %`."""
    n = as_number(fraction)
    return MISSING if n is None else f"{n * 100:.1f} %"


def fmt_utc(t_ns: Any) -> str:
    """Nanoseconds since the epoch -> `2026-11-21 14:00:00.000 UTC`."""
    n = as_number(t_ns)
    if n is None:
        return MISSING
    seconds, rest_ns = divmod(int(n), 1_000_000_000)
    try:
        moment = _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return MISSING
    return f"{moment:%Y-%m-%d %H:%M:%S}.{rest_ns // 1_000_000:03d} UTC"
