"""What the accounting (analysis/transforms/accounting.py) needs of the events: a few values, looked
up by the per-message grouping as literals rather than joined."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["AccountingInputs", "accounting_inputs", "RESTART_KINDS"]

RESTART_KINDS = ("broker_restart", "queue_recreated")
"""Events after which the run's queue was declared again, empty: what reached the broker before the
last of them and was never acked, left or dead-lettered is lost_with_queue (a broker restart; the
queue deleted during the run, declared again by a consumer that found it gone)."""


class AccountingInputs(NamedTuple):
    losses: dict[str, int]
    """producer -> the time of its last traced connection loss (accounting.message_facts' `losses`)"""
    restart_ns: int | None
    """the time of the run's last `broker_restart` or `queue_recreated` event (accounting.classify's
    `restart_ns`), None without one"""
    returned_events: bool
    """some `publish_returned` event names a message id: only then does the accounting look ids up
    in the events (accounting.classify's `events`), a join of every message id otherwise"""


def accounting_inputs(events: Iterable[Mapping[str, Any]]) -> AccountingInputs:
    losses: dict[str, int] = {}
    restarts: list[int] = []
    returned = False
    for e in events:
        kind = e["kind"]
        if kind == "connection_lost" and e["source"] is not None:
            losses[e["source"]] = max(losses.get(e["source"], e["ts_ns"]), e["ts_ns"])
        elif kind in RESTART_KINDS and e["ts_ns"] is not None:
            restarts.append(e["ts_ns"])
        elif kind == "publish_returned" and e["name"] is not None:
            returned = True
    return AccountingInputs(losses, max(restarts, default=None), returned)
