"""summary.json's `network` block: the network impairment as the proxy recorded it, periods with their
settings, and its self-measurement (docs/network.md, docs/summary.md).

The proxy writes a `network_change` event at each step of its timeline (detail: the
whole state in force, with the step's scheduled `at_s`), `network_reset` when
established connections were reset, and `proxy_stats` per direction for each period
(`scope: period`) and for its whole run (`scope: run`). With several proxies (one per
load-generating process) each step is recorded once per proxy: periods are keyed by
the scheduled `at_s`, and measurements are combined: counts and bytes add up, p50s
and means are count-weighted means of the proxies' values, p99s and maxima are the
largest (exact with one proxy, which is the usual case).

The details are read with the schemas below, as Spark's `from_json` read them when it computed
this block: a detail that is not a JSON object reads as null; a field missing, null, or of a type
its column can not take reads as null, the others are kept; a number is a double column's float
(an integer too), a long column's int only when written as an integer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any, TypeAlias

from analysis.events import detail

__all__ = ["DIRECTIONS", "MEASUREMENT_FIELDS", "NETWORK_EVENT_KINDS", "network_block"]

NETWORK_EVENT_KINDS = ("network_change", "network_down", "network_up", "network_reset")
DIRECTIONS = ("upstream", "downstream")
MEASUREMENT_FIELDS = (
    "proxies",
    "count",
    "bytes",
    "dropped",
    "error_p50_ms",
    "error_p99_ms",
    "error_max_ms",
    "delay_p50_ms",
    "delay_p99_ms",
    "delay_mean_ms",
)

_Type: TypeAlias = "str | Mapping[str, _Type]"
"""A column's type as from_json reads it: 'double', 'long', 'string', 'boolean', or a struct (its fields)."""

_LINK: dict[str, _Type] = {"latency_ms": "double", "jitter_ms": "double", "bandwidth_bytes_per_s": "double"}
_STATE: dict[str, _Type] = {
    "at_s": "double",
    "phase": "string",
    "down": "boolean",
    "reset_peer": "boolean",
    "upstream": _LINK,
    "downstream": _LINK,
}
_STATS: dict[str, _Type] = {
    "scope": "string",
    "direction": "string",
    "at_s": "double",
    "count": "long",
    "bytes": "long",
    "dropped": "long",
    "error_p50_ms": "double",
    "error_p99_ms": "double",
    "error_max_ms": "double",
    "delay_p50_ms": "double",
    "delay_p99_ms": "double",
    "delay_mean_ms": "double",
}
_WEIGHTED = ("error_p50_ms", "delay_p50_ms", "delay_mean_ms")
"""Combined as count-weighted means; the other doubles of a measurement as their maximum."""


def network_block(
    events: Sequence[Mapping[str, Any]], t0_ns: int, duration_s: float, ended_ns: int | None = None
) -> dict[str, Any] | None:
    """The summary's `network` block from the events trace's rows (each a mapping of the EVENT columns).

    None when the run had no proxy (no `network_change` event with an `at_s`). The last period ends
    at the end of the run: `ended_ns` when known, never before `duration_s`.
    """
    end_s = float(duration_s)
    if ended_ns:
        end_s = max(end_s, (int(ended_ns) - int(t0_ns)) / 1e9)
    steps: dict[float, _MinBy] = {}
    resets: set[float] = set()
    by_period: dict[tuple[float, str], list[tuple[Any, dict[str, Any]]]] = {}
    by_run: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
    for e in events:
        kind = e["kind"]
        if kind == "network_change" and e["detail"] is not None:
            d = _from_json(e["detail"], _STATE)
            if d["at_s"] is not None:
                steps.setdefault(_key(d["at_s"]), _MinBy()).update(d, e["ts_ns"])
        elif kind == "network_reset":
            d = _from_json(e["detail"], _STATE)
            if d["at_s"] is not None:
                resets.add(_key(d["at_s"]))
        elif kind == "proxy_stats" and e["detail"] is not None:
            s = _from_json(e["detail"], _STATS)
            if s["direction"] not in DIRECTIONS:
                continue  # a measurement of neither direction is nowhere in the block
            if s["scope"] == "run":
                by_run.setdefault(s["direction"], []).append((e["worker"], s))
            elif s["scope"] == "period" and s["at_s"] is not None:  # a null at_s joins no period
                by_period.setdefault((_key(s["at_s"]), s["direction"]), []).append((e["worker"], s))
    if not steps:
        return None
    starts = sorted(steps, key=_order)
    periods = []
    for i, start in enumerate(starts):
        d = steps[start].value or {}
        links = {x: d.get(x) or {} for x in DIRECTIONS}
        periods.append(
            {
                "start_s": start,
                "end_s": starts[i + 1] if i + 1 < len(starts) else max(end_s, start, key=_order),
                "phase": d.get("phase"),
                "down": bool(d.get("down")),
                "reset": start in resets,
                **{
                    x: {
                        "latency_ms": links[x].get("latency_ms"),
                        "jitter_ms": links[x].get("jitter_ms"),
                        "bandwidth_bytes_per_s": links[x].get("bandwidth_bytes_per_s"),
                        "measured": _combined(by_period[start, x]) if (start, x) in by_period else None,
                    }
                    for x in DIRECTIONS
                },
            }
        )
    return {"periods": periods, "proxy": {x: _combined(by_run[x]) if x in by_run else None for x in DIRECTIONS}}


