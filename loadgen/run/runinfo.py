"""RUN_DIR/run.json: the resolved scenario, code version, t0 and how the run ended."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from analysis.schema import SCHEMA_VERSION
from loadgen import __version__
from loadgen.redact import mask_text, mask_url
from loadgen.scenario.capacity import capacity_records, capacity_rows

__all__ = [
    "default_run_dir",
    "code_version",
    "write_run_json",
    "write_starting_run_json",
    "update_run_json",
    "read_run_json",
    "STARTING",
]

STARTING = "starting"
"""run.json's status before the load generator starts the run: only the resolved scenario is in it."""


def default_run_dir(scenario_name: str, root: str = "runs") -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return os.path.join(root, f"{stamp}-{scenario_name}")


def code_version() -> dict[str, str]:
    repo = Path(__file__).resolve().parents[2]  # the checkout holding loadgen/
    try:
        sha = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return {"sojourn": __version__, "git": sha or "unknown"}


def write_run_json(
    run_dir: str,
    scenario,
    *,
    run_id: str,
    t0_ns: int,
    status: str,
    replay: dict[str, Any] | None = None,
    receive_stamp: dict[str, Any] | None = None,
) -> None:
    """`replay`: per replay group, its source and expected publishes (loadgen.replay.sources.describe);
    `receive_stamp`: where the consumers' receive stamps come from (loadgen.amqp.kstamp)."""
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,  # run.json and traces share one contract version
        "run_id": run_id,
        **_resolved(scenario),
        "code_version": code_version(),
        "t0_ns": t0_ns,
        "duration_s": scenario.run.duration_s,
        "warmup_s": scenario.run.warmup_s,
        "drain_timeout_s": scenario.run.drain_timeout_s,
        "phases": [{"name": n, "start_s": s, "end_s": e} for n, s, e in scenario.phase_windows()],
        "capacity": capacity_records(capacity_rows(scenario)),  # the check before the run (docs/queueing.md)
        "queue": scenario.queue.name,
        "broker_depth_at_end": None,
        "ended_ns": None,
        "status": status,
    }
    if replay:
        data["replay"] = replay
    if receive_stamp:
        data["receive_stamp"] = receive_stamp
    _write(run_dir, data)


def write_starting_run_json(run_dir: str, scenario) -> str:
    """run.json before the run starts (status `starting`): the resolved scenario, as `sojourn run`
    hands it to the load generator it starts (loadgen.run.handoff), which writes run.json in full
    when the run starts. The path written."""
    _write(run_dir, {"schema_version": SCHEMA_VERSION, **_resolved(scenario), "status": STARTING})
    return os.path.join(run_dir, "run.json")


def _resolved(scenario) -> dict[str, Any]:
    """run.json's keys for the resolved scenario, passwords masked (loadgen.scenario.load_resolved reads them)."""
    return {
        "scenario_path": scenario.source_path,
        "overrides": [mask_text(o) for o in scenario.overrides],
        "scenario": scenario.to_dict(mask_password=True),
        "broker_url": mask_url(scenario.broker.url),
    }


def read_run_json(run_dir: str) -> dict[str, Any]:
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
        return json.load(f)


def update_run_json(run_dir: str, **fields: Any) -> None:
    data = read_run_json(run_dir)
    data.update(fields)
    _write(run_dir, data)


def _write(run_dir: str, data: dict[str, Any]) -> None:
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "run.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)
