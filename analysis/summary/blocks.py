"""The blocks of summary.json the job builds from its own collected rows: the run, the message
accounting, and the rows of the consumers, phases and per-second windows (docs/summary.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.transforms.accounting import ACCOUNT_CLASSES, DISCARD_CLASSES
from analysis.transforms.stats import QUANTILES
from analysis.transforms.windows import COMPONENTS, WINDOW_LATENCY_FIELDS, WINDOW_SOJOURN_FIELDS

from ._stats import stats_block

__all__ = ["run_block", "ledger_totals", "messages_block", "consumer_row", "phase_row", "window_row"]


def run_block(run: Mapping[str, Any]) -> dict:
    """summary.json's `run`: who, what and when, from run.json."""
    scenario = run["scenario"] if isinstance(run.get("scenario"), dict) else {}
    name = scenario.get("name") or (Path(run["scenario_path"]).stem if run.get("scenario_path") else None)
    return {
        "run_id": run.get("run_id"),
        "scenario": name,
        "t0_ns": int(run["t0_ns"]),
        "duration_s": run["duration_s"],
        "warmup_s": run.get("warmup_s", 0),
        "broker_url": run.get("broker_url"),
        "status": run.get("status"),
        "census_error": run.get("census_error"),
        "workers_missing": run.get("workers_missing") or [],
        "capacity": run.get("capacity") or [],  # the capacity check before the run (loadgen.scenario.capacity)
        "start_barrier": run.get("start_barrier"),
        "receive_stamp": run.get("receive_stamp"),
        "code_version": run.get("code_version"),
    }


def ledger_totals(
    ledger: Sequence[Mapping[str, Any]], ids: Mapping[str, int], redelivered: int, max_ids: int
) -> tuple[dict[str, int], list[str]]:
    """The accounting's totals and its first `max_ids` unaccounted ids (sorted), from the ledger's
    rows (transforms.accounting.ledger: the notable ids) and the publish rows with an id by whether
    they were confirmed (transforms.accounting.id_projections: 'true' / 'false' -> rows). The ids
    not in the ledger were each published once and acked: as many as the publish rows the
    ledger's published ids do not account for, and confirmed as many as their confirmed rows.
    `duplicates`: ids acked more than once (all in the ledger)."""
    published = [r for r in ledger if r["account"] is not None]
    plain = sum(ids.values()) - sum(int(r["_publishes"]) for r in published)
    confirmed = ids.get("true", 0) - sum(int(r["_confirms"]) for r in published)
    classes = Counter(r["account"] for r in published)
    totals = {
        "published": len(published) + plain,
        "confirmed": sum(1 for r in published if r["confirmed"]) + confirmed,
        **{c: classes[c] + (plain if c == "acked" else 0) for c in ACCOUNT_CLASSES},
        "duplicates": sum(1 for r in ledger if r["_acks"] > 1),
        "redelivered": redelivered,
    }
    # Python's string order is Spark's: code points compare as their UTF-8 bytes do
    unaccounted = sorted(r["message_id"] for r in published if r["account"] == "unaccounted")[:max_ids]
    return totals, unaccounted


def messages_block(
    totals: Mapping[str, Any], ids: list[str], finished: bool = True, workers_missing: bool = False
) -> dict:
    """summary.json's `messages` from the collected accounting totals and the unaccounted ids.

    A run that did not finish (`finished` false: run.json still says running, its processes were
    killed) took no census, and the trace rows its processes held were lost: the ids it can not
    place are `unknown_after_crash`, not `unaccounted`, which is kept for what a run that ended
    could not account for (docs/summary.md). Likewise, in a run some of whose workers' traces never
    reached the master (`workers_missing`: run.json names them), they are `unknown_workers_missing`."""
    discarded = {c: int(totals[c]) for c in DISCARD_CLASSES}
    unplaced = int(totals["unaccounted"])
    crashed, missing = not finished, finished and workers_missing
    unknown = crashed or missing
    return {
        "published": int(totals["published"]),
        "confirmed": int(totals["confirmed"]),
        "acked": int(totals["acked"]),
        "discarded": discarded,
        "discarded_total": sum(discarded.values()),
        "left_in_broker": int(totals["left_in_broker"]),
        "not_yet_read": int(totals["not_yet_read"]),  # a stream's (transforms.streams)
        "unaccounted": 0 if unknown else unplaced,
        "unaccounted_ids": [] if unknown else ids,
        "unknown_after_crash": unplaced if crashed else 0,
        "unknown_after_crash_ids": ids if crashed else [],
        "unknown_workers_missing": unplaced if missing else 0,
        "unknown_workers_missing_ids": ids if missing else [],
        "redelivered": int(totals["redelivered"]),
        "duplicates": int(totals["duplicates"]),
    }


def consumer_row(r) -> dict:
    """A `consumers[]` entry from a summary.deliveries consumer row."""
    return {
        "consumer": r["consumer"],
        "group": r["group"],
        "delivered": r["delivered"],
        "acked": r["acked"],
        "utilisation": r["utilisation"],
        "sojourn_ms": stats_block(r["sojourn_ms"]),
        "latency_ms": {"end_to_end": stats_block(r["end_to_end_ms"])},
        # additive: docs/summary.md, the `model` block
        "sojourn_quantiles_ms": {"q": list(QUANTILES), "ms": r["sojourn_ms"]["quantiles"]},
    }


def phase_row(r) -> dict:
    """A `phases[]` entry from a summary.deliveries phase row."""
    return {
        "phase": r["phase"],
        "start_s": r["start_s"],
        "end_s": r["end_s"],
        "published": r["published"],
        "acked": r["acked"],
        "throughput": {"publish_per_s": r["publish_per_s"], "ack_per_s": r["ack_per_s"]},
        "sojourn_ms": stats_block(r["sojourn_ms"]),
        "latency_ms": {"end_to_end": stats_block(r["end_to_end_ms"])},
    }


def window_row(r) -> dict:
    """A `windows[]` entry from a summary.deliveries window row."""
    components = r["components_ms"]  # null in a second in which no delivery ended
    return {
        "t_s": r["t_s"],
        "published": r["published"],
        "delivered": r["delivered"],
        "acked": r["acked"],
        "sojourn_ms": stats_block(r["sojourn_ms"], WINDOW_SOJOURN_FIELDS),
        "latency_ms": stats_block(r["latency_ms"], WINDOW_LATENCY_FIELDS),
        "components_ms": {name: (components[name] if components is not None else None) for name in COMPONENTS},
    }