class _MinBy:
    """Spark's `min_by(d, ts_ns)` over a step's records: the detail of the earliest (of equal times the
    later seen; a null time is passed over)."""

    def __init__(self) -> None:
        self.value: dict[str, Any] | None = None
        self.ordering: int | None = None

    def update(self, value: dict[str, Any], ordering: int | None) -> None:
        if self.ordering is None:
            self.value, self.ordering = (None if ordering is None else value), ordering
        elif ordering is not None and not self.ordering < ordering:
            self.value, self.ordering = value, ordering


def _combined(rows: Sequence[tuple[Any, Mapping[str, Any]]]) -> dict[str, Any]:
    """Several proxies' measurements of one direction (and period) merged (see the module doc)."""
    stats = [s for _, s in rows]
    merged: dict[str, Any] = {"proxies": len({w for w, _ in rows if w is not None})}
    for name in MEASUREMENT_FIELDS[1:]:
        if name in ("count", "bytes", "dropped"):
            merged[name] = _sum(s[name] for s in stats)
        elif name in _WEIGHTED:
            merged[name] = _weighted(stats, name)
        else:
            merged[name] = _max(s[name] for s in stats)
    return merged


def _weighted(stats: Sequence[Mapping[str, Any]], name: str) -> float | None:
    """round(sum(x * count) / sum(count where x is not null), 4); null over no value or no weight."""
    pairs = [(s[name], s["count"]) for s in stats if s[name] is not None and s["count"] is not None]
    total = _sum(x * n for x, n in pairs)
    weight = _sum(n for _, n in pairs)
    if total is None or not weight:
        return None
    return _round4(total / float(weight))


def _sum(values: Iterable[Any]) -> Any:
    """Spark's sum: of the non-null values, null when there is none."""
    total = None
    for v in values:
        if v is not None:
            total = v if total is None else total + v
    return total


def _max(values: Iterable[float | None]) -> float | None:
    """Spark's max of doubles: of the non-null values (NaN the largest), null when there is none."""
    present = [v for v in values if v is not None]
    return max(present, key=_order) if present else None


_STEP = Decimal("0.0001")


def _round4(x: float) -> float:
    """Spark's round(x, 4) of a double: HALF_UP on the decimal it prints as; NaN and infinities as they are."""
    if not math.isfinite(x):
        return x
    with localcontext() as ctx:
        ctx.prec = 400  # room for any double's integer digits and the four decimals
        return float(Decimal(repr(x)).quantize(_STEP, rounding=ROUND_HALF_UP)) + 0.0  # no -0.0, as Spark


_NAN = float("nan")


def _key(x: float) -> float:
    """A double as Spark groups and joins it: -0.0 as 0.0, every NaN one value."""
    return _NAN if math.isnan(x) else x + 0.0


def _order(x: float) -> tuple[bool, float]:
    """Spark's ordering of doubles: NaN above everything."""
    return (math.isnan(x), x)


# the details


def _from_json(text: str | None, schema: Mapping[str, _Type]) -> dict[str, Any]:
    """The fields of `schema` in a detail, in its order (all null when the detail is not a JSON object)."""
    return _struct(detail(text), schema)


def _struct(obj: Mapping[str, Any], schema: Mapping[str, _Type]) -> dict[str, Any]:
    return {name: _converted(obj.get(name), kind) for name, kind in schema.items()}


def _converted(value: Any, kind: _Type) -> Any:
    """A JSON value as a column of `kind` takes it, or None."""
    if value is None:
        return None
    if not isinstance(kind, str):  # a struct
        return _struct(value, kind) if isinstance(value, dict) else None
    if kind == "string":
        return value if isinstance(value, str) else json.dumps(value)
    if kind == "boolean" or isinstance(value, bool):
        return value if kind == "boolean" and isinstance(value, bool) else None
    if kind == "long":  # an integer only: 1.5 is no count
        return value if isinstance(value, int) else None
    return float(value) if isinstance(value, (int, float)) else None
