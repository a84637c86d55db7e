"""Many small aggregations of one frame in one Spark action: the cube.

Each block that aggregates a trace says what it needs as *projections*: a named one emits, for
each row where its condition holds, up to three string keys and optionally a value. Every row of
the frame becomes the array of what the projections emitted for it (`inline`), and one hash
aggregate groups all of them by (projection, keys, the value's log bucket) with the count and the
value's sum, minimum and maximum: one scan, one shuffle, one small result collected as Arrow
(`toArrow`). On the driver a count comes out per key, and a value's percentiles from the
histogram of its buckets (analysis.buckets: each within buckets.RELATIVE_ERROR of the exact one).
A projection that is not `bucketed` keeps one row per key: its sum, minimum and maximum are
exact (a per-second minimum, say).

*Cells* are the plain aggregates many blocks roll up (counts, exact sums of nanoseconds, first
and last times): one grouping of the frame by a few keys, with each aggregate a column of its
own, in the same action as the projections (the two groupings' rows united and collected
together). A cell aggregate is a row's worth of work per aggregate, not a row of the cube.

The delivery cube of the prototype (benchmarks/NOTES.md, "A handful of jobs") took one action
where the blocks had taken a query each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, functions as F

from analysis.buckets import BUCKET_OFFSET, LN_GAMMA, Histogram

__all__ = ["Projection", "Cells", "Cube", "cube", "bucket"]


@dataclass(frozen=True)
class Projection:
    """What one block asks of each row: where `when` holds (null counts as false), the keys and
    the value (null: counted, not measured). `bucketed` False: the values of a key are not split
    by log bucket, so their histogram is a single exact (count, sum, min, max)."""

    name: str
    when: Column
    keys: Sequence[Column] = ()
    value: Column | None = None
    bucketed: bool = True


@dataclass(frozen=True)
class Cells:
    """A grouping of the frame by `keys` (name -> column) with the aggregate columns `aggregates`
    (name -> aggregate), collected beside the projections."""

    keys: Mapping[str, Column]
    aggregates: Mapping[str, Column] = field(default_factory=dict)


def bucket(value: Column) -> Column:
    """buckets.bucket_of in Spark: 0 for 0, else sign(v) * (BUCKET_OFFSET + floor(ln|v| / ln GAMMA))."""
    magnitude = F.floor(F.log(F.abs(value)) / F.lit(LN_GAMMA)) + F.lit(BUCKET_OFFSET)
    return F.when(value == 0, F.lit(0)).otherwise(F.signum(value).cast("long") * magnitude).cast("long")


_KEYS = ("k1", "k2", "k3")
_CELLS = "__cells__"
"""The projection name (column `p`) of the cells' rows in the collected table."""


def _emitted(p: Projection) -> Column:
    if len(p.keys) > len(_KEYS):
        raise ValueError(f"projection {p.name}: at most {len(_KEYS)} keys")
    keys = [*[k.cast("string") for k in p.keys], *[F.lit(None).cast("string")] * (len(_KEYS) - len(p.keys))]
    value = p.value.cast("double") if p.value is not None else F.lit(None).cast("double")
    row = F.struct(
        F.lit(p.name).alias("p"),
        *[k.alias(name) for k, name in zip(keys, _KEYS)],
        (F.when(value.isNotNull(), bucket(value)) if p.bucketed else F.lit(None).cast("long")).alias("b"),
        value.alias("v"),
    )
    return F.when(F.coalesce(p.when, F.lit(False)), row)


def cube(frame: DataFrame, projections: Iterable[Projection], cells: Cells | None = None) -> Cube:
    """The projections of every row of `frame`, aggregated, and its `cells`, collected: one Spark
    action."""
    wanted = list(projections)
    names = [p.name for p in wanted]
    if len(set(names)) != len(names) or _CELLS in names:
        raise ValueError(f"projection names repeat or are reserved: {names}")
    rows = frame.select(F.inline(F.filter(F.array(*[_emitted(p) for p in wanted]), lambda x: x.isNotNull())))
    table = rows.groupBy("p", *_KEYS, "b").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("v").alias("sum"),
        F.min("v").alias("min"),
        F.max("v").alias("max"),
    )
    if cells is not None:
        clash = set(cells.keys) & set(cells.aggregates) or (set(cells.keys) | set(cells.aggregates)) & set(
            table.columns
        )
        if clash:
            raise ValueError(f"cell columns clash: {sorted(clash)}")
        grouped = frame.groupBy(*[c.alias(name) for name, c in cells.keys.items()]).agg(
            *[a.alias(name) for name, a in cells.aggregates.items()]
        )
        table = table.unionByName(grouped.withColumn("p", F.lit(_CELLS)), allowMissingColumns=True)
    return Cube(table.toArrow(), list(cells.keys) + list(cells.aggregates) if cells is not None else [])


class Cube:
    """A collected cube: counts and histograms per projection and key."""

    def __init__(self, table: pa.Table, cell_columns: Sequence[str] = ()) -> None:
        self._rows: dict[str, list[dict[str, Any]]] = {}
        self._cells: list[dict[str, Any]] = []
        for row in table.to_pylist():
            if row["p"] == _CELLS:
                self._cells.append({c: row[c] for c in cell_columns})
            else:
                self._rows.setdefault(row["p"], []).append(row)

    @property
    def cells(self) -> list[dict[str, Any]]:
        """The cells' rows: a dict per group, of its keys and aggregates by name."""
        return self._cells

    def counts(self, name: str, by: int = 1) -> dict[Any, int]:
        """How many rows the projection emitted, per first key (`by` 1) or per tuple of the first
        `by` keys (2 or 3)."""
        out: dict[Any, int] = {}
        for r in self._rows.get(name, []):
            key = _key(r, by)
            out[key] = out.get(key, 0) + int(r["n"])
        return out

    def histograms(self, name: str, by: int = 1) -> dict[Any, Histogram]:
        """The histogram of the projection's values (null ones left out), per first key (`by` 1) or
        per tuple of the first `by` keys (2 or 3)."""
        parts: dict[Any, list[dict[str, Any]]] = {}
        for r in self._rows.get(name, []):
            if r["b"] is not None:
                parts.setdefault(_key(r, by), []).append(r)
        return {key: _histogram(rows) for key, rows in parts.items()}

    def totals(self, name: str, by: int = 1) -> dict[Any, tuple[int, Any, Any, Any]]:
        """Of a projection that is not bucketed: per first key (`by` 1) or tuple of the first `by`
        keys, (rows emitted, sum, min, max), the last three over the non-null values (None when
        there are none)."""
        out: dict[Any, tuple[int, Any, Any, Any]] = {}
        for r in self._rows.get(name, []):
            if r["b"] is not None:
                raise ValueError(f"projection {name} is bucketed: read its histograms")
            key = _key(r, by)
            if key in out:
                raise ValueError(f"projection {name}: more keys than by={by} tells apart")
            out[key] = (int(r["n"]), r["sum"], r["min"], r["max"])
        return out


def _key(row: dict[str, Any], by: int) -> Any:
    if by not in (1, 2, 3):
        raise ValueError(f"by is 1, 2 or 3, got {by}")
    return row["k1"] if by == 1 else tuple(row[k] for k in _KEYS[:by])


def _histogram(rows: Sequence[dict[str, Any]]) -> Histogram:
    return Histogram.from_columns(*[[r[c] for r in rows] for c in ("b", "n", "sum", "min", "max")])
