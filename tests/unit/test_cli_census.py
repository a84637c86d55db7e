"""A run whose census failed (the broker gone at the end) does not pass for a clean one: `sojourn
run` says why and exits 3, after keeping and (unless told not to) analysing what was captured."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

import loadgen.commands.run as run
from loadgen.cli import main

QUICKSTART = str(Path(__file__).resolve().parents[2] / "scenarios/quickstart.yaml")


@pytest.fixture
def a_run_ending(monkeypatch):
    """Locust replaced by one that writes run.json as a run ending `status` with `census_error`."""
    ending = {}

    def fake_run_locust(scenario, run_dir, processes=0, verbose=False, metrics_port=None):
        Path(run_dir, "run.json").write_text(json.dumps({"status": ending["status"], **ending["run_json"]}))
        return ending["status"] == "interrupted"

    monkeypatch.setattr(run, "run_locust", fake_run_locust)
    monkeypatch.setattr(run, "broker_for", lambda scenario: nullcontext(scenario))
    return ending


@pytest.mark.parametrize(
    "status, run_json, code",
    [
        ("completed", {"census_error": "connection lost"}, 3),
        ("completed", {"census_error": None}, 0),
        ("completed", {}, 0),  # a run.json written before census_error existed
        ("interrupted", {"census_error": "connection lost"}, 130),  # the interrupt is the news
    ],
)
def test_the_exit_status_says_the_census_failed(a_run_ending, tmp_path, capsys, status, run_json, code):
    a_run_ending.update(status=status, run_json=run_json)
    assert main(["run", QUICKSTART, "--no-analyze", "--out", str(tmp_path / "out")]) == code
    said = capsys.readouterr().err
    assert ("the census at the end failed (connection lost)" in said) == bool(run_json.get("census_error"))
