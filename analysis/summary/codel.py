"""summary.json's `codel` block: the CoDel frames of transforms.codel, collected per consumer and in total."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame

from analysis.buckets import Histogram
from analysis.cube import cube
from analysis.transforms._common import NS_PER_S
from analysis.transforms.codel import codel_projections, codel_rows, codel_state_cells, dropping_cells

from ._stats import stats_block
from .by_id import Handoff, deliveries_by_id, requeue_handoffs

__all__ = ["codel_block", "untouched"]

_TOTAL_FIELDS = (
    "nacks",
    "requeued",
    "discarded",
    "nack_share",
    "dropping_s",
    "requeued_messages",
    "requeued_acked_by_other",
    "requeued_acked_by_same",
    "requeued_not_acked",
)
_EMPTY_TOTALS = {**dict.fromkeys(_TOTAL_FIELDS, 0), "nack_share": None, "dropping_s": 0.0}


def untouched() -> dict[str, Any]:
    """The block of a run in which no consumer had CoDel on and none nacked."""
    return {"consumers": [], "totals": dict(_EMPTY_TOTALS)}


def codel_block(
    deliveries: DataFrame,
    state: Sequence[Mapping[str, Any]] | None = None,
    handoffs: Sequence[Handoff] | None = None,
) -> dict[str, Any]:
    """summary.json's `codel` block: {"consumers": [...], "totals": {...}}; a consumer is listed when
    it had CoDel on or acked a message another consumer requeued last.

    `state`: the deliveries' `codel_state` cells (transforms.codel.codel_state_cells, a row per
    consumer and group), `handoffs`: the requeued messages' (summary.by_id.requeue_handoffs), when
    the caller has them (the job: from the deliveries' cube and the deliveries of its ledger's ids);
    without them they are computed here. Beyond those, one Spark action: the sojourn before and after
    each listed consumer's first drop and the time in the dropping state (codel_rows' cube); none
    when no consumer had CoDel on and none nacked."""
    if state is None:
        state = cube(deliveries, [], [codel_state_cells()]).cells("codel_state")
    state = [s for s in state if s["consumer"] is not None]  # a delivery without a consumer is no one's
    if not any(s["codel_rows"] or s["nacks"] for s in state):
        return untouched()
    if handoffs is None:
        handoffs = requeue_handoffs(deliveries_by_id(deliveries))
    on = sorted({s["consumer"] for s in state if s["codel_rows"]})
    # a message another consumer requeued last, acked (SQL's comparison: a null is no one)
    elsewhere = [h for h in handoffs if None not in (h.acker, h.last_requeuer) and h.acker != h.last_requeuer]
    taken = Counter(str(h.acker) for h in elsewhere)
    kept = sorted(set(on) | set(taken))
    first_drops = {s["consumer"]: s["first_drop_ns"] for s in state if s["first_drop_ns"] is not None}
    rows = deliveries.transform(codel_rows(kept, on, first_drops))
    split = cube(rows, codel_projections(), [dropping_cells()])
    before, after = split.histograms("sojourn_before"), split.histograms("sojourn_after")
    dropping = {c["consumer"]: c["dropping_ns"] for c in split.cells("dropping")}
    consumers = []
    for s in sorted((s for s in state if s["consumer"] in kept), key=lambda s: s["consumer"]):
        name, decided = s["consumer"], s["decided"]
        codel_on = name in on
        consumers.append(
            {
                "consumer": name,
                "group": s["group"],
                "codel_on": codel_on,
                "decided": decided,
                "nacks": s["nacks"],
                "requeued": s["requeued"],
                "discarded": s["discarded"],
                "nack_share": s["nacks"] / decided if decided else None,
                "dropping_s": (dropping.get(name) or 0) / NS_PER_S if codel_on else None,
                "acked_requeued_from_others": taken.get(name, 0),
                "sojourn_before_ms": stats_block(before.get(name, Histogram.empty()).stats()),
                "sojourn_after_ms": stats_block(after.get(name, Histogram.empty()).stats()),
            }
        )
    with_codel = [c for c in consumers if c["codel_on"]]
    decided_on = sum(c["decided"] for c in with_codel)
    nacks = sum(c["nacks"] for c in with_codel)
    totals = {
        "nacks": nacks,
        "requeued": sum(c["requeued"] for c in with_codel),
        "discarded": sum(c["discarded"] for c in with_codel),
        "nack_share": nacks / decided_on if decided_on else None,
        "dropping_s": float(sum(c["dropping_s"] for c in with_codel)),
        "requeued_messages": len(handoffs),
        "requeued_acked_by_other": len(elsewhere),
        "requeued_acked_by_same": sum(1 for h in handoffs if h.acker is not None and h.acker == h.last_requeuer),
        "requeued_not_acked": sum(1 for h in handoffs if h.acker is None),
    }
    return {"consumers": consumers, "totals": {f: totals[f] for f in _TOTAL_FIELDS}}
