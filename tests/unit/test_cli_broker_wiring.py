"""sweep and nightly give each run the broker `sojourn run` would: a private node standing in for an
unreachable default broker is the URL of the scenario the run gets (loadgen.commands.common.broker_for),
recorded among its overrides as `broker.url=URL`, as run.json has always shown it."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from loadgen.cli import main

REPO = Path(__file__).resolve().parents[2]
PRIVATE = "amqp://guest:guest@127.0.0.1:5999/"


@pytest.fixture
def wiring(monkeypatch):
    """Replace the broker step with one that stands in a private node, and Locust with a recorder
    whose first run reports an interrupt (so no Spark starts)."""
    import loadgen.broker.for_run as for_run
    import loadgen.commands.nightly as nightly
    import loadgen.commands.sweep as sweep

    seen = {"brokers": [], "runs": []}

    @contextmanager
    def fake_broker_for_run(scenario, say):
        seen["brokers"].append(scenario.name)
        yield PRIVATE

    def fake_run_locust(scenario, run_dir, processes=0, verbose=False, metrics_port=None):
        assert scenario.broker.url == PRIVATE
        seen["runs"].append((Path(scenario.source_path).name, list(scenario.overrides)))
        return True

    monkeypatch.setattr(for_run, "broker_for_run", fake_broker_for_run)
    monkeypatch.setattr(sweep, "run_locust", fake_run_locust)
    monkeypatch.setattr(nightly, "run_locust", fake_run_locust)
    return seen


def test_a_sweep_run_gets_the_private_nodes_url(wiring, tmp_path: Path):
    code = main(
        [
            "sweep",
            str(REPO / "scenarios/quickstart.yaml"),
            "--vary",
            "consumers.main.prefetch=1,5",
            "--out",
            str(tmp_path / "sweep"),
        ]
    )
    assert code == 130  # the recorder's interrupt stops the sweep after its first run
    assert wiring["brokers"] == ["quickstart"]
    assert wiring["runs"] == [("quickstart.yaml", ["consumers.main.prefetch=1", f"broker.url={PRIVATE}"])]


def test_a_nightly_entry_gets_the_private_nodes_url(wiring, tmp_path: Path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: s\nscenarios:\n  - scenario: {REPO / 'scenarios/quickstart.yaml'}\n    set: {{run.duration_s: 35}}\n"
    )
    code = main(["nightly", str(suite), "--out", str(tmp_path / "results")])
    assert code == 130
    assert wiring["brokers"] == ["quickstart"]
    assert wiring["runs"] == [("quickstart.yaml", ["run.duration_s=35", f"broker.url={PRIVATE}"])]


def test_nightly_set_applies_to_every_entry_after_its_own_overrides(wiring, tmp_path: Path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: s\nscenarios:\n  - scenario: {REPO / 'scenarios/quickstart.yaml'}\n    set: {{run.duration_s: 35}}\n"
    )
    code = main(["nightly", str(suite), "--out", str(tmp_path / "results"), "--set", "run.duration_s=38"])
    assert code == 130
    assert wiring["runs"] == [("quickstart.yaml", ["run.duration_s=35", "run.duration_s=38", f"broker.url={PRIVATE}"])]


def test_nightly_set_is_validated_before_any_run(wiring, tmp_path: Path, capsys):
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"name: s\nscenarios:\n  - scenario: {REPO / 'scenarios/quickstart.yaml'}\n")
    assert main(["nightly", str(suite), "--out", str(tmp_path / "r"), "--set", "consumers.main.prefetch=-1"]) == 2
    assert "--set consumers.main.prefetch=-1" in capsys.readouterr().err
    assert wiring["runs"] == []


def test_validate_checks_a_suite_and_every_entry_with_its_overrides(tmp_path: Path, capsys):
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: s\nbaseline_runs: 3\nscenarios:\n  - scenario: {REPO / 'scenarios/quickstart.yaml'}\n"
        "    name: short\n    set: {run.duration_s: 35}\n"
    )
    assert main(["validate", str(suite)]) == 0
    out = capsys.readouterr().out
    assert f"{suite}: ok — suite 's', 1 entries" in out and "entry short:" in out and "with run.duration_s=35" in out
    assert main(["validate", str(suite), "--set", "run.warmup_s=99"]) == 2
    assert "run.warmup_s" in capsys.readouterr().err
    suite.write_text("name: s\nbaseline_runs: 3\nscenarios:\n  - scenario: nowhere.yaml\n")
    assert main(["validate", str(suite)]) == 2
    assert f"{suite}: scenarios[0].scenario: no such scenario file ({tmp_path / 'nowhere.yaml'})" in (
        capsys.readouterr().err
    )
