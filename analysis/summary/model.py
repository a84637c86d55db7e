"""summary.json's `model` block: the queueing-model check (docs/queueing.md) per consumer, and per consumer
and phase, from the deliveries' cube's model inputs (summary.deliveries) and the ack-to-delivery
pairs' cube (transforms.model.ack_to_delivery, rolled up here by ack_to_delivery_rows).

Pure Python arithmetic (`predict`, `advise`, `regime`, `prefetch_advice`, `model_row`). Definitions
(docs/summary.md, the `model` block):

- `p` = mean processing time (end - start) of the consumer's measured deliveries: what it
  achieved, which may exceed what the scenario drew (`processing`).
- `R` (`round_trip_ms`, kept as it was) = p + 2 x min(broker_network_ms): right when the queue
  emptied (its fastest delivery was pure transit), far too large under a standing backlog.
- `check.round_trip_ms` = p + the median time from an ack to the delivery it drew
  (transforms.model.ack_to_delivery), which a backlog does not inflate; without any drawn
  delivery (the queue emptied, so the minimum is pure transit) p + 2 x min(broker_network_ms).
- `R_p95` = p + 2 x the p95, over the seconds, of the per-second minimum broker_network_ms
  (the legacy `advice.prefetch` only).
- The regime (`regime`): saturated, starved or unsaturated, from measured utilisation, buffer
  length and the queue's samples; the model's prediction (`check.predicted`) only where it
  applies: saturated or starved, manual ack with a prefetch limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from analysis.buckets import merge
from analysis.queueing import finite as _num, predict

if TYPE_CHECKING:
    from analysis.cube import Cube

__all__ = [
    "ack_to_delivery_rows",
    "predict",
    "advise",
    "regime",
    "prefetch_advice",
    "processing_check",
    "backlog_share",
    "model_row",
    "model_block",
    "CODEL_TARGET_PROCESSING_TIMES",
    "SATURATED_UTILISATION",
    "RARELY_EMPTY",
    "BACKLOG_SHARE",
    "OVERSHOOT_LIMIT",
    "OVERSHOOT_MIN_DELIVERIES",
    "APPLIES",
]

CODEL_TARGET_PROCESSING_TIMES = 5
"""CoDel target advice: this many mean processing times of buffer wait."""

SATURATED_UTILISATION = 0.9
"""Saturated: busy at least this share of its wall time..."""
RARELY_EMPTY = 0.1
"""...or at most this share of its deliveries arrived at an empty client buffer."""
BACKLOG_SHARE = 0.5
"""Starved (not saturated): the queue had messages ready in at least this share of its samples."""
OVERSHOOT_LIMIT = 0.05
"""Processing stretched: achieved mean above the drawn mean by more than this fraction..."""
OVERSHOOT_MIN_DELIVERIES = 20
"""...over at least this many deliveries (a phase a consumer barely saw says nothing)."""
APPLIES = ("saturated", "starved")
"""The regimes the model describes: a consumer kept fed by a backlog (docs/queueing.md)."""


def advise(processing_ms: Any, round_trip_p95_ms: Any, processing_p99_ms: Any) -> dict:
    """Prefetch and CoDel advice with one sentence of reasoning each (None where unknown)."""
    p, r95, p99 = _num(processing_ms), _num(round_trip_p95_ms), _num(processing_p99_ms)
    prefetch = math.ceil(r95 / p - 1e-9) if p and r95 and p > 0 and r95 > 0 else None
    interval = p99 if p99 is not None and p99 > 0 else None
    target = CODEL_TARGET_PROCESSING_TIMES * p if p is not None and p > 0 else None
    return {
        "prefetch": prefetch,
        "prefetch_why": None
        if prefetch is None
        else (
            f"ceil(R_p95 / p) = ceil({r95:.3g} / {p:.3g}): the fewest unacked deliveries that keep "
            f"the consumer busy while a round trip is as slow as its p95; more only adds buffer wait."
        ),
        "codel_interval_ms": interval,
        "codel_interval_why": None
        if interval is None
        else (
            f"the p99 processing time ({interval:.3g} ms): CoDel should not act on a standing queue "
            f"shorter than one worst-case message."
        ),
        "codel_target_ms": target,
        "codel_target_why": None
        if target is None
        else (
            f"{CODEL_TARGET_PROCESSING_TIMES} mean processing times ({p:.3g} ms each): a buffer that "
            f"holds more than a few messages' worth of work only adds latency."
        ),
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def regime(utilisation: Any, buffer_empty_share: Any, backlog: Any) -> tuple[str | None, str | None]:
    """(regime, why) from measured values; (None, None) without a utilisation.

    saturated: utilisation >= SATURATED_UTILISATION, or at most RARELY_EMPTY of the deliveries
    arrived at an empty buffer (the next message was nearly always waiting); starved: not
    saturated while the queue had messages ready in at least BACKLOG_SHARE of its samples (work
    was there, the consumer did not get it fast enough: prefetch, round trip, or something the
    model does not know); unsaturated: otherwise (the offered load was below capacity).
    """
    u, e, b = _num(utilisation), _num(buffer_empty_share), _num(backlog)
    if u is None:
        return None, None
    if u >= SATURATED_UTILISATION:
        return "saturated", f"busy {_pct(u)} of the time (saturated from {_pct(SATURATED_UTILISATION)})"
    if e is not None and e <= RARELY_EMPTY:
        return "saturated", (
            f"only {_pct(e)} of its deliveries arrived at an empty buffer (saturated up to {_pct(RARELY_EMPTY)})"
        )
    queue = "no queue samples" if b is None else f"the queue had messages ready {_pct(b)} of the time"
    if b is not None and b >= BACKLOG_SHARE:
        return "starved", f"busy {_pct(u)} while {queue} (a backlog from {_pct(BACKLOG_SHARE)})"
    return "unsaturated", f"busy {_pct(u)} and {queue}: the offered load was below its capacity"


def _not_applicable(
    reg: str | None, auto_ack: bool, prefetch: Any, r: float | None, p: float | None, unmeasured: bool
) -> str | None:
    if unmeasured:  # every delivery carried a message published during the warm-up
        return "not applicable: none of its deliveries was measured (all were published during the warm-up)"
    if reg is None:
        return "not applicable: no utilisation measured"
    if reg not in APPLIES:
        return "not applicable: unsaturated (offered load below capacity)"
    if auto_ack:
        return "not applicable: auto-ack (no prefetch window)"
    n = _num(prefetch)
    if n is None or n <= 0:
        return "not applicable: unlimited prefetch"
    if r is None or p is None or r <= 0 or p <= 0:
        return "not applicable: no round trip or processing time measured"
    return None


def prefetch_advice(round_trip_ms: Any, processing_ms: Any, source: str | None, wire_ms: Any) -> dict:
    """The prefetch that keeps the consumer busy, ceil(R/p), with the arithmetic behind it."""
    r, p, wire = _num(round_trip_ms), _num(processing_ms), _num(wire_ms)
    out: dict[str, Any] = {"prefetch": None, "round_trip_ms": r, "processing_ms": p, "ratio": None, "why": None}
    if r is None or p is None or r <= 0 or p <= 0:
        return out
    ratio = r / p
    n = max(1, math.ceil(ratio - 1e-9))
    if source == "ack_to_delivery" and wire is not None:
        how = f"p {p:.3g} ms + {wire:.3g} ms from an ack to the delivery it drew"
    elif wire is not None:
        how = f"p {p:.3g} ms + 2 × the fastest broker→consumer time, {wire:.3g} ms"
    else:
        how = f"p {p:.3g} ms + the wire time"
    out.update(
        prefetch=n,
        ratio=ratio,
        why=(
            f"R = {r:.3g} ms ({how}), p = {p:.3g} ms, R/p = {ratio:.3g}: {n} unacked deliveries keep the "
            f"consumer busy through a round trip; more only adds about p ms of buffer wait each."
        ),
    )
    return out


def processing_check(drawn_ms: Any, achieved_ms: Any, count: Any) -> dict:
    """Drawn vs achieved mean processing over the same deliveries; `stretched` when the achieved
    mean exceeds the drawn one by more than OVERSHOOT_LIMIT over OVERSHOOT_MIN_DELIVERIES or more."""
    drawn, achieved, n = _num(drawn_ms), _num(achieved_ms), _num(count)
    overshoot = achieved / drawn - 1 if drawn is not None and achieved is not None and drawn > 0 else None
    stretched = None
    if overshoot is not None and n is not None:
        stretched = n >= OVERSHOOT_MIN_DELIVERIES and overshoot > OVERSHOOT_LIMIT
    return {
        "drawn_ms": drawn,
        "achieved_ms": achieved,
        "overshoot": overshoot,
        "count": int(n) if n is not None else None,
        "stretched": stretched,
    }


def _round_trip(inputs: Mapping[str, Any], p: float | None, tmin: float | None) -> tuple[float | None, str | None]:
    gap = _num(inputs.get("ack_to_delivery_p50_ms"))
    if p is not None and gap is not None and (_num(inputs.get("ack_to_delivery_count")) or 0) > 0:
        return p + gap, "ack_to_delivery"
    if p is not None and tmin is not None:
        return p + 2 * tmin, "transit_min"
    return None, None


def model_row(inputs: Mapping[str, Any]) -> dict:
    """The summary's `model.consumers[]` row from a collected model_inputs row (as a dict), with
    the consumer's ack_to_delivery row and `backlog_share` / `queue_samples` merged in."""
    p = _num(inputs.get("processing_mean_ms"))
    tmin = _num(inputs.get("transit_min_ms"))
    t95 = _num(inputs.get("transit_p95_ms"))
    r = p + 2 * tmin if p is not None and tmin is not None else None
    r95 = p + 2 * t95 if p is not None and t95 is not None else None
    prefetch = inputs.get("prefetch_max")
    utilisation = _num(inputs.get("utilisation"))
    empty = _num(inputs.get("buffer_empty_share"))
    backlog = _num(inputs.get("backlog_share"))
    reg, why = regime(utilisation, empty, backlog)
    r_check, source = _round_trip(inputs, p, tmin)
    auto_ack = bool(inputs.get("auto_ack"))  # no prefetch window: nothing to advise either
    unmeasured = "measured_deliveries" in inputs and not _num(inputs["measured_deliveries"])
    not_applicable = _not_applicable(reg, auto_ack, prefetch, r_check, p, unmeasured)
    ratio_only = predict(None, r_check, p)["saturation_prefetch"]
    wire = _num(inputs.get("ack_to_delivery_p50_ms")) if source == "ack_to_delivery" else tmin
    return {
        "consumer": inputs.get("consumer"),
        "group": inputs.get("group"),
        **({"phase": inputs["phase"]} if inputs.get("phase") is not None else {}),  # none: the whole run
        "prefetch": prefetch,
        "prefetch_min": inputs.get("prefetch_min"),
        "processing_ms": p,
        "processing_p99_ms": _num(inputs.get("processing_p99_ms")),
        "transit_min_ms": tmin,
        "transit_p95_ms": t95,
        "round_trip_ms": r,
        "round_trip_p95_ms": r95,
        "predicted": predict(prefetch, r, p),
        "measured": {
            "utilisation": _num(inputs.get("utilisation")),
            "throughput_per_s": _num(inputs.get("throughput_per_s")),
            "buffer_wait_ms": _num(inputs.get("sojourn_mean_ms")),
        },
        "advice": advise(p, r95, inputs.get("processing_p99_ms")),
        "regime": reg,
        "check": {
            "regime_why": why,
            "utilisation": utilisation,
            "buffer_empty_share": empty,
            "backlog_share": backlog,
            "queue_samples": inputs.get("queue_samples"),
            "applies": not_applicable is None,
            "not_applicable": not_applicable,
            "round_trip_ms": r_check,
            "round_trip_source": source,
            "ack_to_delivery": {
                "count": inputs.get("ack_to_delivery_count") or 0,
                "min_ms": _num(inputs.get("ack_to_delivery_min_ms")),
                "p50_ms": _num(inputs.get("ack_to_delivery_p50_ms")),
                "p95_ms": _num(inputs.get("ack_to_delivery_p95_ms")),
            },
            "saturation_prefetch": ratio_only,
            "predicted": predict(prefetch, r_check, p) if not_applicable is None else None,
        },
        "processing": processing_check(
            inputs.get("processing_drawn_ms"), inputs.get("processing_achieved_ms"), inputs.get("processing_count")
        ),
        "prefetch_advice": prefetch_advice(None if auto_ack else r_check, p, source, wire),
    }


