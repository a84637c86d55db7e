"""Parsing of a producer's traffic settings: a rate profile, on/off bursts, replay and the
mix of priorities.

See docs/scenarios.md (rate profiles, bursts, priority) and docs/replay.md (replay).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from loadgen.scenario.checks import Check, choice, mapping_fields, number, sub
from loadgen.scenario.errors import Invalid, did_you_mean, show
from loadgen.scenario.fields import yaml

__all__ = [
    "Bursts",
    "ReplaySpec",
    "RatePoints",
    "rate",
    "bursts",
    "replay",
    "priority",
    "RATE_EXAMPLE",
    "REPLAY_ONLY_FIELDS",
]

RATE_EXAMPLE = "[{at_s: 0, rate: 50}, {at_s: 30, rate: 500}]"
BURSTS_EXAMPLE = "{on_s: 2, off_s: 8}"
REPLAY_EXAMPLE = "{path: traces/sample.csv, speed: 1.0}"
REPLAY_ONLY_FIELDS = ("rate", "arrival", "size_bytes", "bursts", "priority")
"""Producer keys that a replay group takes from its file instead (an error when given)."""


def _window(value: Any) -> tuple[float, float | None]:
    wanted = "expected [start_s, end_s] in the source's seconds (end_s may be null: to the end)"
    if not isinstance(value, list) or len(value) != 2:
        raise Invalid(f"{wanted}, got {show(value)}")
    start = number(0)(value[0]) if value[0] is not None else 0.0
    if value[1] is None:
        return start, None
    end = number(0)(value[1])
    if end <= start:
        raise Invalid(f"{wanted}, with end_s > start_s, got {show(value)}")
    return start, end


def _loop(value: Any) -> bool | int:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value >= 1:
        return value
    raise Invalid(
        f"expected false (one pass), a number of passes >= 1, or true (until the run ends), got {show(value)}"
    )


@dataclass(frozen=True)
class Bursts:
    """On/off modulation of a producer's rate: `rate` for `on_s`, then `off_rate` for `off_s`,
    repeating; cycles are aligned on `start_s` (an on period starts there)."""

    on_s: float = field(metadata=yaml(number(0, strict=True)))
    off_s: float = field(metadata=yaml(number(0, strict=True)))
    off_rate: float = field(default=0.0, metadata=yaml(number(0)))
    start_s: float = field(default=0.0, metadata=yaml(number(0)))


@dataclass(frozen=True)
class ReplaySpec:
    """A producer group that replays a file instead of generating arrivals (docs/replay.md).

    `path` is absolute or relative to the working directory (the loader resolves it against
    the scenario file). `window` is [start_s, end_s) in the source's time (end None: to its
    end). `loop`: False (one pass), a number of passes, or True (until the run ends).
    `split`: "key" (by routing key: order per key kept) or "round_robin". `routing`:
    "group" (the group's routing key) or "recorded" (each row's own)."""

    path: str = field(metadata=yaml(None))  # the check needs the scenario's directory: replay()
    speed: float = field(default=1.0, metadata=yaml(number(0, strict=True)))
    window: tuple[float, float | None] = field(default=(0.0, None), metadata=yaml(_window, layout="[]"))
    loop: bool | int = field(default=False, metadata=yaml(_loop))
    split: str = field(default="key", metadata=yaml(choice("key", "round_robin")))
    routing: str = field(default="group", metadata=yaml(choice("group", "recorded")))


RatePoints = tuple[tuple[float, float], ...]


def rate(value: Any) -> float | RatePoints:
    """A number of msg/s >= 0, or a profile: a list of {at_s, rate} sorted by at_s. A point may also
    be an [at_s, rate] pair, as the resolved scenario (run.json) writes it."""
    if not isinstance(value, list):
        return number(0)(value)
    if not value:
        raise Invalid(f"expected a number >= 0 or a list of points such as {RATE_EXAMPLE}, got []")
    points: list[tuple[float, float]] = []
    for i, point in enumerate(value):
        at_s, value_, given_at, at_path = _point(point, i)
        points.append((at_s, value_))
        if i and at_s < points[i - 1][0]:
            raise Invalid(
                f"expected points in time order: at_s {at_s:g} comes after {points[i - 1][0]:g}", given_at, at_path
            )
        if i >= 2 and at_s == points[i - 1][0] == points[i - 2][0]:
            raise Invalid(
                f"three points at {at_s:g} s: a step takes two (the rate before and after)", given_at, at_path
            )
    return tuple(points)


def _point(point: Any, i: int) -> tuple[float, float, Any, str]:
    """Profile point `i`: its at_s and rate, at_s as given, and where at_s is."""
    if isinstance(point, list) and len(point) == 2:
        at_s, value = (_item(point, i, k, number(0)) for k in (0, 1))
        return at_s, value, point[0], f"[{i}][0]"
    if not isinstance(point, dict):
        raise Invalid(f"expected a point such as {{at_s: 0, rate: 50}}, got {show(point)}", point, f"[{i}]")
    unknown = [k for k in point if k not in ("at_s", "rate")]
    if unknown:
        raise Invalid(
            f"unknown key{did_you_mean(unknown[0], ('at_s', 'rate')) or ' (expected at_s, rate)'}",
            point[unknown[0]],
            f"[{i}].{unknown[0]}",
        )
    for key in ("at_s", "rate"):
        if key not in point:
            raise Invalid("missing required key", None, f"[{i}].{key}")
    try:
        at_s, value = sub(point, "at_s", number(0)), sub(point, "rate", number(0))
    except Invalid as bad:
        raise bad.within(f"[{i}]", point) from None
    return at_s, value, point["at_s"], f"[{i}].at_s"


def _item(pair: list[Any], i: int, k: int, check: Check) -> Any:
    """`check(pair[k])` for item `i` of a list of pairs, an error located at [i][k]."""
    try:
        return check(pair[k])
    except Invalid as bad:
        raise Invalid(bad.message, pair[k], f"[{i}][{k}]") from None


def priority(value: Any) -> tuple[tuple[int, float], ...] | None:
    """null (no priority property), one priority 0-255, or a mix {priority: weight}: each publish
    draws its priority with probability weight / sum of weights. The mix may also be a list of
    [priority, probability] pairs, as the resolved scenario (run.json) writes it."""
    if value is None:
        return None
    wanted = "expected null, a priority from 0 to 255, or a mix such as {1: 0.7, 5: 0.3}"
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= 255:
            raise Invalid(f"{wanted}, got {show(value)}")
        return ((value, 1.0),)
    if isinstance(value, list) and value:
        return _priority_pairs(value)
    if not isinstance(value, dict) or not value:
        raise Invalid(f"{wanted}, got {show(value)}")
    total = 0.0
    mix = []
    for key, weight in value.items():
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key <= 255:
            raise Invalid(f"expected priorities from 0 to 255 as keys, got {show(key)}", key, str(key))
        weight = sub(value, key, number(0, strict=True))
        mix.append((key, weight))
        total += weight
    return tuple((key, weight / total) for key, weight in sorted(mix))


def _priority_pairs(value: list[Any]) -> tuple[tuple[int, float], ...]:
    """[[priority, probability], ...] (Scenario.to_dict's form of a mix): probabilities that sum to 1
    are taken as they are, so a resolved mix reads back unchanged; others as weights, normalised."""
    mix: dict[int, float] = {}
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2:
            raise Invalid(f"expected a [priority, probability] pair such as [1, 0.7], got {show(pair)}", pair, f"[{i}]")
        key = _item(pair, i, 0, _priority)
        if key in mix:
            raise Invalid(f"priority {key} is given twice", key, f"[{i}][0]")
        mix[key] = _item(pair, i, 1, number(0, strict=True))
    total = sum(mix.values())
    scale = 1.0 if math.isclose(total, 1.0, rel_tol=0.0, abs_tol=1e-9) else total
    return tuple((key, weight / scale) for key, weight in sorted(mix.items()))


def _priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
        raise Invalid(f"expected a priority from 0 to 255, got {show(value)}")
    return value


def bursts(value: Any) -> Bursts | None:
    """`{on_s, off_s, off_rate, start_s}`, or null for none."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid(f"expected a mapping such as {BURSTS_EXAMPLE}, or null, got {show(value)}")
    return Bursts(**mapping_fields(value, Bursts))


def replay(scenario_dir: str) -> Check:
    """The check for `replay`: a mapping whose path (relative to `scenario_dir`) must exist."""

    def check(value: Any) -> ReplaySpec | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise Invalid(f"expected a mapping such as {REPLAY_EXAMPLE}, or null, got {show(value)}")
        return ReplaySpec(**mapping_fields(value, ReplaySpec, path=_path(scenario_dir)))

    return check


def _path(scenario_dir: str) -> Check:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise Invalid(f"expected the path of a replay file or run directory, got {show(value)}")
        resolved = value if os.path.isabs(value) else os.path.normpath(os.path.join(scenario_dir, value))
        if not os.path.exists(resolved):
            raise Invalid(
                f"no such file or directory: {resolved} (a relative path is taken from the scenario file's directory)"
            )
        return resolved

    return check
