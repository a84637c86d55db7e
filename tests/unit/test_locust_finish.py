"""What a plain `locust -f loadgen/locustfile.py` run says as it goes and when it ends (loadgen.run.finish)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from loadgen.run.finish import (
    analyze_argv,
    analyze_command,
    driven_by_sojourn_run,
    finish_lines,
    locust_outputs,
    progress_scope,
)


def test_before_the_warm_up_ends_the_counts_are_not_said_to_be_since_it():
    assert "since warm-up" not in progress_scope(5, warmup_over=False)
    assert "warm-up" in progress_scope(5, warmup_over=False)


def test_after_the_warm_up_the_counts_are_since_it():
    assert progress_scope(5, warmup_over=True) == "(since warm-up)"


def test_without_a_warm_up_the_counts_are_since_the_start():
    assert progress_scope(0, warmup_over=False) == "(since start)"


def test_the_analyze_command_names_the_absolute_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert analyze_command("runs/x") == f"sojourn analyze {tmp_path / 'runs' / 'x'}"


def test_a_path_with_a_space_is_quoted_so_the_command_can_be_pasted(tmp_path):
    run_dir = tmp_path / "my runs" / "r1"
    words = shlex.split(analyze_command(run_dir))
    assert words == ["sojourn", "analyze", str(run_dir)]


def test_the_closing_lines_end_with_the_command_and_name_the_place_and_status(tmp_path):
    lines = finish_lines("r1", tmp_path / "r1", "completed", ["traces/", "run.json", "locust.html"])
    assert lines[0] == f"[sojourn] run r1 completed: {tmp_path / 'r1'}"
    assert "locust.html" in lines[1]
    assert lines[-1] == f"[sojourn] analyze it with: sojourn analyze {tmp_path / 'r1'}"


def test_without_html_or_csv_options_locusts_files_go_into_the_run_directory():
    out = locust_outputs("runs/r1", None, None)
    assert (out.html, out.csv_prefix) == (os.path.join("runs/r1", "locust.html"), os.path.join("runs/r1", "locust"))
    assert out.write_html and out.write_csv


def test_given_html_and_csv_options_are_left_to_locust_as_under_sojourn_run():
    out = locust_outputs("runs/r1", "/elsewhere/report.html", "/elsewhere/stats")
    assert (out.html, out.csv_prefix) == ("/elsewhere/report.html", "/elsewhere/stats")
    assert not out.write_html and not out.write_csv


def test_sojourn_run_is_recognised_by_the_pipe_it_hands_to_locust():
    assert driven_by_sojourn_run({"SOJOURN_ALIVE_FD": "7"})
    assert not driven_by_sojourn_run({})


def test_the_name_matches_the_variable_sojourn_run_sets():
    from loadgen.trace.writer import ALIVE_FD_ENV

    assert driven_by_sojourn_run({ALIVE_FD_ENV: "7"})


def test_the_analysis_argv_runs_the_sojourn_cli(tmp_path):
    argv = analyze_argv(tmp_path / "nowhere")
    assert argv[-2:] == ["analyze", str(tmp_path / "nowhere")]
    # the same entry point as the console script: its help names the analyze command
    repo = Path(__file__).resolve().parents[2]
    shown = subprocess.run([*argv[:-2], "--help"], capture_output=True, text=True, cwd=repo, timeout=60)
    assert shown.returncode == 0 and "analyze" in shown.stdout
    assert argv[0] == sys.executable
