"""Slow consumers: what the deliveries' cube needs of every delivery for the share of sampled
seconds in which a consumer's prefetch window was full while the queue had messages ready
(docs/slow-consumers.md); summary.slow_consumers rolls it up.

The broker's queue is sampled once a second (`queue_sample` events, read on the driver). At a
sample time t a consumer's outstanding deliveries are those it received at or before t and had not
settled by t (client-side stamps: receive_ns, settle_ns). Each delivery is a +1 at receive and a
-1 at settle; what a sample reads is the sum of the changes up to it. The cube groups the
deliveries by consumer and by the *slot* of each of the two times, the number of samples strictly
before it (sample j sees the changes whose slot is at most j's own), so that the driver adds a few
rows per consumer and sample rather than a row per delivery. An unsettled delivery (the channel
closed first) counts until the consumer's next leave (consumer_leave, connection_lost or
consumer_crash event), when the broker requeues it; without one, until the end of the run: those
deliveries are few, and keyed by their own receive time.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, functions as F

from analysis.cube import Cells

from ._common import NS_PER_S
from .windows import second_since

__all__ = ["LEAVE_KINDS", "NS_PER_MINUTE", "outstanding_cells", "slot_of"]

LEAVE_KINDS = ("consumer_leave", "connection_lost", "consumer_crash")
"""Events (name = consumer) after which its unsettled deliveries are no longer its own."""
NS_PER_MINUTE = 60 * NS_PER_S

_NEVER = (1 << 63) - 1
"""A listed sample time that is no sample (a second holding fewer): no time is later."""


def slot_of(sample_times: Sequence[int], t0_ns: int, column: str) -> Column:
    """How many of `sample_times` (sorted, ns) are strictly earlier than the time `column`, null
    where it is null.

    Without a join or a search: for each whole second since t0 from the first sample's to the
    last's, the count of samples in the seconds before it and its own sample times are literal
    arrays of the plan (a second holds one sample, sometimes two); a time adds those of its second
    that are earlier. Times before the first sample's second count 0, after the last one's all."""
    if not sample_times:
        return F.when(F.col(column).isNotNull(), F.lit(0).cast("long"))
    seconds = [(t - t0_ns) // NS_PER_S for t in sample_times]
    first, last = seconds[0], seconds[-1]
    before = [0] * (last - first + 1)
    listed: list[list[int]] = [[] for _ in before]
    for s, t in zip(seconds, sample_times):
        listed[s - first].append(t)
    running = 0
    for i, times in enumerate(listed):
        before[i] = running
        running += len(times)
    width = max(len(times) for times in listed)
    columns = [[times[i] if i < len(times) else _NEVER for times in listed] for i in range(width)]

    ts = F.col(column)
    second = second_since(t0_ns, column)
    index = (second - F.lit(first)).cast("int")
    within = F.get(F.lit(before), index) + sum(
        (F.when(F.get(F.lit(c), index) < ts, 1).otherwise(0) for c in columns), F.lit(0)
    )
    return (
        F.when(second < F.lit(first), F.lit(0))
        .when(second > F.lit(last), F.lit(len(sample_times)))
        .otherwise(within)
        .cast("long")
    )


def outstanding_cells(sample_times: Sequence[int], t0_ns: int) -> Cells:
    """`outstanding`: the deliveries per consumer, slot of receive, slot of settle (null while
    unsettled) and, for an unsettled one only, its receive time: how many, and the prefetch of the
    latest receive that carried one (`prefetch`, at `prefetch_ns`)."""
    with_prefetch = F.when(F.col("prefetch").isNotNull(), F.col("receive_ns"))
    return Cells(
        keys={
            "consumer": F.col("consumer"),
            "received_slot": slot_of(sample_times, t0_ns, "receive_ns"),
            "settled_slot": slot_of(sample_times, t0_ns, "settle_ns"),
            "unsettled_receive_ns": F.when(F.col("settle_ns").isNull(), F.col("receive_ns")),
        },
        aggregates={
            "deliveries": F.count(F.lit(1)),
            "prefetch_ns": F.max(with_prefetch),
            "prefetch": F.max_by(F.col("prefetch").cast("int"), with_prefetch),
        },
        name="outstanding",
    )
