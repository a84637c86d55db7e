"""The broker drops every connection mid-run: the run recovers and still accounts for every message.

Isolated in its own virtual host, so closing its connections touches nothing else.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import run_in_batch, wait_for_t0
from tests.integration.traces import read_rows

VHOST = "sojourn-fault-test"
RABBITMQCTL = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"


def _ctl(*args: str) -> None:
    subprocess.run([RABBITMQCTL, *args], check=True, capture_output=True, timeout=60)


def _create_vhost() -> None:
    existing = subprocess.run(
        [RABBITMQCTL, "list_vhosts", "-q"], capture_output=True, text=True, timeout=60
    ).stdout.split()
    if VHOST not in existing:
        _ctl("add_vhost", VHOST)
    _ctl("set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*")


def _close_all_connections_mid_run(proc, run_dir) -> None:
    time.sleep(max(0.0, wait_for_t0(proc, run_dir) + 5 - time.time()))  # 5 s into the 14 s load
    _ctl("close_all_connections", "--vhost", VHOST, "sojourn fault test")


if Path(RABBITMQCTL).exists():
    run_in_batch(
        __name__,
        "broker-loss",
        """
name: it-fault
queue: {name: sojourn.it.fault}
run: {duration_s: 14, warmup_s: 1, drain_timeout_s: 20}
producers: [{name: p, rate: 100, confirms: true}]
consumers: [{name: c, prefetch: 20, processing_ms: 5}]
""",
        env={"SOJOURN_AMQP_URL": f"amqp://guest:guest@127.0.0.1:5672/{VHOST}"},
        before=_create_vhost,
        during=_close_all_connections_mid_run,
    )


@pytest.fixture()
def vhost():
    if not Path(RABBITMQCTL).exists():
        pytest.skip("rabbitmqctl is not available to inject the fault")
    yield f"amqp://guest:guest@127.0.0.1:5672/{VHOST}"


def test_run_survives_lost_connections_and_accounts_for_every_message(vhost: str, batch, analyze_in_process):
    ran = batch["broker-loss"]
    run_dir = ran.run_dir
    assert ran.returncode == 0, ran.stderr[-3000:]
    events = read_rows(run_dir, "event")
    lost = [e for e in events if e["kind"] == "connection_lost"]
    assert {e["source"].split("/")[0] for e in lost} >= {"p", "c"}  # both sides saw it
    publishes = read_rows(run_dir, "publish")
    assert len(publishes) > 1000  # it kept publishing after reconnecting (~100/s for 14 s)

    summary = analyze_in_process(run_dir)
    m = summary["messages"]
    assert m["unaccounted"] == 0, m["unaccounted_ids"]
    assert m["published"] == len({p["message_id"] for p in publishes})
    assert m["published"] == m["acked"] + m["discarded_total"] + m["left_in_broker"]
    # whatever was not acked was lost with the connection or failed to publish on it
    assert m["acked"] >= m["published"] - 20
    assert "guest:guest" not in (run_dir / "run.json").read_text()
