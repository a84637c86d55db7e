"""The impairment timeline: the scenario's `network:` settings resolved into timed steps.

The load generator resolves it once (`resolve_timeline`) and hands it to the proxy
process as JSON; the proxy applies each step when the wall clock reaches it, so
nothing has to be sent to it during the run. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loadgen.netem.link import LinkSettings, NetworkState

__all__ = [
    "Step",
    "Timeline",
    "resolve_timeline",
    "step_index_at",
    "transitions",
    "resets",
    "timeline_to_json",
    "timeline_from_json",
]


@dataclass(frozen=True)
class Step:
    """From `at_s` (seconds since t0) on, `state` is in force; `phase` names where it came from."""

    at_s: float
    phase: str
    state: NetworkState

    def to_dict(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "phase": self.phase, **self.state.to_dict()}


Timeline = Sequence[Step]


def _link(spec: Any) -> LinkSettings:
    if spec is None:
        return LinkSettings()
    return LinkSettings(
        float(spec.latency_ms or 0),
        float(spec.jitter_ms or 0),
        None if spec.bandwidth_bytes_per_s is None else float(spec.bandwidth_bytes_per_s),
    )


def _state(network: Any) -> NetworkState:
    return NetworkState(
        _link(network.upstream), _link(network.downstream), bool(network.down), bool(network.reset_peer)
    )


def resolve_timeline(scenario: Any) -> tuple[Step, ...] | None:
    """Steps at 0 and at each phase boundary where the network changes; None without `network:`.

    A boundary that leaves the network as it was is no step. After the last boundary
    the state holds through the drain (the run's final conditions).
    """
    if getattr(scenario, "network", None) is None:
        return None
    steps = [Step(0.0, scenario.phase_at(0.0), _state(scenario.at(0.0).network))]
    for t in scenario.change_times():
        state = _state(scenario.at(t).network)
        phase = scenario.phase_at(t)
        if state != steps[-1].state:
            steps.append(Step(float(t), phase, state))
    return tuple(steps)


def step_index_at(steps: Timeline, t_s: float) -> int:
    """Index of the step in force at elapsed time t_s (the first one before it starts)."""
    index = 0
    for i, step in enumerate(steps):
        if step.at_s <= t_s:
            index = i
    return index


def transitions(previous: NetworkState | None, step: Step) -> list[str]:
    """The trace event kinds that entering `step` records, in order.

    `network_change` always (its detail carries the whole state); `network_down` /
    `network_up` when the outage switch flips; `network_reset` when `reset_peer`
    becomes true (`down` and `reset_peer` are levels; the reset acts on the change, on
    the connections established then, so never on the first step: there are none yet).
    """
    kinds = ["network_change"]
    was_down = previous.down if previous is not None else False
    if step.state.down and not was_down:
        kinds.append("network_down")
    if was_down and not step.state.down:
        kinds.append("network_up")
    if resets(previous, step):
        kinds.append("network_reset")
    return kinds


def resets(previous: NetworkState | None, step: Step) -> bool:
    """Entering `step` resets the established connections: reset_peer turns true."""
    return step.state.reset_peer and previous is not None and not previous.reset_peer


def timeline_to_json(steps: Timeline) -> str:
    return json.dumps([s.to_dict() for s in steps], separators=(",", ":"))


def timeline_from_json(text: str) -> tuple[Step, ...]:
    data = json.loads(text)
    if not isinstance(data, list) or not data:
        raise ValueError(f"network timeline must be a non-empty JSON list, got {text[:80]!r}")
    steps = tuple(Step(float(d["at_s"]), str(d.get("phase") or "base"), NetworkState.from_dict(d)) for d in data)
    if any(b.at_s < a.at_s for a, b in zip(steps, steps[1:])):
        raise ValueError("network timeline steps must be in time order")
    return steps
