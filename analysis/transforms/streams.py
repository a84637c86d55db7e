"""A stream's accounting (queue.type: stream): every consumer group reads the whole log from where it
started, and nothing leaves it, so a message is `acked` once every group that reads it has acked it,
and `not_yet_read` while some such group has not (docs/summary.md, `stream`).

Which groups read a message: a group that starts at `first` (or offset 0) reads every message; any
other reads those at or after the first offset it read (`start`, the least `stream_offset` among its
deliveries; a group that read nothing reads none). A message's offset is known from any delivery of
it; one no group read has none, and counts as unread by every group with a start.

Each group is a bit of a long: the facts of a message carry the groups that acked it
(`_read_groups`) and the groups that read it (`_expected`), computed from literals (the starts, of
one small query: least_offsets, collected by summary.streams.stream_starts) in the grouping by
message id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, functions as F

from ._common import Transform, is_acked

__all__ = ["StreamGroup", "MAX_GROUPS", "least_offsets", "read_bit", "expected_bits", "reads_everything"]

MAX_GROUPS = 62
"""Groups a stream's accounting follows (a bit of a long each)."""


class StreamGroup(NamedTuple):
    name: str
    offset: Any  # the scenario's `offset` (first, last, next, an offset, a timestamp; None: next)
    start: int | None  # where it reads from: 0 for first; else the least offset it read (None: none)


def reads_everything(offset: Any) -> bool:
    """Whether a group starting at `offset` reads every message the stream holds (first, or offset 0)."""
    return bool(offset == "first" or offset == 0)


def least_offsets(readers: Sequence[tuple[str, Any]]) -> Transform:
    """Applied to deliveries: one row, the least stream_offset of each group's deliveries (`g0`, `g1`,
    ... in the order of `readers`, at most MAX_GROUPS; null for a group that read nothing)."""
    group, offset = F.col("consumer_group"), F.col("stream_offset")

    def _least(deliveries: DataFrame) -> DataFrame:
        return deliveries.agg(
            *[F.min(F.when(group == name, offset)).alias(f"g{i}") for i, (name, _) in enumerate(readers[:MAX_GROUPS])]
        )

    return _least


def read_bit(groups: Sequence[StreamGroup]) -> Column:
    """A delivery row's group bit when it was acked (0 otherwise, and for a group not followed)."""
    bit = F.lit(0).cast("long")
    group = F.col("consumer_group")
    for i, g in enumerate(groups):
        bit = F.when(group == g.name, F.lit(1 << i).cast("long")).otherwise(bit)
    return F.when(is_acked(), bit).otherwise(F.lit(0).cast("long"))


def expected_bits(groups: Sequence[StreamGroup], offset: Column) -> Column:
    """The groups that read the message at `offset` (null: no group read it)."""
    out = F.lit(0).cast("long")
    for i, g in enumerate(groups):
        if g.start is None:
            continue
        reads = F.coalesce(offset >= F.lit(g.start), F.lit(True))
        out = out.bitwiseOR(F.when(reads, F.lit(1 << i).cast("long")).otherwise(F.lit(0).cast("long")))
    return out
