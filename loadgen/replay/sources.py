"""A scenario's replay files: loaded once per process, checked before the run, described in run.json.

Errors in a file become ScenarioErrors located at `producers[i].replay.path` (exit status 2),
with the file, line or row and column in the message.
"""

from __future__ import annotations

import os
from typing import Any

from loadgen.replay.plan import expected_count
from loadgen.replay.source import ReplayFileError, ReplayTrace, load_trace
from loadgen.scenario import ScenarioError

__all__ = ["load_sources", "describe", "plan_kwargs"]

_CACHE: dict[tuple[str, int, int], ReplayTrace] = {}  # (path, mtime_ns, size): parsed once per process


def _load(path: str) -> ReplayTrace:
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
            trace = _load(group.replay.path)
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
