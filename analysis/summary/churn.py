"""summary.json's `consumers_churn` block, per consumer group and in total, and the check that nothing
a crashed or unsettled delivery held was lost (docs/summary.md): plain Python over the events' rows,
the deliveries' cells and the deliveries of the messages followed by id (summary.by_id).

A consumer that crashes (`leave: crash`, outcome `crashed`) or loses its connection (outcome
`unsettled`) leaves unacked deliveries behind; the broker requeues them and delivers them again with
`redelivered=true`, so a message it had processed but not acked is processed twice.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from analysis.transforms._common import ACKED_OUTCOMES

from .by_id import held_messages, repeats

__all__ = ["CHURN_FIELDS", "churn_block", "event_counts"]

CHURN_FIELDS = (
    "joins",
    "rejoins",
    "clean_leaves",
    "crashes",
    "connections_lost",
    "requeued_crashed",
    "requeued_unsettled",
    "redelivered",
    "processed_twice",
    "acked_twice",
    "held_messages",
    "held_unaccounted",
)

_CONSUMER_EVENTS = ("consumer_join", "consumer_leave", "consumer_crash", "connection_lost")
_EVENT_FIELDS = ("joins", "rejoins", "clean_leaves", "crashes", "connections_lost")


def _group_of(name: str) -> str:
    """`group/worker/slot` -> `group` (group names can not hold a '/')."""
    return name.split("/", 1)[0]


def _clean(detail: Any) -> bool:
    """Whether a leave's detail (a JSON object) says `"clean": true`."""
    try:
        value = json.loads(detail).get("clean") if detail else None
    except (ValueError, AttributeError):
        return False
    return value is True or value == "true"


def event_counts(event_rows: Iterable[Mapping[str, Any]], consumers: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per consumer group: joins, rejoins (joins beyond the first of each consumer), clean leaves,
    crashes, and connections lost by the consumers `consumers` or that joined (not by producers or
    the dead-letter capture); a group only if one of its consumers has such an event."""
    events = list(event_rows)
    known = set(consumers) | {e["source"] for e in events if e["kind"] == "consumer_join"}
    out: dict[str, dict[str, int]] = {}
    joined: dict[str, set[str]] = {}
    for e in events:
        source = e["source"]
        if e["kind"] not in _CONSUMER_EVENTS or source is None or source not in known:
            continue
        group = _group_of(source)
        row = out.setdefault(group, dict.fromkeys(_EVENT_FIELDS, 0))
        if e["kind"] == "consumer_join":
            row["joins"] += 1
            joined.setdefault(group, set()).add(source)
        elif e["kind"] == "consumer_leave":
            row["clean_leaves"] += _clean(e.get("detail"))
        elif e["kind"] == "consumer_crash":
            row["crashes"] += 1
        else:
            row["connections_lost"] += 1
    for group, row in out.items():
        row["rejoins"] = row["joins"] - len(joined.get(group, ()))
    return out


def churn_block(
    event_rows: Sequence[Mapping[str, Any]],
    cells: Iterable[Mapping[str, Any]],
    by_id: Sequence[Mapping[str, Any]],
    accounts: Mapping[str, str],
) -> dict[str, Any]:
    """summary.json's `consumers_churn` (docs/summary.md): per consumer group and in total, joins and
    leaves, crashes, lost connections, requeued and redelivered deliveries, messages processed or
    acked twice, and the messages requeued deliveries held by the class they ended in.
    `churn` is false when no consumer rejoined, crashed, lost a connection or had a redelivery.

    `cells`: the deliveries' cells (summary.deliveries: consumer, group, crashed, unsettled and
    redelivered per cell); `by_id`: the deliveries of every message that was held or done twice
    (summary.by_id.deliveries_by_id: the job's ledger's ids); `accounts`: message id -> account
    class, of every published id among them."""
    cells = list(cells)
    rows: dict[str, Counter[str]] = {}
    for c in cells:
        if c["group"] is not None:
            row = rows.setdefault(c["group"], Counter())
            row.update(requeued_crashed=c["crashed"], requeued_unsettled=c["unsettled"], redelivered=c["redelivered"])
    consumers = {c["consumer"] for c in cells if c["consumer"] is not None}
    for group, counts in event_counts(event_rows, consumers).items():
        rows.setdefault(group, Counter()).update(counts)
    for name, done, at in (
        ("processed_twice", lambda r: r["end_ns"] is not None, "end_ns"),
        ("acked_twice", lambda r: r["outcome"] in ACKED_OUTCOMES, "settle_ns"),
    ):
        for group, n in repeats(by_id, done, at).items():
            rows.setdefault(group, Counter())[name] += n
    held = held_messages(by_id, accounts)
    held_then: dict[str, Counter[str]] = {}
    for group, _, account in held:
        rows.setdefault(group, Counter())
        held_then.setdefault(group, Counter())[account] += 1
    total_then = Counter(account for _, account in {(m, account) for _, m, account in held})
    groups = []
    for name in sorted(rows):
        then = dict(sorted(held_then.get(name, Counter()).items()))
        counts = {**{f: rows[name].get(f, 0) for f in CHURN_FIELDS}, "held_messages": sum(then.values())}
        counts["held_unaccounted"] = then.get("unaccounted", 0)
        groups.append({"group": name, **counts, "held_then": then})
    totals: dict[str, Any] = {f: sum(g[f] for g in groups) for f in CHURN_FIELDS}
    totals["held_then"] = dict(sorted(total_then.items()))
    totals["held_messages"] = sum(total_then.values())  # distinct ids: one message may be held twice
    totals["held_unaccounted"] = total_then.get("unaccounted", 0)
    churn = any(
        totals[f]
        for f in ("rejoins", "crashes", "connections_lost", "requeued_crashed", "requeued_unsettled", "redelivered")
    )
    return {"churn": churn, "nothing_lost": totals["held_unaccounted"] == 0, "groups": groups, "totals": totals}
