"""`sojourn nightly` prints each entry's verdict on stdout right under that entry's summary, before
the next entry starts, and still ends with the night's summary. Locust, the broker and Spark are
replaced by fakes at the command's seams (run_locust, broker_for, analysis.analyst.analyses)."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from loadgen.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_night(monkeypatch):
    """Entries run instantly; the analysis gives p99 from `p99_of[entry]` (12.5 ms unless set)."""
    import analysis.analyst
    import loadgen.commands.nightly as nightly

    p99_of: dict[str, float] = {}

    @contextmanager
    def no_broker(scenario):
        yield scenario

    def fake_analyze(run_dir):
        entry = os.path.basename(run_dir).split("-", 1)[1]
        summary = {
            "run": {"run_id": entry, "scenario": "quickstart", "t0_ns": len(p99_of) * 10**9, "status": "completed"},
            "throughput": {"ack_per_s": 150.0},
            "sojourn_ms": {"p50": 1.0, "p99": p99_of.get(entry, 12.5)},
            "messages": {"discarded_total": 0, "unaccounted": 0},
            "slo": [],
        }
        with open(os.path.join(run_dir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f)
        return summary

    monkeypatch.setattr(nightly, "broker_for", no_broker)
    monkeypatch.setattr(nightly, "run_locust", lambda *a, **k: False)

    @contextmanager
    def no_spark(run_dirs, **_where):
        yield fake_analyze

    monkeypatch.setattr(analysis.analyst, "analyses", no_spark)
    return p99_of


def test_the_failing_slo_is_printed_under_its_entrys_summary_before_the_next_entry(fake_night, tmp_path, capsys):
    suite = tmp_path / "suite.yaml"
    scenario = REPO / "scenarios/quickstart.yaml"
    suite.write_text(
        "name: night\nscenarios:\n"
        f"  - scenario: {scenario}\n    name: tight\n    slo: ['sojourn_ms.p99 < 5']\n"
        f"  - scenario: {scenario}\n    name: loose\n    slo: ['sojourn_ms.p99 < 250']\n"
    )
    assert main(["nightly", str(suite), "--out", str(tmp_path / "results")]) == 1
    out = capsys.readouterr().out.splitlines()
    runs = [i for i, line in enumerate(out) if line.startswith("run ")]  # each entry's summary starts so
    assert [out[i] for i in runs] == ["run tight  (completed)", "run loose  (completed)"]
    tight = out[runs[0] : runs[1]]
    assert "nightly night: tight: FAIL, 1 of 1 SLO failed" in tight
    assert "  FAIL SLO sojourn_ms.p99 = 12.5, bound < 5" in tight  # the fake's 12.5 against the suite's 5
    loose = out[runs[1] :]
    assert loose.index("nightly night: loose: PASS, all 1 SLO passed, no baseline yet (the entry's first run)") < (
        loose.index("nightly night: 2 scenarios, 1 failed checks")  # the night's summary stays, last
    )
    assert "  FAIL night.tight slo: sojourn_ms.p99 < 5" in loose
