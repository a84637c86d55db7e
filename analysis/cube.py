"""Many small aggregations of one frame in one Spark action: the cube.

Each block that aggregates a trace says what it needs as *projections*: a named one emits, for
each row where its condition holds, up to two string keys and optionally a value. Every row of
the frame becomes the array of what the projections emitted for it (`inline`), and one hash
aggregate groups all of them by (projection, keys, the value's log bucket) with the count and the
value's sum, minimum and maximum: one scan, one shuffle, one small result collected as Arrow
(`toArrow`). On the driver a count comes out per key, and a value's percentiles from the
histogram of its buckets (analysis.buckets: each within buckets.RELATIVE_ERROR of the exact one).

The delivery cube of the prototype (benchmarks/NOTES.md, "A handful of jobs") took one action
where the blocks had taken a query each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, functions as F

from analysis.buckets import BUCKET_OFFSET, LN_GAMMA, Histogram

__all__ = ["Projection", "Cube", "cube", "bucket"]


@dataclass(frozen=True)
class Projection:
    """What one block asks of each row: where `when` holds (null counts as false), the keys and
    the value (null: counted, not measured)."""

    name: str
    when: Column
    keys: Sequence[Column] = ()
    value: Column | None = None


def bucket(value: Column) -> Column:
    """buckets.bucket_of in Spark: 0 for 0, else sign(v) * (BUCKET_OFFSET + floor(ln|v| / ln GAMMA))."""
    magnitude = F.floor(F.log(F.abs(value)) / F.lit(LN_GAMMA)) + F.lit(BUCKET_OFFSET)
    return F.when(value == 0, F.lit(0)).otherwise(F.signum(value).cast("long") * magnitude).cast("long")


_KEYS = ("k1", "k2")


def _emitted(p: Projection) -> Column:
    if len(p.keys) > len(_KEYS):
        raise ValueError(f"projection {p.name}: at most {len(_KEYS)} keys")
    keys = [*[k.cast("string") for k in p.keys], *[F.lit(None).cast("string")] * (len(_KEYS) - len(p.keys))]
    value = p.value.cast("double") if p.value is not None else F.lit(None).cast("double")
    row = F.struct(
        F.lit(p.name).alias("p"),
        *[k.alias(name) for k, name in zip(keys, _KEYS)],
        F.when(value.isNotNull(), bucket(value)).alias("b"),
        value.alias("v"),
    )
    return F.when(F.coalesce(p.when, F.lit(False)), row)


def cube(frame: DataFrame, projections: Iterable[Projection]) -> Cube:
    """The projections of every row of `frame`, aggregated and collected: one Spark action."""
    wanted = list(projections)
    names = [p.name for p in wanted]
    if len(set(names)) != len(names):
        raise ValueError(f"projection names repeat: {names}")
    rows = frame.select(F.inline(F.filter(F.array(*[_emitted(p) for p in wanted]), lambda x: x.isNotNull())))
    table = (
        rows.groupBy("p", *_KEYS, "b")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("v").alias("sum"),
            F.min("v").alias("min"),
            F.max("v").alias("max"),
        )
        .toArrow()
    )
    return Cube(table)


class Cube:
    """A collected cube: counts and histograms per projection and key."""

    def __init__(self, table: pa.Table) -> None:
        self._rows: dict[str, list[dict[str, Any]]] = {}
        for row in table.to_pylist():
            self._rows.setdefault(row["p"], []).append(row)

    def counts(self, name: str, by: int = 1) -> dict[Any, int]:
        """How many rows the projection emitted, per first key (`by` 1) or per (k1, k2) (`by` 2)."""
        out: dict[Any, int] = {}
        for r in self._rows.get(name, []):
            key = _key(r, by)
            out[key] = out.get(key, 0) + int(r["n"])
        return out

    def histograms(self, name: str, by: int = 1) -> dict[Any, Histogram]:
        """The histogram of the projection's values (null ones left out), per first key (`by` 1) or
        per (k1, k2) (`by` 2)."""
        parts: dict[Any, list[dict[str, Any]]] = {}
        for r in self._rows.get(name, []):
            if r["b"] is not None:
                parts.setdefault(_key(r, by), []).append(r)
        return {key: _histogram(rows) for key, rows in parts.items()}


def _key(row: dict[str, Any], by: int) -> Any:
    if by not in (1, 2):
        raise ValueError(f"by is 1 or 2, got {by}")
    return row["k1"] if by == 1 else (row["k1"], row["k2"])


def _histogram(rows: Sequence[dict[str, Any]]) -> Histogram:
    return Histogram.from_columns(*[[r[c] for r in rows] for c in ("b", "n", "sum", "min", "max")])