def ack_to_delivery_rows(pairs: Cube) -> list[dict[str, Any]]:
    """Per consumer and phase, and per consumer (phase None: the whole run, every phase's histogram
    merged), the ack-to-delivery times of the cube of transforms.model.ack_to_delivery_projections:
    `ack_to_delivery_count` and `_min_ms` (exact), `_p50_ms` and `_p95_ms` (log buckets)."""
    by_phase = pairs.histograms("ack_to_delivery", by=2)
    consumers: dict[Any, list] = {}
    for (consumer, _phase), h in by_phase.items():
        consumers.setdefault(consumer, []).append(h)
    rows = [((c, p), h) for (c, p), h in by_phase.items() if p is not None]
    rows += [((c, None), merge(*hs)) for c, hs in consumers.items()]
    out = []
    for (consumer, phase), h in rows:
        p50, p95 = h.quantiles([0.5, 0.95])
        out.append(
            {
                "consumer": consumer,
                "phase": phase,
                "ack_to_delivery_count": h.n,
                "ack_to_delivery_min_ms": h.min(),
                "ack_to_delivery_p50_ms": p50,
                "ack_to_delivery_p95_ms": p95,
            }
        )
    return out


Segments = Sequence[tuple[str, float, float]]
"""Timeline segments (phase, start_s, end_s) since t0, as transforms.phases.timeline_segments."""


