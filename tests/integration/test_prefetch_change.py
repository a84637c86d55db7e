"""A phase that changes a live consumer's prefetch really changes what the broker sends it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import REPO, write_scenario
from tests.integration.traces import read_rows


def test_prefetch_widened_by_a_phase_fills_the_buffer(tmp_path: Path):
    # 200 msg/s offered, 10 ms processing (at most 100/s served): a backlog waits in the
    # broker, so the consumer's buffer holds whatever the prefetch lets through.
    scenario = write_scenario(tmp_path / "s.yaml", """
name: it-prefetch-change
queue: {name: sojourn.it.prefetch-change, delete_on_end: true}
run: {duration_s: 8, drain_timeout_s: 20}
producers: [{name: p, rate: 200}]
consumers: [{name: c, prefetch: 1, processing_ms: 10}]
timeline:
  - name: wide
    start_s: 4
    set: {consumers.c.prefetch: 20}
""")
    run_dir = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "locust", "-f", "loadgen/locustfile.py", "--headless",
                             "--only-summary", "--scenario", scenario, "--run-dir", str(run_dir)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    deliveries = read_rows(run_dir, "delivery")
    narrow = [d for d in deliveries if d["prefetch"] == 1]
    wide = [d for d in deliveries if d["prefetch"] == 20]
    assert narrow and wide
    # prefetch 1: a delivery only comes after the previous ack, so nothing ever waits
    assert max(d["buffer_len"] for d in narrow) == 0
    # prefetch 20, saturated: one in processing and 18 waiting when the next arrives;
    # just after the re-subscription the delivery in processing belongs to the old
    # subscription and does not count against the new limit, so once 19 may wait
    # (DOMAIN.md §4: a prefetch change in flight can briefly exceed the limit).
    assert max(d["buffer_len"] for d in wide) in (20 - 2, 20 - 1)
    events = [e for e in read_rows(run_dir, "event") if e["kind"] == "prefetch_change"]
    assert [e["value"] for e in events] == [20.0]
    acked = {d["message_id"] for d in deliveries if d["outcome"] == "ack"}
    assert acked == {p["message_id"] for p in read_rows(run_dir, "publish")}
