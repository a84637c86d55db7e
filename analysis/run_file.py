"""A run directory's run.json, read and checked before anything else (before the JVM starts).

The analysis needs of it the run's start (t0_ns), its duration, its phases and its scenario's SLOs;
a file without them, of a run that never started, or of a trace schema this analysis does not read
is an error naming the file and the key (analysis.errors).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis import schema
from analysis.errors import RunFileError, SchemaVersionError
from analysis.slo import SloError, parse_slo

__all__ = ["load_run_json", "slo_expressions", "queue_arguments", "stream_readers"]


def _queue(scenario: object) -> dict[str, Any]:
    """run.json's resolved `scenario.queue`; {} when the scenario or its queue is missing or not a mapping."""
    queue = scenario.get("queue") if isinstance(scenario, dict) else None
    return queue if isinstance(queue, dict) else {}


def queue_arguments(scenario: object) -> dict[str, Any]:
    """The queue's arguments in run.json's resolved scenario (`scenario.queue.arguments`); {} when
    the scenario, its queue or the arguments are missing or not mappings."""
    arguments = _queue(scenario).get("arguments")
    return arguments if isinstance(arguments, dict) else {}


def stream_readers(scenario: object) -> list[tuple[str, Any]] | None:
    """On a stream (run.json's resolved `scenario.queue.type`, or its x-queue-type argument): each
    consumer group's (name, offset), in the scenario's order; None on any other queue."""
    if (_queue(scenario).get("type") or queue_arguments(scenario).get("x-queue-type")) != "stream":
        return None
    groups = scenario.get("consumers") if isinstance(scenario, dict) else None
    return [(g["name"], g.get("offset")) for g in groups or [] if isinstance(g, dict) and "name" in g]


def load_run_json(run_dir: Path) -> dict:
    """RUN_DIR/run.json, checked: a readable object of a run that started, with t0_ns, duration_s,
    well-formed phases and a schema version this analysis reads. Raises RunFileError or
    SchemaVersionError naming the file and the key."""
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        raise RunFileError(f"{path}: run.json not found; is {run_dir} a sojourn run directory?", path=path)
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFileError(f"{path}: not readable as JSON: {exc}", path=path) from exc
    if not isinstance(run, dict):
        raise RunFileError(f"{path}: expected a JSON object, got {type(run).__name__}", path=path)
    if run.get("status") == "starting":  # loadgen.run.runinfo.STARTING: the analysis does not import the load side
        raise RunFileError(
            f"{path}: the run never started (status starting: its command stopped before Locust began the run); "
            "there is nothing to analyse",
            path=path,
            key="status",
        )
    for key, types in (("t0_ns", (int,)), ("duration_s", (int, float))):
        value = run.get(key)
        if isinstance(value, bool) or not isinstance(value, types):
            raise RunFileError(f"{path}: {key} must be a number, got {value!r}", path=path, key=key)
    _check_phases(run.get("phases"), path)
    version = run.get("schema_version", schema.SCHEMA_VERSION)
    if version not in schema.READABLE_VERSIONS:
        raise SchemaVersionError(
            f"{path}: schema_version {version!r}, but this analysis reads version "
            f"{schema.READABLE_VERSIONS_TEXT}; analyse it with the sojourn version that recorded it",
            path=path,
            found=version,
            expected=schema.SCHEMA_VERSION,
        )
    return run


def _check_phases(phases: Any, path: Path) -> None:
    if phases is None:
        return
    if not isinstance(phases, list):
        raise RunFileError(f"{path}: phases must be a list, got {phases!r}", path=path, key="phases")
    for i, phase in enumerate(phases):
        ok = (
            isinstance(phase, dict)
            and isinstance(phase.get("name"), str)
            and all(
                isinstance(phase.get(k), (int, float)) and not isinstance(phase.get(k), bool)
                for k in ("start_s", "end_s")
            )
        )
        if not ok:
            raise RunFileError(
                f"{path}: phases[{i}] must be {{name, start_s, end_s}}, got {phase!r}", path=path, key=f"phases[{i}]"
            )


def slo_expressions(run: dict, run_dir: Path) -> list:
    """The run's scenario.slo expressions, each parsed once to fail with the file and index now."""
    scenario = run.get("scenario") or {}
    exprs = scenario.get("slo", []) if isinstance(scenario, dict) else []
    path = run_dir / "run.json"
    if not isinstance(exprs, list):
        raise RunFileError(f"{path}: scenario.slo must be a list, got {exprs!r}", path=path, key="scenario.slo")
    for i, expr in enumerate(exprs):
        try:
            parse_slo(expr)
        except SloError as exc:
            raise RunFileError(f"{path}: scenario.slo[{i}]: {exc}", path=path, key=f"scenario.slo[{i}]") from exc
    return exprs