def _phase_at(segments: Segments, t_s: float) -> str:
    return next((name for name, start, end in segments if start <= t_s < end), "base")


def backlog_share(
    samples: Iterable[Mapping[str, Any]], start_s: Any, end_s: Any, phase: str | None, segments: Segments
) -> tuple[float | None, int]:
    """(share of queue samples with messages ready, samples) over [start_s, end_s] (seconds since
    t0), only those in `phase` when given; (None, 0) without a sample there."""
    lo, hi = _num(start_s), _num(end_s)
    if lo is None or hi is None:
        return None, 0
    ready: list[float] = []
    for r in samples:
        t, depth = _num(r.get("t_s")), _num(r.get("ready"))
        if t is not None and depth is not None and lo <= t <= hi and (phase is None or _phase_at(segments, t) == phase):
            ready.append(depth)
    if not ready:
        return None, 0
    return sum(1 for v in ready if v > 0) / len(ready), len(ready)


def _with_backlog(inputs: dict, samples: list, segments: Segments, phase: str | None) -> dict:
    share, n = backlog_share(samples, inputs.get("span_start_s"), inputs.get("span_end_s"), phase, segments)
    if share is None:  # no queue sample: the deliveries drawn by an ack were waiting in the broker
        drawn, measured = _num(inputs.get("ack_to_delivery_count")), _num(inputs.get("measured_deliveries"))
        share = drawn / measured if drawn is not None and measured else None
    return {**inputs, "backlog_share": share, "queue_samples": n}


