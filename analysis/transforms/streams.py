"""A stream's accounting (queue.type: stream): every consumer group reads the whole log from where it
started, and nothing leaves it, so a message is `acked` once every group that reads it has acked it,
and `not_yet_read` while some such group has not (docs/summary.md, `stream`).

Which groups read a message: a group whose `offset` is `first` reads every message, one with an
integer offset those from it on (fixed_start); any other (next, last, a time) those at or after the
least offset it read (`start`, the least `stream_offset` among its deliveries; a group that read
nothing reads none). A message's offset is known from any delivery of it; for one no group read,
its publish time stands in: a group reads it when it was published no earlier than the message at
the group's start (`start_publish_ns`).

Each group is a bit of a long: the facts of a message carry the groups that acked it
(`_read_groups`) and the groups that read it (`_expected`), computed from literals (the starts, of
one small query: least_offsets, collected by summary.streams.stream_starts) in the grouping by
message id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, functions as F

from analysis.schema import MAX_STREAM_GROUPS

from ._common import Transform, is_acked

__all__ = ["StreamGroup", "MAX_GROUPS", "least_offsets", "read_bit", "expected_bits", "fixed_start"]

MAX_GROUPS = MAX_STREAM_GROUPS


class StreamGroup(NamedTuple):
    name: str
    offset: Any  # the scenario's `offset` (first, last, next, an offset, a timestamp; None: next)
    start: int | None  # the first offset it reads (fixed_start, else the least it read; None: it read none)
    start_publish_ns: int | None = None  # the publish time of the message at its least offset read


def fixed_start(offset: Any) -> int | None:
    """The first offset a group reads when its `offset` says it alone: first is 0, an integer is
    itself; None for next, last and a time (known only from what the group read)."""
    if offset == "first":
        return 0
    return offset if isinstance(offset, int) and not isinstance(offset, bool) else None


def least_offsets(readers: Sequence[tuple[str, Any]]) -> Transform:
    """Applied to deliveries: one row, per group (in the order of `readers`, at most MAX_GROUPS) the
    least stream_offset of its deliveries (`o0`, `o1`, ...) and the publish time of that delivery's
    message (`p0`, `p1`, ...); nulls for a group that read nothing."""
    group, offset = F.col("consumer_group"), F.col("stream_offset")

    def _least(deliveries: DataFrame) -> DataFrame:
        columns = []
        for i, (name, _) in enumerate(readers[:MAX_GROUPS]):
            mine = group == name
            columns.append(F.min(F.when(mine, offset)).alias(f"o{i}"))
            columns.append(F.min_by(F.when(mine, F.col("publish_ns")), F.when(mine, offset)).alias(f"p{i}"))
        return deliveries.agg(*columns)

    return _least


def read_bit(groups: Sequence[StreamGroup]) -> Column:
    """A delivery row's group bit when it was acked (0 otherwise, and for a group not followed)."""
    bit = F.lit(0).cast("long")
    group = F.col("consumer_group")
    for i, g in enumerate(groups):
        bit = F.when(group == g.name, F.lit(1 << i).cast("long")).otherwise(bit)
    return F.when(is_acked(), bit).otherwise(F.lit(0).cast("long"))


def expected_bits(groups: Sequence[StreamGroup], offset: Column, publish_ns: Column) -> Column:
    """The groups that read the message at `offset` (null: no group read it; then by `publish_ns`)."""
    out = F.lit(0).cast("long")
    for i, g in enumerate(groups):
        if g.start is None:
            continue
        by_time = F.lit(True) if g.start_publish_ns is None else publish_ns >= F.lit(g.start_publish_ns)
        reads = F.coalesce(F.when(offset.isNotNull(), offset >= F.lit(g.start)).otherwise(by_time), F.lit(True))
        out = out.bitwiseOR(F.when(reads, F.lit(1 << i).cast("long")).otherwise(F.lit(0).cast("long")))
    return out
