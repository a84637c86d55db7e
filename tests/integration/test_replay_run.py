"""Replay end to end: a file's rows are published exactly once across producers and Locust
worker processes, at their recorded times, in order per routing key, and the analysis agrees."""

from __future__ import annotations

import bisect
import collections
import csv
import json
import math
import statistics
from pathlib import Path

from tests.integration.conftest import sojourn, write_scenario
from tests.integration.traces import read_rows

KEYS = ("k.a", "k.b", "k.c")


def source_rows() -> list[dict]:
    """450 rows over ~3.5 s: 10 ms gaps, with a burst of 2 ms gaps in the middle."""
    rows, t = [], 0.05
    for i in range(450):
        rows.append(
            {
                "offset_s": f"{t:.3f}",
                "routing_key": KEYS[(i * 7) % 3 if i % 5 else 0],
                "size_bytes": 100 + i,
                "priority": i % 4 if i % 3 == 0 else "",
                "processing_ms": f"{0.5 + (i % 4) * 0.5:.1f}",
            }
        )
        t += 0.002 if 200 <= i < 300 else 0.010
    return rows


def test_a_replay_across_two_worker_processes_publishes_every_row_once_on_time(tmp_path: Path, analyze_in_process):
    rows = source_rows()
    with open(tmp_path / "trace.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    scenario = write_scenario(
        tmp_path / "replay.yaml",
        """
name: it-replay
queue: {name: sojourn.it.replay, purge_on_start: true}
run: {duration_s: 5, drain_timeout_s: 20}
producers:
  - name: rec
    count: 3
    confirms: true
    replay: {path: trace.csv, split: key}
consumers:
  - name: c
    prefetch: 50
    processing_ms: {distribution: recorded, default_ms: 9}
""",
    )
    run_dir = tmp_path / "run"
    result = sojourn("run", scenario, "--out", str(run_dir), "--processes", "2", "--no-analyze")
    assert result.returncode == 0, result.stderr[-3000:]

    publishes = read_rows(run_dir, "publish")
    # Exactly once: every source row, no row twice, whatever producer or process sent it.
    assert sorted(p["replay_index"] for p in publishes) == list(range(len(rows)))
    assert {p["replay_loop"] for p in publishes} == {0}
    assert all(p["outcome"] == "confirmed" for p in publishes)

    # split: key -> one producer per routing key, which sends that key's rows in file order.
    by_key = collections.defaultdict(list)
    for p in publishes:
        by_key[rows[p["replay_index"]]["routing_key"]].append(p)
    for key in KEYS:
        sent = sorted(by_key[key], key=lambda p: p["publish_ns"])
        assert len({p["producer"] for p in sent}) == 1
        assert [p["replay_index"] for p in sent] == sorted(p["replay_index"] for p in sent)
    # The three replay producers ran in both worker processes (2 + 1), not all in one: the
    # extra process shares the publishing (one Locust user class per producer).
    joined = {e["name"] for e in read_rows(run_dir, "event") if e["kind"] == "producer_join"}
    per_process = collections.Counter(name.split("/")[1] for name in joined)
    assert sorted(per_process.values()) == [1, 2], per_process
    # routing: group -> every row went to the scenario's queue (the default exchange's key)
    assert {p["routing_key"] for p in publishes} == {"sojourn.it.replay"}

    # Intended times are the file's offsets from t0; sizes and priorities are the file's.
    run = json.loads((run_dir / "run.json").read_text())
    t0 = run["t0_ns"]
    first = float(rows[0]["offset_s"])  # a file's times count from its first row
    for p in publishes:
        row = rows[p["replay_index"]]
        assert abs(p["intended_ns"] - t0 - (float(row["offset_s"]) - first) * 1e9) < 1_000
        assert p["size_bytes"] == row["size_bytes"]
        assert p["priority"] == (row["priority"] if row["priority"] != "" else None)
    assert run["replay"]["rec"]["expected"] == len(rows)

    # Sent on time: tolerance for a 2-core machine shared with the broker and the consumer.
    lateness_ms = sorted((p["publish_ns"] - p["intended_ns"]) / 1e6 for p in publishes)
    assert statistics.median(lateness_ms) < 5, lateness_ms[::45]

    # Consumers spent each message's recorded processing time.
    deliveries = read_rows(run_dir, "delivery")
    index_of = {p["message_id"]: p["replay_index"] for p in publishes}
    for d in deliveries:
        assert d["processing_ms"] == float(rows[index_of[d["message_id"]]]["processing_ms"])

    summary = analyze_in_process(run_dir)
    assert summary["messages"]["unaccounted"] == 0
    replay = summary["fidelity"]["rec"]["replay"]
    assert (replay["published"], replay["expected"], replay["duplicates"], replay["missing"]) == (450, 450, 0, 0)
    # per-second intended counts are the file's rows per second after t0
    per_second = collections.Counter(int(float(r["offset_s"]) - first) for r in rows)
    series = replay["per_second"]
    assert dict(zip(series["t_s"], series["intended"])) == {s: per_second.get(s, 0) for s in series["t_s"]}

    # The fidelity block's burst figures, recomputed here from the file and the publish traces.
    late = summary["fidelity"]["rec"]["lateness_ms"]
    assert late["p99"] <= late["p99_9"] <= late["max"], late
    published_per_second = collections.Counter((p["publish_ns"] - t0) // 1_000_000_000 for p in publishes)
    seconds = sorted(set(per_second) | set(published_per_second))
    intended_series = [per_second.get(s, 0) for s in seconds]
    published_series = [published_per_second.get(s, 0) for s in seconds]
    assert abs(replay["per_second_correlation"] - statistics.correlation(intended_series, published_series)) < 1e-9
    source_gaps = _diffs(sorted(round(float(r["offset_s"]) * 1e9) for r in rows))
    published_gaps = _diffs(sorted(p["publish_ns"] for p in publishes))
    ks = replay["inter_arrival_ms"]["ks_distance"]
    assert abs(ks - _ks_distance(source_gaps, published_gaps)) < 1e-9, ks
    assert replay["inter_arrival_ms"]["faithful"] is (ks <= 0.05)

    # Warned before the run: rows with a priority go to a queue without x-max-priority; and
    # `split: key` is called uneven exactly when one producer carried over 1.5x its share.
    assert "carry a priority, but queue 'sojourn.it.replay' has no x-max-priority" in result.stderr
    busiest = max(collections.Counter(p["producer"] for p in publishes).values()) / len(rows)
    assert ("split: key puts" in result.stderr) is (busiest > 1.5 / 3), (busiest, result.stderr[-2000:])


def _diffs(times_ns: list[int]) -> list[float]:
    """Consecutive gaps in ms, rounded half up to 0.1 ms (the resolution the analysis compares at)."""
    return [math.floor((b - a) / 100_000 + 0.5) / 10 for a, b in zip(times_ns, times_ns[1:])]


def _ks_distance(a: list[float], b: list[float]) -> float:
    """Two-sample Kolmogorov-Smirnov D = max over x of |F_a(x) - F_b(x)|, ties taken together."""
    a, b = sorted(a), sorted(b)
    return max(abs(bisect.bisect_right(a, x) / len(a) - bisect.bisect_right(b, x) / len(b)) for x in set(a) | set(b))