def _phase_note(row: dict, phase_rows: list[dict]) -> None:
    """A phase that needs a larger prefetch than the whole run's advice is named in its reason."""
    advice = row["prefetch_advice"]
    worst = max(
        (r for r in phase_rows if r["consumer"] == row["consumer"] and r["prefetch_advice"]["prefetch"] is not None),
        key=lambda r: r["prefetch_advice"]["prefetch"],
        default=None,
    )
    if advice["prefetch"] is None or worst is None or worst["prefetch_advice"]["prefetch"] <= advice["prefetch"]:
        return
    w = worst["prefetch_advice"]
    advice["why"] += (
        f" Phase {worst['phase']} needs {w['prefetch']} "
        f"(R = {w['round_trip_ms']:.3g} ms, p = {w['processing_ms']:.3g} ms)."
    )


def model_block(
    rows,
    phase_rows,
    consumers: list[dict],
    drawn_rows=(),
    queue_depth: Iterable[Mapping[str, Any]] = (),
    segments: Segments = (),
) -> dict:
    """The queueing-model check per consumer, and per consumer and phase (the trace's
    phase column) when a consumer saw more than one (transforms.model.model_inputs), with
    the ack-to-delivery times (ack_to_delivery_rows) and the queue's samples
    (summary.json's `queue_depth` rows: t_s, ready) for the regime."""
    by_id = {c["consumer"]: c for c in consumers}
    drawn = {(r["consumer"], r["phase"]): r for r in drawn_rows}
    samples = list(queue_depth)
    segments = [(str(name), float(start), float(end)) for name, start, end in segments]

    def checked(r, phase: str | None, **consumer: Any) -> dict:
        """model_row of a collected model_inputs row, with its ack_to_delivery columns (none drawn:
        count 0), the consumer's own fields given and the backlog over its span (in `phase`)."""
        ack = drawn.get((r["consumer"], phase), {"ack_to_delivery_count": 0})
        own = r.asDict() if hasattr(r, "asDict") else r  # a Row or a dict (summary.deliveries)
        inputs = {**own, **{k: v for k, v in ack.items() if k.startswith("ack_")}, **consumer}
        return model_row(_with_backlog(inputs, samples, segments, phase))

    out = []
    for r in rows:
        c = by_id.get(r["consumer"], {})
        out.append(checked(r, None, group=c.get("group"), utilisation=c.get("utilisation")))
    seen: dict = {}
    for r in phase_rows:
        seen[r["consumer"]] = seen.get(r["consumer"], 0) + 1
    phases = [
        checked(r, r["phase"], group=by_id.get(r["consumer"], {}).get("group"))
        for r in phase_rows
        if seen[r["consumer"]] > 1
    ]
    for row in out:
        _phase_note(row, phases)
    return {
        "consumers": out,
        "phases": phases,
        "rules": {
            "saturated_utilisation": SATURATED_UTILISATION,
            "rarely_empty": RARELY_EMPTY,
            "backlog_share": BACKLOG_SHARE,
            "overshoot_limit": OVERSHOOT_LIMIT,
            "overshoot_min_deliveries": OVERSHOOT_MIN_DELIVERIES,
        },
    }
