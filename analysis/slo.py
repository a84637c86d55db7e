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


def _lookup(summary: Mapping[str, Any], metric: str) -> Any:
    node: Any = summary
    for part in metric.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return None
    return node


def evaluate_slos(summary: Mapping[str, Any], exprs) -> list[dict]:
    """Evaluate each expression; a metric that is missing or null fails, saying so."""
    results: list[dict[str, Any]] = []
    for expr in exprs:
        slo = parse_slo(expr)
        value = _lookup(summary, slo.metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
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
        results.append(
            {"expr": slo.expr, "metric": slo.metric, "value": value, "passed": bool(_OPS[slo.op](value, slo.threshold))}
        )
    return results
