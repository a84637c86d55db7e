"""`locust -f loadgen/locustfile.py --headless` as users run it directly, single and multi-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.integration.conftest import REPO, write_scenario
from tests.integration.traces import published_on_schedule, read_rows

SCENARIO = """
name: it-locust
queue:
  name: sojourn.it.locust-{tag}
  purge_on_start: true
  delete_on_end: true
run:
  duration_s: 5
  warmup_s: 0
  drain_timeout_s: 15
producers:
  - name: p
    count: {producers}
    rate: 50
consumers:
  - name: c
    count: {consumers}
    prefetch: 10
    processing_ms: 1
"""


def _locust(scenario: str, run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        "loadgen/locustfile.py",
        "--headless",
        "--scenario",
        scenario,
        "--run-dir",
        str(run_dir),
        "--only-summary",
        *extra,
    ]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


def _check_accounted(run_dir: Path) -> tuple[list[dict], list[dict]]:
    publishes = read_rows(run_dir, "publish")
    deliveries = read_rows(run_dir, "delivery")
    assert publishes, "no publish traces written"
    acked = Counter(d["message_id"] for d in deliveries if d["outcome"] == "ack")
    assert set(acked) == {p["message_id"] for p in publishes}
    assert max(acked.values()) == 1
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    return publishes, deliveries


def _queue_exists(name: str) -> bool:
    import pika
    import pika.exceptions

    conn = pika.BlockingConnection(
        pika.URLParameters(os.environ.get("SOJOURN_AMQP_URL") or "amqp://guest:guest@127.0.0.1:5672/")
    )
    try:
        conn.channel().queue_declare(name, passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker as exc:
        assert exc.reply_code == 404
        return False
    finally:
        if conn.is_open:
            conn.close()


def test_headless_locust_run_writes_traces_and_reports_rows(tmp_path: Path):
    scenario = write_scenario(tmp_path / "s.yaml", SCENARIO.format(tag="single", producers=1, consumers=1))
    result = _locust(scenario, tmp_path / "run", "--csv", str(tmp_path / "stats"))
    assert result.returncode == 0, result.stderr[-3000:]
    publishes, _ = _check_accounted(tmp_path / "run")
    # 50 msg/s constant for 5 s: arrivals at 0, 20 ms, ..., 4.98 s = 250 messages
    published_on_schedule(publishes, 50, 5)
    assert not _queue_exists("sojourn.it.locust-single")  # delete_on_end, after the census
    stats = (tmp_path / "stats_stats.csv").read_text()
    assert "publish:(default):sojourn.it.locust-single" in stats
    assert "consume:sojourn.it.locust-single" in stats


def test_processes_split_users_and_trace_each_message_once(tmp_path: Path):
    scenario = write_scenario(tmp_path / "s.yaml", SCENARIO.format(tag="multi", producers=2, consumers=2))
    result = _locust(scenario, tmp_path / "run", "--processes", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    publishes, deliveries = _check_accounted(tmp_path / "run")
    # two producers at 50 msg/s for 5 s
    published_on_schedule(publishes, 50, 5)
    assert len({p["producer"] for p in publishes}) == 2
    assert len({d["worker"] for d in deliveries} | {p["worker"] for p in publishes}) == 2
