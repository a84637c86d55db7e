"""Finite upper bounds on what a scenario asks for, beyond which a run would hang or never end on
any machine (`rate: 1e300`, `duration_s: 1e300`): each is refused, naming the file, the field
and the value, unless the scenario says `run: {beyond_limits: true}`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["LIMITS", "over_limits"]

LIMITS: dict[str, tuple[float, str]] = {
    "rate": (1_000_000.0, "msg/s per producer"),
    "duration_s": (7 * 86_400.0, "s (7 days)"),
    "drain_timeout_s": (86_400.0, "s (a day)"),
    "connect_timeout_s": (3_600.0, "s (an hour)"),
    "processing_ms": (3_600_000.0, "ms (an hour)"),
}
"""Field -> (largest value, its unit): far beyond any load test on one machine, far below a hang."""


def _over(field: str, value: Any) -> str | None:
    limit, unit = LIMITS[field]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > limit:
        return f"more than {limit:,.0f} {unit}; set run.beyond_limits: true to run it anyway"
    return None


def _rates(rate: Any) -> list[float]:
    """A producer's rate: a number or the rates of its profile's points."""
    return [r for _at, r in rate] if isinstance(rate, tuple) else [rate]


def over_limits(scenario: Any) -> Iterator[tuple[str, Any, str]]:
    """(YAML path, value, reason) for every value of `scenario` beyond LIMITS, the base and every
    phase's settings alike (a phase's are reported at the timeline entry that sets them)."""
    for field, value in (
        ("run.duration_s", scenario.run.duration_s),
        ("run.drain_timeout_s", scenario.run.drain_timeout_s),
        ("broker.connect_timeout_s", scenario.broker.connect_timeout_s),
    ):
        reason = _over(field.split(".")[-1], value)
        if reason:
            yield field, value, reason
    settings = [("", scenario)] + [
        (f"timeline[{j}].set.", scenario.at(phase.start_s)) for j, phase in enumerate(scenario.timeline)
    ]
    seen: set[tuple[str, str, Any]] = set()
    for prefix, at in settings:
        for i, group in enumerate(at.producers):
            rates = _rates(group.rate) + ([group.bursts.off_rate] if group.bursts is not None else [])
            for rate in rates:
                path = f"{prefix}producers.{group.name}.rate" if prefix else f"producers[{i}].rate"
                reason = _over("rate", rate)
                if reason and (path, "rate", rate) not in seen:
                    seen.add((path, "rate", rate))
                    yield path, rate, reason
        for i, group in enumerate(at.consumers):
            for name, ms in group.processing.params:
                path = f"{prefix}consumers.{group.name}.processing_ms" if prefix else f"consumers[{i}].processing_ms"
                reason = _over("processing_ms", ms) if name.endswith("ms") else None
                if reason and (path, name, ms) not in seen:
                    seen.add((path, name, ms))
                    yield f"{path}.{name}" if group.processing.distribution != "fixed" else path, ms, reason
