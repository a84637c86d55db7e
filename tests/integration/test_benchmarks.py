"""`python -m benchmarks` runs end to end with a tiny budget and writes its JSON (no timing asserted)."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.integration.conftest import REPO


def test_the_benchmark_entry_point_runs_a_comparison_and_writes_its_json(tmp_path):
    out = tmp_path / "results.json"
    result = subprocess.run([sys.executable, "-m", "benchmarks", "--only", "consume-prefetch-100",
                             "--seconds", "0.2", "--rounds", "1", "--json", str(out), "--no-docs"],
                            cwd=REPO, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["machine"]["cpus"] >= 1
    [row] = data["results"]
    assert row["name"] == "consume-prefetch-100"
    assert set(row["median_per_s"]) == {"bare", "sojourn", "sojourn-notrace"}
    assert all(rate > 0 for rate in row["median_per_s"].values())
    assert "ratio_vs_bare" in row and "tracing_overhead" in row
