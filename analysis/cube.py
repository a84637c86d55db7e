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
and last times, means): named groupings of the frame by a few keys, with each aggregate a column
of its own, in the same action as the projections (every grouping's rows united and collected
together). A cell aggregate is compiled, a row's worth of work per aggregate, where a projection
is a row of the cube per frame row: what can be a grouping of plain aggregates should be.

The delivery cube of the prototype (benchmarks/NOTES.md, "A handful of jobs") took one action
where the blocks had taken a query each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, functions as F

from analysis.buckets import BUCKET_OFFSET, LN_GAMMA, Histogram

__all__ = ["Projection", "Cells", "Cube", "cube", "bucket", "collected"]


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
    (name -> aggregate), collected beside the projections; `name` tells a cube's groupings apart."""

    keys: Mapping[str, Column]
    aggregates: Mapping[str, Column] = field(default_factory=dict)
    name: str = "cells"


def collected(frame: DataFrame) -> pa.Table:
    """`frame`'s rows as an Arrow table. Through Spark Connect, without the schema request that
    `toArrow` sends before the query (the server analyses the whole plan once more for it: 0.15 s
    of the deliveries' cube's 0.8 s in a warm quickstart analysis): the rows come with their Arrow
    schema, the one `toArrow` casts to for the flat columns of longs, doubles, booleans and strings
    the job collects. `_to_table` is the Connect client's own step of `toArrow` (a classic frame has
    none); where it is missing, `toArrow`."""
    to_table = getattr(frame, "_to_table", None)
    return to_table()[0] if to_table is not None else frame.toArrow()


def bucket(value: Column) -> Column:
    """buckets.bucket_of in Spark: 0 for 0, else sign(v) * (BUCKET_OFFSET + floor(ln|v| / ln GAMMA))."""
    magnitude = F.floor(F.log(F.abs(value)) / F.lit(LN_GAMMA)) + F.lit(BUCKET_OFFSET)
    return F.when(value == 0, F.lit(0)).otherwise(F.signum(value).cast("long") * magnitude).cast("long")


_KEYS = ("k1", "k2", "k3")
_CELL_COLUMN = "cell"
"""The collected table's column of the cells' rows, each a JSON object of its keys and aggregates."""
_CELLS = "__cells__"
"""The projection name (column `p`) of the cells' rows in the collected table, before their name."""


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


def cube(frame: DataFrame, projections: Iterable[Projection], cells: Sequence[Cells] = ()) -> Cube:
    """The projections of every row of `frame`, aggregated, and its groupings `cells`, collected:
    one Spark action."""
    wanted = list(projections)
    names = [p.name for p in wanted]
    if len(set(names)) != len(names) or any(n.startswith(_CELLS) for n in names):
        raise ValueError(f"projection names repeat or are reserved: {names}")
    if len({c.name for c in cells}) != len(cells):
        raise ValueError(f"cells names repeat: {[c.name for c in cells]}")
    # every projection's struct, null where it emits nothing: dropped after `inline` rather than by a
    # `filter` of the array, a higher-order function Spark evaluates row by row, interpreted
    # (with no projection, one that emits nothing, so that the table has its columns)
    emitted = [_emitted(p) for p in wanted] or [_emitted(Projection(_CELLS, F.lit(False)))]
    rows = frame.select(F.inline(F.array(*emitted))).where(F.col("p").isNotNull())
    table = rows.groupBy("p", *_KEYS, "b").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("v").alias("sum"),
        F.min("v").alias("min"),
        F.max("v").alias("max"),
    )
    columns: dict[str, list[str]] = {}
    for c in cells:
        own = [*c.keys, *c.aggregates]
        clash = set(c.keys) & set(c.aggregates)
        if clash:
            raise ValueError(f"cell columns of {c.name} clash: {sorted(clash)}")
        grouped = frame.groupBy(*[k.alias(name) for name, k in c.keys.items()]).agg(
            *[a.alias(name) for name, a in c.aggregates.items()]
        )
        # a cell row as one JSON text: its columns as columns of the table would cost every projection
        # row a null slot each (at 10M messages, 35 of them made the table 1.5 GB, past Spark's 1 GiB
        # of collected results, where it is 0.35 GB without)
        cell = F.to_json(F.struct(*[F.col(name) for name in own]), {"ignoreNullFields": "false"})
        rows_of = grouped.select(F.lit(_CELLS + c.name).alias("p"), cell.alias(_CELL_COLUMN))
        table = table.unionByName(rows_of, allowMissingColumns=True)
        columns[c.name] = own
    return Cube(collected(table), columns)


