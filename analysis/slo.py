"""SLO expressions (`sojourn_ms.p99 < 200`): parsing and evaluation against a summary.

Pure logic; shared by the scenario loader (to reject bad expressions early) and
the analysis job (to evaluate them).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["Slo", "SloError", "parse_slo", "evaluate_slos"]

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
_EXPR = re.compile(r"^\s*([A-Za-z_][\w.\[\]-]*)\s*(<=|>=|==|!=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


class SloError(ValueError):
    """An SLO expression that does not parse."""


class Slo(NamedTuple):
    expr: str
    metric: str
    op: str
    threshold: float


def parse_slo(expr: str) -> Slo:
    if not isinstance(expr, str):
        raise SloError(f"expected a string like 'sojourn_ms.p99 < 200', got {expr!r}")
    m = _EXPR.match(expr)
    if not m:
        raise SloError(
            f"{expr!r} is not of the form '<metric> <op> <number>' "
            f"with op one of {' '.join(_OPS)} (e.g. 'sojourn_ms.p99 < 200')"
        )
    metric, op, number = m.groups()
    return Slo(expr.strip(), metric, op, float(number))


_SELECT = re.compile(r"^([\w-]+)\[([^\]]+)\]$")
_ROW_KEYS = ("group", "consumer", "producer_group", "phase", "name")
"""A list entry selected by `[key]` is one whose group (or instance, phase or name) is `key`."""


def _lookup(summary: Mapping[str, Any], metric: str) -> list[Any]:
    """The values at `metric`: one, or one per list entry a `name[key]` segment selects (every
    consumer of group `key` for `consumers[key]`); [] when the path leads nowhere."""
    nodes: list[Any] = [summary]
    for part in _segments(metric):
        selected = _SELECT.match(part)
        name, key = selected.groups() if selected else (part, None)
        nxt: list[Any] = []
        for node in nodes:
            if not isinstance(node, Mapping) or name not in node:
                continue
            child = node[name]
            if key is None:
                nxt.append(child)
            elif isinstance(child, list):
                nxt += [row for row in child if isinstance(row, Mapping) and key in (row.get(k) for k in _ROW_KEYS)]
        nodes = nxt
    return nodes


def _segments(metric: str) -> list[str]:
    """`consumers[slow/w/0].sojourn_ms.p99` -> its segments; a dot inside [...] does not split."""
    out, depth, current = [], 0, ""
    for ch in metric:
        depth += (ch == "[") - (ch == "]")
        if ch == "." and depth == 0:
            out.append(current)
            current = ""
        else:
            current += ch
    return [*out, current]


def evaluate_slos(summary: Mapping[str, Any], exprs) -> list[dict]:
    """Evaluate each expression; a metric that is missing or null fails, saying so."""
    results: list[dict[str, Any]] = []
    for expr in exprs:
        slo = parse_slo(expr)
        values = _lookup(summary, slo.metric)
        if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) for v in values):
            results.append(
                {
                    "expr": slo.expr,
                    "metric": slo.metric,
                    "value": None,
                    "passed": False,
                    "reason": f"metric {slo.metric!r} has no numeric value in the summary",
                }
            )
            continue
        # Selected from a list (every consumer of a group): each must hold; the value shown is
        # the first that fails, else the one closest to failing.
        check = _OPS[slo.op]
        failing = [v for v in values if not check(v, slo.threshold)]
        shown = failing[0] if failing else min(values, key=lambda v: abs(v - slo.threshold))
        results.append({"expr": slo.expr, "metric": slo.metric, "value": shown, "passed": not failing})
    return results
