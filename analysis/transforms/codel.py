"""CoDel on the consumers: nacks, time in the dropping state, sojourn before and after CoDel acted,
and where requeued messages ended up (definitions in docs/summary.md, "codel").

A consumer has CoDel on when its delivery rows carry controller state
(`codel_dropping` not null). A *drop* is a delivery CoDel nacked (`nack_requeue` or
`nack_discard`, settled_by `codel`: not the outcome rates' or a handler's); its `start_ns` is
when CoDel decided, as the delivery left the buffer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, Window, functions as F

from analysis.cube import Cells, Projection

from ._common import Transform

__all__ = ["NACK_OUTCOMES", "nacked", "codel_state_cells", "codel_rows", "codel_projections", "dropping_cells"]

NACK_OUTCOMES = ("nack_requeue", "nack_discard")


def nacked() -> Column:
    """True for a delivery CoDel nacked (NACK_OUTCOMES, settled_by `codel`; in a trace before version 6,
    where settled_by is null, every nack was CoDel's)."""
    return F.col("outcome").isin(*NACK_OUTCOMES) & F.coalesce(F.col("settled_by") == "codel", F.lit(True))


def codel_state_cells() -> Cells:
    """Per consumer and group (`codel_state`): `decided` (deliveries that left its buffer), `nacks`,
    `requeued`, `discarded`, `first_drop_ns` (the start_ns of its first nack; null if it nacked none)
    and `codel_rows` (its delivery rows that carry controller state: CoDel on when positive)."""
    outcome = F.col("outcome")
    return Cells(
        keys={"consumer": F.col("consumer"), "group": F.col("consumer_group")},
        aggregates={
            "decided": F.count_if(F.col("start_ns").isNotNull()),
            "nacks": F.count_if(nacked()),
            "requeued": F.count_if(nacked() & (outcome == "nack_requeue")),
            "discarded": F.count_if(nacked() & (outcome == "nack_discard")),
            "first_drop_ns": F.min(F.when(nacked(), F.col("start_ns"))),
            "codel_rows": F.count("codel_dropping"),
        },
        name="codel_state",
    )


def _among(names: Sequence[str]) -> Column:
    """True for a row of one of the consumers `names` (none: a literal false, which prunes a pass)."""
    return F.col("consumer").isin(*names) if names else F.lit(False)


def codel_rows(kept: Sequence[str], on: Sequence[str], first_drops: Mapping[str, int]) -> Transform:
    """The deliveries of the consumers `kept`, with `first_drop_ns` (their consumer's, from
    `first_drops`, a literal map: no join) and `dropping_ns`: for a decision taken in the dropping
    state by a consumer in `on` (CoDel on), the time to that consumer's next decision (its delivery
    rows ordered by start_ns: an ordered pass over the rows of `on` only, none when it is empty)."""
    pairs = [c for name in sorted(first_drops) for c in (F.lit(name), F.lit(first_drops[name]).cast("long"))]
    first_drop = F.create_map(*pairs)[F.col("consumer")] if first_drops else F.lit(None)
    order = Window.partitionBy("consumer").orderBy("start_ns", "receive_ns", "delivery_tag")
    dropping = (
        F.when(
            _among(on) & F.col("start_ns").isNotNull() & F.col("codel_dropping"),
            F.lead("start_ns").over(order) - F.col("start_ns"),
        )
        if on
        else F.lit(None)
    )

    def _rows(deliveries: DataFrame) -> DataFrame:
        return deliveries.where(_among(kept)).select(
            "consumer",
            "start_ns",
            "sojourn_ms",
            "measured",
            first_drop.cast("long").alias("first_drop_ns"),
            dropping.cast("long").alias("dropping_ns"),
        )

    return _rows


def codel_projections() -> list[Projection]:
    """Of codel_rows: `sojourn_before` / `sojourn_after`, per consumer, the sojourn of the measured
    deliveries that left the buffer before / from the consumer's first drop on (all of them are
    "before" if it never dropped)."""
    measured = F.col("measured") & F.col("start_ns").isNotNull()
    before = F.col("first_drop_ns").isNull() | (F.col("start_ns") < F.col("first_drop_ns"))
    return [
        Projection("sojourn_before", measured & before, [F.col("consumer")], F.col("sojourn_ms")),
        Projection("sojourn_after", measured & ~before, [F.col("consumer")], F.col("sojourn_ms")),
    ]


def dropping_cells() -> Cells:
    """Of codel_rows: per consumer (`dropping`), the time in the dropping state (`dropping_ns`; null
    for none)."""
    return Cells({"consumer": F.col("consumer")}, {"dropping_ns": F.sum("dropping_ns")}, name="dropping")
