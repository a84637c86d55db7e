"""sweep and nightly give each run the broker `sojourn run` would: a private node standing in for an
unreachable default broker reaches the run as a broker.url override (loadgen.commands.common.broker_for)."""

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

    def fake_run_locust(scenario_path, overrides, run_dir, processes=0):
        seen["runs"].append((Path(scenario_path).name, list(overrides)))
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
