"""summary.json's `model` block: the queueing-model check (DOMAIN.md §2) per consumer, and per consumer
and phase, from the collected rows of transforms.model.model_inputs.

Pure Python arithmetic (`predict`, `advise`, `model_row`). Definitions (docs/summary.md, the
`model` block):

- `p` = mean processing time (end - start) of the consumer's measured deliveries.
- `R` = p + 2 x min(broker_network_ms): the smallest observed publish -> receive
  time is a delivery that found the queue empty, i.e. pure one-way transit; the ack
  travels the same path back, so it is doubled. Any larger value includes time the
  message waited in the broker queue, which is not part of the round trip.
- `R_p95` = p + 2 x the p95, over the seconds, of the per-second minimum
  broker_network_ms: the transit as it was in the slower seconds (a network slowdown
  raises every delivery's minimum in those seconds, a backlog does not lower it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["predict", "advise", "model_row", "model_block", "CODEL_TARGET_PROCESSING_TIMES"]

CODEL_TARGET_PROCESSING_TIMES = 5
"""CoDel target advice: this many mean processing times of buffer wait."""


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def predict(prefetch: Any, round_trip_ms: Any, processing_ms: Any) -> dict:
    """DOMAIN.md §2 for one consumer with a backlog (the queue never runs empty).

    saturation prefetch = ceil(R/p). With n < R/p: utilisation n*p/R, throughput
    n/R, no buffer wait. With n >= R/p: utilisation 1, throughput 1/p, and a message
    waits about (n - R/p)*p in the buffer. Every value is None when an input is
    missing, or p or R is not positive. prefetch 0 (unlimited) predicts no bound.
    """
    n, r, p = _num(prefetch), _num(round_trip_ms), _num(processing_ms)
    out = {
        "round_trip_ms": r,
        "processing_ms": p,
        "saturation_prefetch": None,
        "utilisation": None,
        "throughput_per_s": None,
        "buffer_wait_ms": None,
    }
    if r is None or p is None or r <= 0 or p <= 0:
        return out
    ratio = r / p
    out["saturation_prefetch"] = math.ceil(ratio - 1e-9)
    if n is None or n <= 0:
        return out
    if n < ratio:
        out.update(utilisation=n * p / r, throughput_per_s=1000.0 * n / r, buffer_wait_ms=0.0)
    else:
        out.update(utilisation=1.0, throughput_per_s=1000.0 / p, buffer_wait_ms=(n - ratio) * p)
    return out


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


def model_row(inputs: Mapping[str, Any]) -> dict:
    """The summary's `model.consumers[]` row from a collected model_inputs row (as a dict)."""
    p = _num(inputs.get("processing_mean_ms"))
    tmin = _num(inputs.get("transit_min_ms"))
    t95 = _num(inputs.get("transit_p95_ms"))
    r = p + 2 * tmin if p is not None and tmin is not None else None
    r95 = p + 2 * t95 if p is not None and t95 is not None else None
    prefetch = inputs.get("prefetch_max")
    return {
        "consumer": inputs.get("consumer"),
        "group": inputs.get("group"),
        **({"phase": inputs["phase"]} if "phase" in inputs else {}),
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
    }


def model_block(rows, phase_rows, consumers: list[dict]) -> dict:
    """The queueing-model check per consumer, and per consumer and phase (the trace's
    phase column) when a consumer saw more than one (transforms.model.model_inputs)."""
    by_id = {c["consumer"]: c for c in consumers}
    out = []
    for r in rows:
        c = by_id.get(r["consumer"], {})
        out.append(model_row({**r.asDict(), "group": c.get("group"), "utilisation": c.get("utilisation")}))
    seen: dict = {}
    for r in phase_rows:
        seen[r["consumer"]] = seen.get(r["consumer"], 0) + 1
    phases = [
        model_row({**r.asDict(), "group": by_id.get(r["consumer"], {}).get("group")})
        for r in phase_rows
        if seen[r["consumer"]] > 1
    ]
    return {"consumers": out, "phases": phases}
