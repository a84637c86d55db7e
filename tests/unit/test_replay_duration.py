"""A replay scenario without run.duration_s lasts as long as its window takes at its speed."""

from __future__ import annotations

import math
from pathlib import Path

from tests.unit.scenario_files import error, load

LAST_ROW_S = 12.3  # the trace's last row, in its own seconds


def _scenario(tmp_path: Path, replay: str, run: str = "run: {warmup_s: 1}\n") -> str:
    (tmp_path / "trace.csv").write_text(
        "offset_s,size_bytes\n" + "".join(f"{t:.1f},10\n" for t in (0.0, 4.0, 8.0, LAST_ROW_S))
    )
    return f"""
name: r
queue: {{name: q}}
{run}producers: [{{name: rec, replay: {{path: trace.csv, {replay}}}}}]
consumers: [{{name: c}}]
"""


def test_without_a_duration_the_run_lasts_the_window_at_its_speed(tmp_path: Path):
    for speed in (1.0, 2.0, 0.5):
        s = load(tmp_path, _scenario(tmp_path, f"speed: {speed}"))
        assert s.run.duration_s == math.floor(LAST_ROW_S / speed) + 1  # 13, 7, 25: the last row inside the run
        assert s.run.warmup_s == 1


def test_a_window_end_bounds_it_and_no_run_section_is_needed(tmp_path: Path):
    s = load(tmp_path, _scenario(tmp_path, "speed: 2, window: [2, 10]", run=""))
    assert s.run.duration_s == math.floor((10 - 2) / 2) + 1


def test_a_duration_given_is_kept_and_a_looping_replay_needs_one(tmp_path: Path):
    given = load(tmp_path, _scenario(tmp_path, "speed: 2", run="run: {duration_s: 30}\n"))
    assert given.run.duration_s == 30
    assert error(tmp_path, _scenario(tmp_path, "loop: true")) == "run.duration_s: missing required key"
