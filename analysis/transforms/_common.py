"""Shapes and small column helpers shared by the transform modules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from pyspark.sql import Column, DataFrame, SparkSession, functions as F
from pyspark.sql.types import StructType

Transform = Callable[[DataFrame], DataFrame]
"""A pure DataFrame -> DataFrame step, applied with `df.transform(step)`."""

ACKED_OUTCOMES = ("ack", "auto_ack")
"""Delivery outcomes that mean the message was processed and settled for good."""

HELD_OUTCOMES = ("crashed", "unsettled")
"""Delivery outcomes of a crashed or unsettled consumer: the broker requeued what it held."""

NS_PER_MS = 1e6
NS_PER_S = 1_000_000_000


def few(frame: DataFrame) -> DataFrame:
    """`frame` as the small side of a join: sent whole to every task (a broadcast), so the other side
    is neither shuffled nor sorted; unless the session runs without broadcasts (small traces:
    analysis.session.sql_settings), where a broadcast is a Spark job of its own and the join's one
    partition holds everything anyway."""
    if frame.sparkSession.conf.get("spark.sql.autoBroadcastJoinThreshold") == "-1":
        return frame
    return F.broadcast(frame)


def as_column(value: str | Column) -> Column:
    """A column given by its name or as an expression, as an expression."""
    return F.col(value) if isinstance(value, str) else value


def ms_between(later: str, earlier: str) -> Column:
    """`later - earlier` in milliseconds: integer nanoseconds subtracted first, then scaled."""
    return (F.col(later) - F.col(earlier)) / F.lit(NS_PER_MS)


def is_acked(outcome: str = "outcome") -> Column:
    return F.col(outcome).isin(*ACKED_OUTCOMES)


def seconds_to_ns(seconds: float) -> int:
    """Offsets from run.json (floats in s) to integer ns, rounded to the nearest ns."""
    return int(round(seconds * NS_PER_S))


def local_rows(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str | StructType) -> DataFrame:
    """A small frame of literal rows, built in the JVM from SQL literals: `createDataFrame` of a
    Python list ships the rows through a Python worker process, on every executor of a cluster."""
    struct = schema if isinstance(schema, StructType) else cast(StructType, StructType.fromDDL(schema))
    if not rows:
        return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in struct.fields])
    literal = [F.struct(*[F.lit(v).cast(f.dataType).alias(f.name) for v, f in zip(row, struct.fields)]) for row in rows]
    return spark.range(1).select(F.inline(F.array(*literal)))
