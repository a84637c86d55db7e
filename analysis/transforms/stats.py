"""Stats blocks: count, mean, percentiles and max, in one pass.

Percentiles follow the policy in force (`percentile_policy`, set by the job from the size of
the traces), for the blocks not yet rolled up from a cube (analysis.cube, whose percentiles come
from log buckets). Exact: Spark's `percentile` aggregate, which interpolates linearly between
ranks like numpy's default, and keeps every distinct value of a group in memory. Approximate: a
value of the group whose rank is within the policy's relative rank error of the exact rank, in
memory bounded whatever n, from a KLL sketch (Apache DataSketches, `kll_sketch_agg_double`) with
`kll_k` K: rank error at most 2.296 / K^0.9723 with 99 % confidence (DataSketches' bound; 9.3e-5
for K = 32,768). The policy's `accuracy` (1 / 10,000) is the bound summary.json has always stated,
which the sketch keeps.

Nulls are ignored, so a metric can be restricted to some rows with `F.when(condition, value)`.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, functions as F

from ._common import Transform, as_column

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


KLL_CONFIDENCE = 0.99
"""The probability with which DataSketches states a KLL sketch's rank error bound."""


def kll_rank_error(k: int) -> float:
    """DataSketches' bound on a KLL sketch's normalized rank error for one quantile, at
    KLL_CONFIDENCE (KllSketch.getNormalizedRankError(k, false), fitted empirically there)."""
    return 2.296 / math.pow(k, 0.9723)


class PercentilePolicy(NamedTuple):
    exact: bool
    accuracy: int = 10_000
    kll_k: int = 32_768

    @property
    def relative_rank_error(self) -> float:
        """The bound every approximate percentile keeps: the larger of the two sketches'."""
        return max(1.0 / self.accuracy, kll_rank_error(self.kll_k))

    def describe(self) -> dict[str, Any]:
        """summary.json's `percentiles` block (docs/summary.md)."""
        if self.exact:
            return {"method": "exact", "interpolation": "linear"}
        return {
            "method": "approximate",
            "accuracy": self.accuracy,
            "relative_rank_error": self.relative_rank_error,
            "kll_k": self.kll_k,
            "confidence": KLL_CONFIDENCE,
        }


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
    """An aggregate array column: the `fractions` percentiles of `value`, by the policy in force
    (null when the group has no value)."""
    policy = _POLICY.get()
    if policy.exact:
        return F.percentile(value, list(fractions))
    return _sketch_quantiles(F.kll_sketch_agg_double(value.cast("double"), policy.kll_k), fractions)


def _sketch_quantiles(sketch: Column, fractions: Sequence[float]) -> Column:
    """The `fractions` quantiles of a KLL sketch aggregate, null for an empty sketch (Spark raises
    on one); the two uses of `sketch` are one aggregate."""
    quantiles = F.kll_sketch_get_quantile_double(sketch, F.array(*[F.lit(float(q)) for q in fractions]))
    return F.when(F.kll_sketch_get_n_double(sketch) > 0, quantiles)


MetricSpec = Mapping[str, "str | Column"]
"""Output struct name -> value column (a name or an expression; nulls skipped)."""


def stats_struct(
    value: str | Column,
    fields: Sequence[str] = STAT_FIELDS,
    quantiles: Sequence[float] = (),
) -> Column:
    """An aggregate struct column with the requested stats fields of `value`.

    With `quantiles`, the struct also has the field `quantiles`: the array of those percentiles
    (null when the group has no value), taken from the same aggregate as p50, p95 and p99: one
    sketch (or one sorted set of values, exact) per group, not two."""
    col = as_column(value)
    fractions = _fractions(quantiles)
    pcts = percentiles(col, fractions)
    return _struct(F.count(col), F.avg(col), pcts, F.max(col), F.min(col), fields, quantiles)


def _fractions(quantiles: Sequence[float]) -> list[float]:
    """PERCENTILES' fractions, then those of `quantiles` not among them."""
    fractions = list(PERCENTILES.values())
    return fractions + [q for q in quantiles if q not in fractions]


def _struct(
    count: Column,
    mean: Column,
    pcts: Column,
    max_: Column,
    min_: Column,
    fields: Sequence[str],
    quantiles: Sequence[float],
) -> Column:
    """The stats struct of `fields` from its aggregates; `pcts` holds _fractions(quantiles)."""
    fractions = _fractions(quantiles)
    exprs = {
        "count": count,
        "mean": mean,
        **{name: pcts[i] for i, name in enumerate(PERCENTILES)},
        "max": max_,
        "min": min_,  # not in a summary block; the histogram needs it
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
