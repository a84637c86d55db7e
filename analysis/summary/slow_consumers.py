"""summary.json's `slow_consumers` block: per consumer and minute, the share of sampled seconds in
which its prefetch window was full while the queue had messages ready, ranked worst first
(docs/slow-consumers.md). Plain Python over the deliveries' cube's `outstanding` rows
(transforms.slow_consumers) and the events' rows.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from analysis.events import detail
from analysis.events.queue import as_long, queue_samples, sampling
from analysis.transforms.slow_consumers import LEAVE_KINDS, NS_PER_MINUTE

__all__ = ["slow_consumers_block", "consumer_spans"]


def _share(slow: int, sampled: int) -> float | None:
    return slow / sampled if sampled else None


def consumer_spans(
    activity: Sequence[Mapping[str, Any]], event_rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Per consumer (summary.deliveries' activity rows), by name: its group, why it is excluded (None:
    it has a window: not auto-ack, a prefetch limit), and the span in which samples count for it
    (`from_ns`, `to_ns`): its first join or receive, whichever came first, to its last leave or
    receive or settle, whichever came last."""
    joins: dict[Any, int] = {}
    leaves: dict[Any, int] = {}
    for e in event_rows:
        name, ts = e.get("name"), e.get("ts_ns")
        if ts is None:
            continue
        if e.get("kind") == "consumer_join":
            joins[name] = min(joins.get(name, ts), ts)
        elif e.get("kind") in LEAVE_KINDS:
            leaves[name] = max(leaves.get(name, ts), ts)
    spans = []
    for a in activity:
        consumer = a["consumer"]
        excluded = (
            "auto_ack"
            if a["auto_ack"]
            else "no prefetch limit"
            if a["max_prefetch"] is not None and a["max_prefetch"] <= 0
            else None
        )
        starts = [t for t in (joins.get(consumer), a["first_receive_ns"]) if t is not None]
        ends = [t for t in (leaves.get(consumer), a["last_ns"]) if t is not None]
        spans.append(
            {
                "consumer": consumer,
                "group": a["group"],
                "excluded": excluded,
                "from_ns": min(starts) if starts else None,
                "to_ns": max(ends) if ends else None,
            }
        )
    return spans


