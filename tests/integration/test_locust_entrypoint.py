"""`locust -f loadgen/locustfile.py --headless` as users run it directly, single and multi-process."""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from tests.integration.conftest import run_in_batch
from tests.integration.traces import read_rows

SCENARIO = """
name: it-locust
queue:
  name: sojourn.it.locust-{tag}
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


# Both through the locustfile as users run it (--headless --scenario --run-dir), in the batch.
run_in_batch(__name__, "locust-single", SCENARIO.format(tag="single", producers=1, consumers=1),
             command="locust", extra=("--csv", "{base}/locust-single-stats"))
run_in_batch(__name__, "locust-multi", SCENARIO.format(tag="multi", producers=2, consumers=2),
             command="locust", extra=("--processes", "2"))


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

    conn = pika.BlockingConnection(pika.URLParameters(
        os.environ.get("SOJOURN_AMQP_URL") or "amqp://guest:guest@127.0.0.1:5672/"))
    try:
        conn.channel().queue_declare(name, passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker as exc:
        assert exc.reply_code == 404
        return False
    finally:
        if conn.is_open:
            conn.close()


def test_headless_locust_run_writes_traces_and_reports_rows(batch):
    ran = batch["locust-single"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    publishes, _ = _check_accounted(ran.run_dir)
    # 50 msg/s constant for 5 s: arrivals at 0, 20 ms, ..., 4.98 s = 250 messages
    assert len(publishes) == 250
    assert not _queue_exists("sojourn.it.locust-single")  # delete_on_end, after the census
    stats = (ran.run_dir.parent / "locust-single-stats_stats.csv").read_text()
    assert "publish:(default):sojourn.it.locust-single" in stats
    assert "consume:sojourn.it.locust-single" in stats


def test_processes_split_users_and_trace_each_message_once(batch):
    ran = batch["locust-multi"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    publishes, deliveries = _check_accounted(ran.run_dir)
    # two producers at 50 msg/s for 5 s
    assert len(publishes) == 500
    assert len({p["producer"] for p in publishes}) == 2
    assert len({d["worker"] for d in deliveries} | {p["worker"] for p in publishes}) == 2
