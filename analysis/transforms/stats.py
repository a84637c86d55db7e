"""Stats blocks: count, mean, percentiles and max, in one pass.

Percentiles follow the policy in force (`percentile_policy`, set by the job from the size of
the traces). Exact: Spark's `percentile` aggregate, which interpolates linearly between ranks
like numpy's default, and keeps every distinct value of a group in memory. Approximate:
`percentile_approx` with `accuracy` A, a value of the group whose rank is within n/A of the
exact rank (relative rank error 1/A), in memory bounded by A whatever n. Nulls are ignored, so
a metric can be restricted to some rows with `F.when(condition, value)`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, functions as F

from ._common import Transform

__all__ = [
    "STAT_FIELDS",
    "PERCENTILES",
    "QUANTILES",
    "PercentilePolicy",
    "EXACT",
    "percentile_policy",
    "percentiles",
    "stats_struct",
    "stats_by",
]

PERCENTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
STAT_FIELDS = ("count", "mean", *PERCENTILES, "max")
QUANTILES = tuple(round(0.05 * i, 2) for i in range(1, 21))
"""Per-consumer sojourn quantiles: 0.05, 0.10, ..., 1.00 (the last is the max)."""


class PercentilePolicy(NamedTuple):
    exact: bool
    accuracy: int = 10_000

    def describe(self) -> dict[str, Any]:
        """summary.json's `percentiles` block (docs/summary.md)."""
        if self.exact:
            return {"method": "exact", "interpolation": "linear"}
        return {"method": "approximate", "accuracy": self.accuracy, "relative_rank_error": 1.0 / self.accuracy}


EXACT = PercentilePolicy(exact=True)
_POLICY: contextvars.ContextVar[PercentilePolicy] = contextvars.ContextVar("sojourn_percentiles", default=EXACT)


@contextlib.contextmanager
def percentile_policy(policy: PercentilePolicy) -> Iterator[PercentilePolicy]:
    """Columns built by `percentiles` inside the block follow `policy`."""
    token = _POLICY.set(policy)
    try:
        yield policy
    finally:
        _POLICY.reset(token)


def percentiles(value: Column, fractions: Sequence[float]) -> Column:
    """An aggregate array column: the `fractions` percentiles of `value`, by the policy in force."""
    policy = _POLICY.get()
    if policy.exact:
        return F.percentile(value, list(fractions))
    return F.percentile_approx(value, list(fractions), policy.accuracy)


MetricSpec = Mapping[str, "str | Column"]
"""Output struct name -> value column (a name or an expression; nulls skipped)."""


def stats_struct(value: str | Column, fields: Sequence[str] = STAT_FIELDS, quantiles: Sequence[float] = ()) -> Column:
    """An aggregate struct column with the requested stats fields of `value`.

    With `quantiles`, the struct also has the field `quantiles`: the array of those percentiles
    (null when the group has no value), taken from the same aggregate as p50, p95 and p99: one
    sketch (or one sorted set of values, exact) per group, not two."""
    col = F.col(value) if isinstance(value, str) else value
    fractions = list(PERCENTILES.values())
    fractions += [q for q in quantiles if q not in fractions]
    pcts = percentiles(col, fractions)
    exprs = {
        "count": F.count(col),
        "mean": F.avg(col),
        **{name: pcts[i] for i, name in enumerate(PERCENTILES)},
        "max": F.max(col),
        "min": F.min(col),  # not in a summary block; the histogram needs it
    }
    if quantiles:
        exprs["quantiles"] = F.when(pcts.isNotNull(), F.array(*[pcts[fractions.index(q)] for q in quantiles]))
        fields = (*fields, "quantiles")
    unknown = [f for f in fields if f not in exprs]
    if unknown:
        raise ValueError(f"unknown stats fields {unknown}; known: {', '.join(exprs)}")
    return F.struct(*[exprs[f].alias(f) for f in fields])


def stats_by(
    keys: Sequence[str], metrics: MetricSpec, fields: Sequence[str] = STAT_FIELDS, also: Sequence[Column] = ()
) -> Transform:
    """Group by `keys` (none = one row) and add one stats struct per metric, and the aggregate
    columns `also` (computed in the same pass)."""

    def _stats(df: DataFrame) -> DataFrame:
        aggs = [stats_struct(value, fields).alias(name) for name, value in metrics.items()]
        return df.groupBy(*keys).agg(*aggs, *also)

    return _stats