def slow_consumers_block(
    event_rows: Sequence[Mapping[str, Any]],
    t0_ns: int,
    activity: Sequence[Mapping[str, Any]],
    outstanding: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """summary.json's `slow_consumers` (docs/summary.md); {} when the run has no queue samples.
    `event_rows`: the events trace's rows; `activity`: summary.deliveries' rows per consumer
    (DeliveryRollup.activity); `outstanding`: the deliveries' cube's rows of
    transforms.slow_consumers.outstanding_cells (DeliveryRollup.cells("outstanding"))."""
    samples = queue_samples(event_rows)
    if not samples:
        return {}
    spans = consumer_spans(activity, event_rows)
    times = [s["ts_ns"] for s in samples]
    slots = [_slot(times, t) for t in times]  # equal times share one
    rows_of: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in outstanding:
        rows_of[r["consumer"]].append(r)
    leaves, prefetch_events = _consumer_events(event_rows)
    listed = []
    for span in spans:
        if span["excluded"] is not None or span["from_ns"] is None:
            continue
        consumer = span["consumer"]
        deltas, prefetches = _changes(rows_of[consumer], sorted(leaves[consumer]), times)
        prefetches += [(_slot(times, t), t, p) for t, p in prefetch_events[consumer]]
        minutes: dict[int, list[int]] = {}
        for sample, held, prefetch in _readings(samples, slots, deltas, prefetches):
            if sample["ts_ns"] < span["from_ns"] or (span["to_ns"] is not None and sample["ts_ns"] > span["to_ns"]):
                continue
            slow = prefetch is not None and prefetch > 0 and held >= prefetch and (sample["ready"] or 0) > 0
            counts = minutes.setdefault(math.floor((sample["ts_ns"] - t0_ns) / NS_PER_MINUTE), [0, 0])
            counts[0] += 1
            counts[1] += slow
        if minutes:
            listed.append(_listed(consumer, span["group"], minutes))
    listed.sort(key=lambda c: (-c["worst_minute"]["share"], -c["share"], c["consumer"]))
    excluded = [
        {"consumer": r["consumer"], "group": r["group"], "reason": r["excluded"]}
        for r in spans
        if r["excluded"] is not None
    ]
    return {
        **sampling(samples),
        "consumers": listed,
        "excluded": excluded,
    }


def _consumer_events(
    event_rows: Sequence[Mapping[str, Any]],
) -> tuple[dict[Any, list[int]], dict[Any, list[tuple[int, int]]]]:
    """Per consumer (an event's name): the times of its leaves (LEAVE_KINDS), and (time, prefetch)
    of its joins (their detail's prefetch) and prefetch changes (the event's value) that carry one."""
    leaves: dict[Any, list[int]] = defaultdict(list)
    prefetches: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for e in event_rows:
        kind, ts = e.get("kind"), e.get("ts_ns")
        if ts is None:
            continue
        if kind in LEAVE_KINDS:
            leaves[e.get("name")].append(ts)
        elif kind in ("consumer_join", "prefetch_change"):
            value = detail(e.get("detail")).get("prefetch") if kind == "consumer_join" else e.get("value")
            prefetch = as_long(value)
            if prefetch is not None:
                prefetches[e.get("name")].append((ts, prefetch))
    return leaves, prefetches


def _slot(times: Sequence[int], t: int) -> int:
    """How many of the sample `times` (in order) are strictly earlier than `t`: the slot of a time,
    as transforms.slow_consumers.slot_of gives it in Spark for the deliveries' times."""
    return bisect.bisect_left(times, t)


def _readings(
    samples: Sequence[Mapping[str, Any]],
    slots: Sequence[int],
    deltas: Mapping[int, int],
    prefetches: Sequence[tuple[int, int, int]],
) -> Iterator[tuple[Mapping[str, Any], int, int | None]]:
    """Each sample with what one consumer held at its time and the prefetch in force: the sum of
    the changes (`deltas`, per slot) and the latest of `prefetches` (slot, time, prefetch) whose
    slot is at most the sample's own (`slots`, one per sample)."""
    changes = sorted(deltas.items())
    ordered = sorted(prefetches, key=lambda c: (c[0], c[1]))
    held, prefetch, i, k = 0, None, 0, 0
    for sample, slot in zip(samples, slots):
        while i < len(changes) and changes[i][0] <= slot:
            held += changes[i][1]
            i += 1
        while k < len(ordered) and ordered[k][0] <= slot:
            prefetch = ordered[k][2]
            k += 1
        yield sample, held, prefetch


def _changes(
    rows: Sequence[Mapping[str, Any]], leaves: Sequence[int], times: Sequence[int]
) -> tuple[dict[int, int], list[tuple[int, int, int]]]:
    """Of one consumer's `outstanding` rows: the change of its outstanding count per slot (+1 a
    receive, -1 a settle, -1 an unsettled delivery at the consumer's next leave at or after its
    receive), and its deliveries' prefetch candidates (slot, time, prefetch): per slot, the latest
    receive that carried one."""
    deltas: dict[int, int] = defaultdict(int)
    latest: dict[int, tuple[int, int]] = {}
    for r in rows:
        n, received = r["deliveries"], r["received_slot"]
        if received is None:
            continue
        deltas[received] += n
        if r["settled_slot"] is not None:
            deltas[r["settled_slot"]] -= n
        elif r["unsettled_receive_ns"] is not None:
            after = bisect.bisect_left(leaves, r["unsettled_receive_ns"])  # the next leave, ties after
            if after < len(leaves):
                deltas[_slot(times, leaves[after])] -= n
        candidate = (r["prefetch_ns"], r["prefetch"])
        if None not in candidate and (received not in latest or candidate[0] > latest[received][0]):
            latest[received] = candidate
    return deltas, [(slot, t, p) for slot, (t, p) in latest.items()]


def _listed(consumer: str, group: Any, minutes: Mapping[int, Sequence[int]]) -> dict[str, Any]:
    """A consumer's row of the block, from its (sampled, slow) counts per minute."""
    rows: list[dict[str, Any]] = [
        {"minute": m, "sampled": sampled, "slow": slow, "share": _share(slow, sampled)}
        for m, (sampled, slow) in sorted(minutes.items())
    ]
    sampled = sum(m["sampled"] for m in rows)
    slow = sum(m["slow"] for m in rows)
    worst = max(rows, key=lambda m: (m["share"], -m["minute"]))
    return {
        "consumer": consumer,
        "group": group,
        "seconds_sampled": sampled,
        "slow_seconds": slow,
        "share": _share(slow, sampled),
        "worst_minute": {"minute": worst["minute"], "share": worst["share"]},
        "minutes": rows,
    }
