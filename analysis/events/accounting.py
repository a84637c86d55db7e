"""What the accounting (analysis/transforms/accounting.py) needs of the events: a few values, looked
up by the per-message grouping as literals rather than joined."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["AccountingInputs", "accounting_inputs"]


class AccountingInputs(NamedTuple):
    losses: dict[str, int]
    """producer -> the time of its last traced connection loss (accounting.message_facts' `losses`)"""
    restart_ns: int | None
    """the time of the run's last `broker_restart` event (accounting.classify's `restart_ns`), None without one"""
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
        elif kind == "broker_restart" and e["ts_ns"] is not None:
            restarts.append(e["ts_ns"])
        elif kind == "publish_returned" and e["name"] is not None:
            returned = True
    return AccountingInputs(losses, max(restarts, default=None), returned)
