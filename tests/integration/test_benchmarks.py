"""`python -m benchmarks` runs end to end with a tiny budget and writes its JSON (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.integration.conftest import REPO


def test_the_benchmark_entry_point_runs_a_comparison_and_writes_its_json(tmp_path):
    out = tmp_path / "results.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--only",
            "consume-prefetch-100",
            "--seconds",
            "0.2",
            "--rounds",
            "1",
            "--json",
            str(out),
            "--no-docs",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["machine"]["cpus"] >= 1
    [row] = data["results"]
    assert row["name"] == "consume-prefetch-100"
    assert set(row["median_per_s"]) == {"bare", "sojourn", "sojourn-notrace"}
    assert all(rate > 0 for rate in row["median_per_s"].values())
    # The ratios are the round's own trials' (one round here): traced against bare pika, and
    # tracing's cost against the same loop untraced, as printed (3 places; 4 per round).
    [bare], [traced], [untraced] = (row["per_s"][v] for v in ("bare", "sojourn", "sojourn-notrace"))
    assert abs(row["ratio_vs_bare_rounds"][0] - traced / bare) <= 0.00005
    assert abs(row["ratio_vs_bare"] - traced / bare) <= 0.0006
    assert abs(row["tracing_overhead"] - (1 - traced / untraced)) <= 0.0006
    # one round can not settle a target either way, whatever its ratio
    assert row["ratio_vs_bare_verdict"].endswith("by the median, not resolved")
    assert row["tracing_overhead_verdict"].endswith("by the median, not resolved")
    # the whole machine's CPU per message, and tracing's share of it from the same pair of trials
    [m_traced], [m_untraced] = (row["machine_cpu_us"][v] for v in ("sojourn", "sojourn-notrace"))
    assert m_traced > 0 and m_untraced > 0
    assert abs(row["tracing_cpu_rounds"][0] - (m_traced / m_untraced - 1)) <= 0.0006
    assert row["tracing_cpu_verdict"].endswith("by the median, not resolved")
    # CPU per message in each trial's window: every variant's loop used some. Only the traced
    # sojourn side has a trace writer process: the others report none for it, in the window or
    # after it (the writer's own figure is in clock ticks, possibly none in 0.2 s).
    assert set(row["median_cpu_us"]) == {"bare", "sojourn", "sojourn-notrace"}
    assert all(us > 0 for us in row["median_cpu_us"].values())
    assert row["median_child_cpu_us"]["bare"] == row["median_child_cpu_us"]["sojourn-notrace"] == 0
    assert row["median_child_after_us"]["bare"] == row["median_child_after_us"]["sojourn-notrace"] == 0
    # the collector's pauses in each window, reported per variant
    assert set(row["median_gc_us"]) == set(row["gc_worst_ms"]) == {"bare", "sojourn", "sojourn-notrace"}


def test_the_end_to_end_comparison_runs_sojourn_and_the_bare_pair_and_keeps_earlier_rows(tmp_path):
    out, docs = tmp_path / "results.json", tmp_path / "benchmarks.md"
    earlier = {
        "machine": {"date": "2026-01-01 00:00 UTC"},
        "results": [
            {
                "name": "publish",
                "kind": "publish",
                "rounds": 1,
                "seconds": 1,
                "median_per_s": {"bare": 10, "sojourn": 9, "sojourn-notrace": 9},
            }
        ],
    }
    out.write_text(json.dumps(earlier))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--only",
            "end-to-end",
            "--quick",
            "--json",
            str(out),
            "--docs",
            str(docs),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {"publish", "end-to-end"}
    assert rows["publish"]["measured"] == "2026-01-01 00:00 UTC"  # kept, and says when it was measured
    e2e = rows["end-to-end"]
    assert set(e2e["median_per_s"]) == {"bare", "sojourn", "sojourn-2p"}
    assert all(rate > 0 for rate in e2e["median_per_s"].values())
    # 1,000,000 msg/s asked: the producer can only fall behind; every message acked or left over.
    assert e2e["producer_fell_behind"] is True
    assert e2e["accounting_ok"] is True
    for run in e2e["trials"]["sojourn"] + e2e["trials"]["sojourn-2p"]:
        assert run["acked"] + run["leftover"] == run["published"] > 0
    [two] = e2e["trials"]["sojourn-2p"]
    assert sorted(two["users_per_worker"]) == [[0, 1], [1, 0]]  # producer and consumer in separate processes
    text = docs.read_text()
    assert "### End to end" in text and "| publish (2026-01-01 00:00 UTC) |" in text


def test_the_scaling_measurement_runs_sojourn_with_worker_processes(tmp_path):
    out = tmp_path / "results.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--only",
            "scaling",
            "--quick",
            "--users",
            "2",
            "--json",
            str(out),
            "--no-docs",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    [row] = json.loads(out.read_text())["results"]
    [one] = row["rows"]
    assert one["processes"] == 1 and one["median_per_s"] > 0 and one["accounting_ok"] is True
    assert one["users_per_worker"] == [[2, 2]]  # one worker process holds both groups' users
    assert one["broker_cores"] > 0 and one["loadgen_cores"] > 0


def test_the_flush_stall_probe_runs_each_variant_and_writes_its_json(tmp_path):
    out, docs = tmp_path / "results.json", tmp_path / "benchmarks.md"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--only",
            "flush-stall",
            "--quick",
            "--json",
            str(out),
            "--docs",
            str(docs),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    [row] = json.loads(out.read_text())["results"]
    assert set(row["median"]) == {"none", "one-call", "as-appended"}
    assert all(m["worst_ms"] >= m["p99_ms"] >= 0 for m in row["median"].values())
    # one trial per variant (--quick), each flushing a second's rows twice (none: the probe alone)
    assert {v: [(t["rows"], t["flushes"]) for t in ts] for v, ts in row["trials"].items()} == {
        v: [(17_000, 2)] for v in ("none", "one-call", "as-appended")
    }
    assert "### Tracing and the event loop" in docs.read_text()
