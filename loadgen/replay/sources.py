"""A scenario's replay files: loaded once per process, checked before the run, described in run.json.

Errors in a file become ScenarioErrors located at `producers[i].replay.path` (exit status 2),
with the file, line or row and column in the message.
"""

from __future__ import annotations

import os
from typing import Any

from loadgen.replay.plan import expected_count, slot_of
from loadgen.replay.source import ReplayFileError, ReplayTrace, load_trace
from loadgen.scenario.errors import ScenarioError

__all__ = ["load_sources", "trace_of", "describe", "plan_kwargs", "replay_warnings", "UNEVEN_SPLIT"]

UNEVEN_SPLIT = 1.5
"""Warn when `split: key` gives one producer more than this many times its even share of the rows."""

_CACHE: dict[tuple[str, int, int], ReplayTrace] = {}  # (path, mtime_ns, size): parsed once per process


def trace_of(path: str) -> ReplayTrace:
    """The parsed replay file at `path`, parsed once per process (until the file changes)."""
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _CACHE:
        _CACHE[key] = load_trace(path)
    return _CACHE[key]


def load_sources(scenario) -> dict[str, ReplayTrace]:
    """Every replay group's trace by group name; also checks the window selects some rows."""
    traces: dict[str, ReplayTrace] = {}
    for i, group in enumerate(scenario.producers):
        if group.replay is None:
            continue
        where = f"producers[{i}].replay"
        try:
            trace = trace_of(group.replay.path)
        except (ReplayFileError, OSError) as err:
            raise ScenarioError(scenario.source_path, f"{where}.path", group.replay.path, str(err)) from None
        try:
            expected_count(trace, **plan_kwargs(scenario, group))
        except ValueError as err:
            raise ScenarioError(scenario.source_path, f"{where}.window", list(group.replay.window), str(err)) from None
        traces[group.name] = trace
    return traces


def plan_kwargs(scenario, group) -> dict[str, Any]:
    """The plan()/expected_count() arguments a group's replay settings stand for."""
    spec = group.replay
    return {"duration_s": scenario.run.duration_s, "speed": spec.speed, "window": spec.window, "loop": spec.loop}


def describe(scenario, traces: dict[str, ReplayTrace]) -> dict[str, dict[str, Any]]:
    """run.json's `replay` block: per group the source and how many publishes the plan holds."""
    out = {}
    for name, trace in traces.items():
        group = scenario.producer(name)
        spec = group.replay
        out[name] = {
            "source": spec.path,
            "format": trace.format,
            "rows": len(trace),
            "span_s": trace.offset_s[-1] if len(trace) else 0.0,
            "speed": spec.speed,
            "window": list(spec.window),
            "loop": spec.loop,
            "split": spec.split,
            "routing": spec.routing,
            "producers": group.count,
            "expected": expected_count(trace, **plan_kwargs(scenario, group)),
            "ignored_columns": list(trace.ignored_columns),
        }
    return out


def replay_warnings(scenario, traces: dict[str, ReplayTrace]) -> list[str]:
    """Replay settings that are valid but probably not what the user meant: `split: key` that puts
    most rows on one producer (its routing keys are few or skewed), and rows with a priority sent
    to a queue without `x-max-priority`, where the broker ignores it."""
    out = []
    max_priority = "x-max-priority" in (scenario.queue.arguments or {})
    for i, group in enumerate(scenario.producers):
        trace = traces.get(group.name)
        if trace is None or not len(trace):
            continue
        where = f"{scenario.source_path}: producers[{i}].replay"
        spec = group.replay
        if spec.split == "key" and group.count > 1:
            per_slot = [0] * group.count
            for index, key in enumerate(trace.routing_key):
                per_slot[slot_of(index, key, group.count, "key")] += 1
            busiest = max(per_slot) / len(trace)
            if busiest > UNEVEN_SPLIT / group.count:
                keys = len(set(trace.routing_key))
                out.append(
                    f"{where}.split: key puts {busiest:.1%} of {spec.path}'s rows on one of {group.count} "
                    f"producers ({keys} routing key{'s' if keys != 1 else ''}; an even share is "
                    f"{1 / group.count:.1%}): that producer's rate limits the replay; split: round_robin "
                    "shares the rows evenly (without keeping each key's order on one producer)"
                )
        if not max_priority and any(p is not None for p in trace.priority):
            rows = sum(p is not None for p in trace.priority)
            out.append(
                f"{where}.path: {rows:,} rows of {spec.path} carry a priority, but queue "
                f"{scenario.queue.name!r} has no x-max-priority argument: the broker ignores message "
                "priorities there (set queue.arguments.x-max-priority, e.g. 10)"
            )
    return out
