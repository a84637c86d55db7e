"""What a plain `locust -f loadgen/locustfile.py` run tells its user as it goes and when it ends:
the scope of the progress line's counts, where the run directory is, and the command that
analyses it. Plain text from plain values, no I/O: loadgen.run.locust_session prints it.

Under `sojourn run` (which sets ALIVE_FD_ENV for the Locust it starts) the command itself says
where the run is and analyses it, so these lines are left out.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ANALYZE_HINT",
    "driven_by_sojourn_run",
    "progress_scope",
    "analyze_command",
    "analyze_argv",
    "finish_lines",
    "LocustOutputs",
    "locust_outputs",
]

ANALYZE_HINT = "sojourn analyze"

# The variable `sojourn run` sets for the Locust it starts (loadgen.trace.writer.ALIVE_FD_ENV);
# spelled out here so that this module stays free of the trace writer's imports.
_SOJOURN_RUN_ENV = "SOJOURN_ALIVE_FD"


def driven_by_sojourn_run(environ: Mapping[str, str] = os.environ) -> bool:
    """True when `sojourn run` started this Locust: it prints the run's place and analyses it."""
    return bool(environ.get(_SOJOURN_RUN_ENV))


def progress_scope(warmup_s: float, warmup_over: bool) -> str:
    """What the progress line's publish/consume counts (Locust's statistics) cover: Locust's
    statistics are reset when the warm-up ends, so before that they count the warm-up too."""
    if warmup_s <= 0:
        return "(since start)"
    if warmup_over:
        return "(since warm-up)"
    return f"(warm-up, not counted after {warmup_s:g}s)"


def analyze_command(run_dir: str | os.PathLike[str]) -> str:
    """The exact shell command that analyses `run_dir`, with its absolute path."""
    return f"{ANALYZE_HINT} {shlex.quote(str(Path(run_dir).resolve()))}"


def analyze_argv(run_dir: str | os.PathLike[str]) -> list[str]:
    """`sojourn analyze RUN_DIR` as this interpreter runs it (the console script may not be on PATH)."""
    return [sys.executable, "-m", "loadgen.cli", "analyze", str(Path(run_dir).resolve())]


@dataclass(frozen=True)
class LocustOutputs:
    """Where Locust's report and statistics of a run go, and whether sojourn writes them."""

    html: str
    csv_prefix: str
    write_html: bool  # the user gave no --html: sojourn writes it when the test stops
    write_csv: bool  # the user gave no --csv: likewise


def locust_outputs(run_dir: str | os.PathLike[str], html_file: str | None, csv_prefix: str | None) -> LocustOutputs:
    """The user's --html / --csv when given (Locust writes them, as under `sojourn run`), else
    the run directory's locust.html and locust_*.csv, where `sojourn run` puts them."""
    base = Path(run_dir)
    return LocustOutputs(
        html=html_file or str(base / "locust.html"),
        csv_prefix=csv_prefix or str(base / "locust"),
        write_html=not html_file,
        write_csv=not csv_prefix,
    )


def finish_lines(run_id: str, run_dir: str | os.PathLike[str], status: str, files: list[str]) -> list[str]:
    """The closing lines of a run: its status and absolute place, what it holds, how to analyse it."""
    where = Path(run_dir).resolve()
    lines = [f"[sojourn] run {run_id} {status}: {where}"]
    if files:
        lines.append(f"[sojourn]   holds {', '.join(files)}")
    lines.append(f"[sojourn] analyze it with: {analyze_command(where)}")
    return lines
