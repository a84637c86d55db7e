"""summary.json's `outcomes` block (docs/summary.md): how the consumers settled what they processed,
per consumer group and timeline phase, beside the rates the scenario asked for; and what became of
the messages they requeued, each followed from its first delivery to its last. Plain Python over
the deliveries' cells (transforms.delivery_cube.outcome_aggregates), the deliveries of the messages
followed by id (summary.by_id) and run.json's resolved scenario.

A delivery counts here once it was processed and then settled by its consumer (`decided`): acked,
nack-requeued, nack-discarded or rejected, by the group's outcome rates or its handler. CoDel's
nacks come before processing and are the codel block's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from analysis.events import p50_and_max
from analysis.transforms._common import ACKED_OUTCOMES

from .by_id import by_codel

__all__ = ["OUTCOME_FIELDS", "outcomes_block", "configured_rates"]

OUTCOME_FIELDS = ("requeued", "discarded", "rejected")
"""Counted outcomes, each with its `<field>_fraction` of `decided`; in scenario terms the rates
`requeue`, `discard` and `reject`."""
_RATE_KEYS = {"requeued": "requeue", "discarded": "discard", "rejected": "reject"}
_BASE = "base"


def configured_rates(scenario: Any) -> dict[tuple[str, str], dict[str, float]]:
    """(group, phase) -> the outcome rates in force ({requeue, discard, reject}), from run.json's
    resolved scenario: each group's `outcomes` in the base phase, a phase's
    `consumers.<group>.outcomes` in that phase (the whole mapping: keys left out are 0) and the
    base's elsewhere. A group without rates anywhere is left out."""
    if not isinstance(scenario, dict):
        return {}
    out: dict[tuple[str, str], dict[str, float]] = {}
    base: dict[str, dict | None] = {}
    for group in scenario.get("consumers") or []:
        if isinstance(group, dict) and isinstance(group.get("name"), str):
            base[group["name"]] = group.get("outcomes")
    for name, rates in base.items():
        if rates:
            out[(name, _BASE)] = _rates(rates)
    for phase in scenario.get("timeline") or []:
        if not isinstance(phase, dict) or not isinstance(phase.get("name"), str):
            continue
        settings = phase.get("set") or {}
        for name, rates in base.items():
            value = settings.get(f"consumers.{name}.outcomes", rates)
            if value:
                out[(name, phase["name"])] = _rates(value)
    return out


def _rates(value: Mapping[str, Any]) -> dict[str, float]:
    return {key: float(value.get(key) or 0.0) for key in _RATE_KEYS.values()}


def outcomes_block(
    cells: Iterable[Mapping[str, Any]],
    by_id: Sequence[Mapping[str, Any]],
    accounts: Mapping[str, str],
    scenario: Any = None,
) -> dict[str, Any]:
    """summary.json's `outcomes` (docs/summary.md): {} when no consumer settled a processed delivery
    otherwise than with an ack, no handler ran and no outcome rates were set. Otherwise `phases`: per
    group and phase, `decided`, `acked`, each of OUTCOME_FIELDS with its fraction of `decided`,
    `handler_calls`, `handler_errors` and `configured` (the rates asked for, or null); `groups`: the
    same per group over the run; `requeued`: per group, the messages its consumers requeued (by
    their first requeue) followed to their end."""
    configured = configured_rates(scenario)
    rows: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for c in cells:
        if c["group"] is None:
            continue
        row = rows[(c["group"], c["phase"])]
        row["decided"] += c["outcome_decided"]
        row["requeued"] += c["outcome_requeued"]
        row["discarded"] += c["outcome_discarded"]
        row["rejected"] += c["outcome_rejected"]
        row["handler_calls"] += c["handler_calls"]
        row["handler_errors"] += c["handler_errors"]
    active_groups = {g for (g, _), row in rows.items() if any(row[f] for f in (*OUTCOME_FIELDS, "handler_calls"))}
    active_groups |= {g for g, _ in configured}
    if not active_groups:
        return {}
    phases = [
        _counts({"group": g, "phase": p}, rows[(g, p)], configured.get((g, p)))
        for g, p in sorted(rows)
        if g in active_groups
    ]
    totals: dict[str, Counter[str]] = defaultdict(Counter)
    for (g, _), row in rows.items():
        if g in active_groups:
            totals[g].update(row)
    groups = [_counts({"group": g}, totals[g], None) for g in sorted(totals)]
    return {"phases": phases, "groups": groups, "requeued": requeued_messages(by_id, accounts)}


def _counts(head: dict[str, Any], row: Mapping[str, int], configured: Mapping[str, float] | None) -> dict[str, Any]:
    decided = row.get("decided", 0)
    out = {**head, "decided": decided}
    out["acked"] = decided - sum(row.get(f, 0) for f in OUTCOME_FIELDS)
    for f in OUTCOME_FIELDS:
        out[f] = row.get(f, 0)
        out[f"{f}_fraction"] = row.get(f, 0) / decided if decided else None
    out["handler_calls"] = row.get("handler_calls", 0)
    out["handler_errors"] = row.get("handler_errors", 0)
    if "phase" in head:
        out["configured"] = dict(configured) if configured is not None else None
    return out


def requeued_messages(by_id: Iterable[Mapping[str, Any]], accounts: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per consumer group: the messages one of its consumers requeued after processing them (not
    CoDel's requeues; each message under the group of its first requeue), how many deliveries they
    took in all, how they ended (account class), and the time from each one's first delivery to its
    first ack (ms; the messages never acked are left out of it)."""
    deliveries: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in by_id:
        if r["message_id"] is not None:
            deliveries[r["message_id"]].append(r)
    per_group: dict[str, dict[str, Any]] = {}
    for message_id, rows in deliveries.items():
        requeues = [
            r
            for r in rows
            if r["outcome"] == "nack_requeue" and r["end_ns"] is not None and not by_codel(r.get("settled_by"))
        ]
        if not requeues:
            continue
        first_requeue = min(requeues, key=lambda r: (r["receive_ns"], r["consumer"]))
        group = per_group.setdefault(
            first_requeue["consumer_group"], {"messages": 0, "deliveries": 0, "ended": Counter(), "to_ack_ms": []}
        )
        group["messages"] += 1
        group["deliveries"] += len(rows)
        group["ended"][accounts.get(message_id, "unaccounted")] += 1
        first_receive = min(r["receive_ns"] for r in rows)
        acked = [r["settle_ns"] for r in rows if r["outcome"] in ACKED_OUTCOMES and r["settle_ns"] is not None]
        if acked:
            group["to_ack_ms"].append((min(acked) - first_receive) / 1e6)
    out = []
    for name in sorted(per_group):
        g = per_group[name]
        times = g["to_ack_ms"]
        out.append(
            {
                "group": name,
                "messages": g["messages"],
                "deliveries": g["deliveries"],
                "deliveries_per_message": g["deliveries"] / g["messages"],
                "ended": dict(sorted(g["ended"].items())),
                "first_delivery_to_ack_ms": {"count": len(times), **p50_and_max(times)},
            }
        )
    return out
