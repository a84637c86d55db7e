"""A consumer group's client buffer: CoDel on it (`codel`) and Solace-style egress classes
(`egress`), each a frozen spec and the parser of its YAML value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadgen.scenario.checks import boolean, integer, mapping_fields, number
from loadgen.scenario.errors import Invalid, show
from loadgen.scenario.fields import yaml

__all__ = ["CoDelSpec", "EgressSpec", "codel", "CODEL_EXAMPLE", "egress", "resolved_egress", "EGRESS_EXAMPLE"]

CODEL_EXAMPLE = "{target_ms: 5, interval_ms: 100}"
EGRESS_EXAMPLE = "{max_depth_units: 20000, min_burst: 4, classes: {high: [5, 255], low: [0, 4]}}"
_CLASSES_EXAMPLE = "{high: [5, 255], low: default}"
_MAX_PRIORITY = 255
_ALL: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = (("all", ((0, _MAX_PRIORITY),)),)


def _egress_classes(value: Any, resolved: bool = False) -> tuple[tuple[str, tuple[tuple[int, int], ...]], ...]:
    """`{name: [lowest, highest] | priority | [[lowest, highest], ...] | default}`, listed highest
    first: the order the classes are served in. No priority may be in two classes; `default` takes
    every priority no other class names, and without it the classes must cover 0..255. Null: one
    class of every priority. `resolved`: as EgressSpec.to_dict writes them, a default class's
    priorities spelled out where it was listed, which may be above a later class's: the listing is
    the order served, and the rule that catches a class written below the next does not apply."""
    if value is None:
        return _ALL
    if not isinstance(value, dict) or not value:
        raise Invalid(
            f"expected a mapping of class name to an inclusive priority range, listed highest "
            f"first, such as {_CLASSES_EXAMPLE}, got {show(value)}"
        )
    owner: dict[int, str] = {}
    named: list[tuple[str, tuple[tuple[int, int], ...]]] = []
    default_name = None
    for name, raw in value.items():
        if not isinstance(name, str) or not name:
            raise Invalid(f"expected class names to be non-empty strings, got {show(name)}", name, str(name))
        if raw == "default":
            if default_name is not None:
                raise Invalid(f"only one class can be the default; {default_name!r} already is", raw, name)
            default_name = name
            continue
        ranges = _priority_ranges(raw, name)
        for low, high in ranges:
            for p in range(low, high + 1):
                if p in owner:
                    raise Invalid(f"priority {p} is also in class {owner[p]!r}: classes may not overlap", raw, name)
                owner[p] = name
        if not resolved and named and min(low for low, _ in ranges) > min(low for low, _ in named[-1][1]):
            raise Invalid(
                f"{show(raw)} is above class {named[-1][0]!r}, listed before it: list the classes "
                f"highest first (the order they are served in)",
                raw,
                name,
            )
        named.append((name, ranges))
    rest = [p for p in range(_MAX_PRIORITY + 1) if p not in owner]
    if default_name is None:
        if rest:
            raise Invalid(
                f"priorities {_spans(rest)} are in no class: cover 0-{_MAX_PRIORITY}, or make one "
                f"class `default` (e.g. {_CLASSES_EXAMPLE})"
            )
        return tuple(named)
    if not rest:
        raise Invalid(
            "the other classes already cover 0-255: the default class would never get a message",
            "default",
            default_name,
        )
    by_name = dict(named)
    by_name[default_name] = tuple(_runs(rest))
    return tuple((name, by_name[name]) for name in value)  # the default's place in the listing is its rank


def _priority_ranges(raw: Any, name: str) -> tuple[tuple[int, int], ...]:
    """A priority, a range [lowest, highest], or a list of ranges, each 0 <= lowest <= highest <= 255."""
    wanted = "expected a priority 0-255, an inclusive range [lowest, highest], a list of ranges, or `default`"
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = [raw, raw]
    items = raw if isinstance(raw, list) and raw and all(isinstance(r, list) for r in raw) else [raw]
    out = []
    for item in items:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(p, int) and not isinstance(p, bool) for p in item)
        ):
            raise Invalid(f"{wanted}, got {show(raw)}", raw, name)
        low, high = item
        if not 0 <= low <= high <= _MAX_PRIORITY:
            raise Invalid(f"{wanted}, with 0 <= lowest <= highest <= 255, got {show(raw)}", raw, name)
        out.append((low, high))
    return tuple(out)


def _runs(priorities: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted priorities, highest run first: [0, 1, 2, 9, 10] -> [(9, 10), (0, 2)]."""
    runs: list[list[int]] = []
    for p in priorities:
        if runs and runs[-1][1] == p - 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return [(low, high) for low, high in reversed(runs)]


def _spans(priorities: list[int]) -> str:
    return ", ".join(f"{low}" if low == high else f"{low}-{high}" for low, high in reversed(_runs(priorities)))


@dataclass(frozen=True)
class CoDelSpec:
    """CoDel on a consumer group's client-side buffer: drop (or requeue) once messages have
    waited longer than `target_ms` for at least `interval_ms`. See docs/codel.md."""

    target_ms: float = field(metadata=yaml(number(0, strict=True)))
    interval_ms: float = field(metadata=yaml(number(0, strict=True)))
    requeue: bool = field(metadata=yaml(boolean, True))


@dataclass(frozen=True)
class EgressSpec:
    """The client buffer as Solace-style egress classes (loadgen/egress.py, docs/discards.md): each
    class holds at most `max_depth_units` work units of 2,048 bytes, the oldest discarded past that,
    but `min_burst` messages are always admitted. The classes together cover AMQP priorities 0..255."""

    max_depth_units: int = field(default=20_000, metadata=yaml(integer(1)))
    min_burst: int = field(default=4, metadata=yaml(integer(1)))
    classes: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = field(
        default=_ALL, metadata=yaml(_egress_classes, layout="{}")
    )
    """(name, its inclusive priority ranges) per class, in the order served (highest first)."""

    def to_dict(self) -> dict[str, Any]:
        """As YAML: a class of one range reads [lowest, highest], of several a list of ranges."""
        return {
            "max_depth_units": self.max_depth_units,
            "min_burst": self.min_burst,
            "classes": {
                name: [list(r) for r in ranges] if len(ranges) > 1 else list(ranges[0]) for name, ranges in self.classes
            },
        }


def codel(value: Any) -> CoDelSpec | None:
    """A consumer group's `codel` value: a mapping, or null for CoDel off."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid(f"expected a mapping such as {CODEL_EXAMPLE}, or null for CoDel off, got {show(value)}")
    return CoDelSpec(**mapping_fields(value, CoDelSpec))


def egress(value: Any) -> EgressSpec | None:
    """A consumer group's `egress` value: a mapping (`{}` or true: the Solace defaults), or null for none."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict):
        raise Invalid(f"expected a mapping such as {EGRESS_EXAMPLE}, or null for none, got {show(value)}")
    return EgressSpec(**mapping_fields(value, EgressSpec))


def resolved_egress(value: Any) -> EgressSpec | None:
    """`egress` as a resolved scenario (Scenario.to_dict) gives it: see _egress_classes's `resolved`."""
    if isinstance(value, dict):
        classes = {"classes": lambda v: _egress_classes(v, resolved=True)}
        return EgressSpec(**mapping_fields(value, EgressSpec, **classes))
    return egress(value)