class Cube:
    """A collected cube: counts and histograms per projection and key, read from its Arrow table
    (sorted by projection, keys and bucket once; each projection's rows a slice of it)."""

    def __init__(self, table: pa.Table, cell_columns: Mapping[str, Sequence[str]] | None = None) -> None:
        self._cells: dict[str, list[dict[str, Any]]] = {}
        for name, own in (cell_columns or {}).items():
            texts = table.filter(pc.equal(table["p"], _CELLS + name))[_CELL_COLUMN].to_pylist()
            self._cells[name] = [{k: row.get(k) for k in own} for row in map(json.loads, texts)]
        is_cell = pc.starts_with(table["p"], _CELLS)
        rows = table.filter(pc.invert(is_cell)).select(["p", *_KEYS, "b", "n", "sum", "min", "max"])
        # a key's rows next to each other, a null key's too (nulls sort last)
        order = [(c, "ascending") for c in ("p", *_KEYS, "b")]
        self._rows = rows.take(pc.sort_indices(rows, sort_keys=order))
        names = self._rows["p"].to_numpy(zero_copy_only=False) if len(self._rows) else np.empty(0, object)
        starts = np.flatnonzero(np.r_[True, names[1:] != names[:-1]]) if len(names) else np.empty(0, np.int64)
        ends = np.r_[starts[1:], len(names)]
        self._slices = {str(names[a]): (int(a), int(b)) for a, b in zip(starts, ends)}

    def cells(self, name: str = "cells") -> list[dict[str, Any]]:
        """The rows of the grouping `name`: a dict per group, of its keys and aggregates by name."""
        return self._cells[name]

    def _groups(self, name: str, by: int) -> Iterator[tuple[Any, pa.Table]]:
        """The projection's rows per key (the first `by` keys), in key order."""
        if by not in (1, 2, 3):
            raise ValueError(f"by is 1, 2 or 3, got {by}")
        start, end = self._slices.get(name, (0, 0))
        rows = self._rows.slice(start, end - start)
        if not len(rows):
            return
        # a row starts a group where one of its keys differs from the row before's (null a value of its own)
        changed = np.zeros(len(rows), dtype=bool)
        changed[0] = True
        for k in _KEYS[:by]:
            values = rows[k].to_numpy(zero_copy_only=False)
            changed[1:] |= values[1:] != values[:-1]
        starts = np.flatnonzero(changed)
        for a, b in zip(starts, np.r_[starts[1:], len(rows)]):
            group = rows.slice(int(a), int(b - a))
            first = [group[k][0].as_py() for k in _KEYS[:by]]
            yield (first[0] if by == 1 else tuple(first)), group

    def counts(self, name: str, by: int = 1) -> dict[Any, int]:
        """How many rows the projection emitted, per first key (`by` 1) or per tuple of the first
        `by` keys (2 or 3)."""
        return {key: int(pc.sum(rows["n"]).as_py()) for key, rows in self._groups(name, by)}

    def histograms(self, name: str, by: int = 1) -> dict[Any, Histogram]:
        """The histogram of the projection's values (null ones left out), per first key (`by` 1) or
        per tuple of the first `by` keys (2 or 3); a key with only null values has none."""
        out = {}
        for key, rows in self._groups(name, by):
            valued = rows.filter(pc.is_valid(rows["b"]))
            if len(valued):
                out[key] = Histogram.from_columns(
                    *[valued[c].to_numpy(zero_copy_only=False) for c in ("b", "n", "sum", "min", "max")]
                )
        return out

    def totals(self, name: str, by: int = 1) -> dict[Any, tuple[int, Any, Any, Any]]:
        """Of a projection that is not bucketed: per first key (`by` 1) or tuple of the first `by`
        keys, (rows emitted, sum, min, max), the last three over the non-null values (None when
        there are none)."""
        out: dict[Any, tuple[int, Any, Any, Any]] = {}
        for key, rows in self._groups(name, by):
            if rows["b"].null_count != len(rows):
                raise ValueError(f"projection {name} is bucketed: read its histograms")
            if len(rows) > 1:
                raise ValueError(f"projection {name}: more keys than by={by} tells apart")
            (row,) = rows.to_pylist()
            out[key] = (int(row["n"]), row["sum"], row["min"], row["max"])
        return out
