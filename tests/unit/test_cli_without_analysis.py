"""A host that installed sojourn without its `analysis` extra (no PySpark, no plotly) generates
load, and every command that would analyse says so before any load runs: exit 5, the extra named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from loadgen.cli import main

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = str(REPO / "scenarios/quickstart.yaml")


@pytest.fixture
def no_pyspark(monkeypatch):
    """PySpark is not installed; a load run would be recorded in `runs`."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a))
    runs = []
    import loadgen.commands.run as run
    import loadgen.commands.sweep as sweep

    monkeypatch.setattr(run, "run_locust", lambda *a, **k: runs.append(a) or False)
    monkeypatch.setattr(sweep, "run_locust", lambda *a, **k: runs.append(a) or False)
    return runs


@pytest.mark.parametrize(
    "argv, advice",
    [
        (["run", QUICKSTART], "sojourn run --no-analyze"),
        (["sweep", QUICKSTART, "--vary", "consumers.main.prefetch=1,5"], "--no-analyze"),
        (["nightly", str(REPO / "scenarios/suites/nightly.yaml")], "run the suite on a machine that has it"),
    ],
)
def test_a_command_that_analyses_stops_before_the_load_and_names_the_extra(no_pyspark, tmp_path, capsys, argv, advice):
    assert main([*argv, "--out", str(tmp_path / "out")]) == 5
    err = capsys.readouterr().err
    assert "the analysis needs pyspark" in err and "pip install 'sojourn[analysis]'" in err and advice in err
    assert no_pyspark == []
    assert not (tmp_path / "out").exists()


def test_analyze_names_the_extra_and_keeps_the_traces(no_pyspark, tmp_path, capsys):
    run_dir = tmp_path / "run"
    (run_dir / "traces").mkdir(parents=True)
    (run_dir / "run.json").write_text('{"t0_ns": 0, "duration_s": 1}')
    assert main(["analyze", str(run_dir)]) == 5
    assert "the traces are kept" in capsys.readouterr().err
    assert (run_dir / "traces").is_dir() and not (run_dir / "summary.json").exists()


def test_a_run_told_not_to_analyse_needs_no_analysis(no_pyspark, tmp_path, monkeypatch):
    from contextlib import nullcontext

    import loadgen.commands.run as run

    monkeypatch.setattr(run, "broker_for", lambda scenario: nullcontext(scenario))
    assert main(["run", QUICKSTART, "--no-analyze", "--out", str(tmp_path / "out")]) == 0
    assert len(no_pyspark) == 1


def test_the_load_generator_imports_nothing_of_the_analysis_extra(tmp_path):
    """The locustfile, the users and every command module import without PySpark or plotly (a
    Locust worker host installs no analysis), and of the analysis package only the schema, the SLO
    grammar and the queueing arithmetic (the capacity check's), which are plain Python."""
    import os
    import subprocess
    import sys

    script = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pyspark', 'plotly', 'py4j'):\n"
        "            raise ImportError('not installed: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import loadgen.locustfile, loadgen.cli, loadgen.users.consumer, loadgen.users.producer\n"
        "import loadgen.commands.run, loadgen.commands.sweep, loadgen.commands.nightly\n"
        "import loadgen.commands.record_compare, loadgen.commands.validate\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'analysis')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SOJOURN_SCENARIO": QUICKSTART},
    )
    assert out.returncode == 0, out.stderr
    # the standard-library-only modules it shares: the trace schema, the SLO rule, the password mask
    assert out.stdout.split() == ["analysis", "analysis.queueing", "analysis.redact", "analysis.schema", "analysis.slo"]
