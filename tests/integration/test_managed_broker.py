"""`sojourn broker up|status|down` against the installed rabbitmq-server: a private node on a
free port whose low memory watermark blocks a publisher, while the shared broker is untouched.

The node is started as a user would (the console script) and always stopped in a finalizer.
Starting takes 10-25 s on a loaded 2-core machine, stopping 2-3 s, each rabbitmqctl status 2-4 s.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import pika
import pytest

from loadgen.broker import ManagedBroker
from tests.integration.conftest import free_port, sojourn
from tests.integration.traces import read_rows

# Above the node's own memory use at boot (125-140 MiB RSS measured here), so it starts without
# an alarm, and low enough that ~70 MB of queued messages set one.
WATERMARK_MIB = 200
MESSAGE_BYTES = 2 * 1024  # below the 4 KiB at which a classic queue moves bodies to its message store
MAX_MESSAGES = 200_000  # 400 MiB: far more than the headroom the watermark leaves
MAX_SECONDS = 30
# RabbitMQ checks memory every 2500 ms by default; a fast publisher overshoots the watermark by up
# to that much publishing. Checking every 200 ms keeps the
# bound tight, and exercises --setting.
MONITOR_MS = 200

pytestmark = pytest.mark.skipif(
    shutil.which("rabbitmq-server") is None and not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists(),
    reason="rabbitmq-server is not installed",
)


@pytest.fixture
def node(tmp_path):
    """(port, dir) of a private node started with a low watermark; stopped and deleted afterwards."""
    port, directory = free_port(), tmp_path / "broker"
    try:
        up = sojourn(
            "broker",
            "up",
            "--port",
            str(port),
            "--dir",
            str(directory),
            "--memory-watermark-mb",
            str(WATERMARK_MIB),
            "--setting",
            f"memory_monitor_interval={MONITOR_MS}",
            # queues page messages to disk from half the watermark by default, which can keep
            # memory under it for a long time: hold them in memory until the alarm
            "--setting",
            "vm_memory_high_watermark_paging_ratio=0.99",
            "--timeout",  # a timeout catches a hang: 10-25 s here, once over 20 s for a restart in CI
            "120",
            timeout=180,
        )
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"amqp://guest:guest@127.0.0.1:{port}/"
        yield port, directory
    finally:
        if (directory / "sojourn-broker.json").exists():
            ManagedBroker.from_dir(directory).stop(timeout=30, purge=True)


def publish_until_blocked(port: int) -> tuple[int, float, str | None]:
    """Publish transient messages to an exclusive queue until connection.blocked arrives (or the
    bounds run out): (messages published, seconds, blocked reason)."""
    params = pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials("guest", "guest"), blocked_connection_timeout=MAX_SECONDS
    )  # never hang on a block
    connection = pika.BlockingConnection(params)
    blocked: list[str] = []
    connection.add_on_connection_blocked_callback(lambda _conn, frame: blocked.append(frame.method.reason))
    channel = connection.channel()
    queue = channel.queue_declare("", exclusive=True).method.queue
    body = os.urandom(MESSAGE_BYTES)
    began, sent = time.monotonic(), 0
    try:
        while not blocked and sent < MAX_MESSAGES and time.monotonic() - began < MAX_SECONDS:
            channel.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=1))
            sent += 1
            if sent % 16 == 0:
                connection.process_data_events(0)
        deadline = time.monotonic() + 5  # the block may be in flight behind the last publishes
        while not blocked and time.monotonic() < deadline:
            connection.process_data_events(0.2)
        return sent, time.monotonic() - began, blocked[0] if blocked else None
    finally:
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - a blocked connection may refuse a clean close
            pass


def test_a_low_watermark_blocks_a_publisher_and_down_purge_removes_the_node(node):
    """One node for the whole story: starting one costs 10-25 s."""
    port, directory = node

    again = sojourn("broker", "up", "--dir", str(directory), timeout=30)
    assert again.returncode == 0
    assert "already running" in again.stderr
    assert again.stdout.strip() == f"amqp://guest:guest@127.0.0.1:{port}/"

    before = sojourn("broker", "status", "--dir", str(directory), timeout=60)
    assert before.returncode == 0, before.stderr
    assert f"sojourn-{port}@localhost: running" in before.stdout
    assert "alarms:    none" in before.stdout, "the node must start below its watermark"

    sent, seconds, reason = publish_until_blocked(port)
    assert reason == "low on memory", f"no block after {sent} x {MESSAGE_BYTES} B in {seconds:.1f} s"
    print(f"blocked after {sent} x {MESSAGE_BYTES} B in {seconds:.2f} s")
    assert sent > 100, "the block must come from what was published, not be there from the start"
    assert sent < MAX_MESSAGES and seconds < MAX_SECONDS

    run_blocked_producer(port, directory)

    down = sojourn("broker", "down", "--dir", str(directory), "--purge", timeout=90)
    assert down.returncode == 0, down.stderr
    assert not directory.exists()
    after = sojourn("broker", "status", "--port", str(port), "--dir", str(directory), timeout=30)
    assert after.returncode == 1
    assert "not running" in after.stdout


def run_blocked_producer(port: int, directory: Path) -> None:
    """A sojourn run against the node with the memory alarm forced on: its producer's connection
    is blocked, the block is traced, and publishes that wait longer than max_blocked_wait_s are
    given up with outcome blocked_timeout (never sent) after waiting that long."""
    # The exclusive queue above went with its connection, so the alarm may have cleared: force it.
    ManagedBroker.from_dir(directory).ctl("set_vm_memory_high_watermark", "absolute", "1MB", timeout=60)
    during = sojourn("broker", "status", "--dir", str(directory), timeout=60)
    assert "alarms:    memory (publishers are blocked)" in during.stdout, during.stdout
    scenario = directory.parent / "blocked.yaml"
    scenario.write_text(f"""
name: it-blocked
broker: {{managed: {{port: {port}}}}}   # the node is up already: the run uses it as it is
queue: {{name: sojourn.it.blocked, purge_on_start: true}}
run: {{duration_s: 3, drain_timeout_s: 2}}
producers:
  - {{name: p, rate: 10, confirms: true, max_blocked_wait_s: 0.3}}
""")
    run_dir = directory.parent / "run"
    result = sojourn("run", str(scenario), "--out", str(run_dir), "--no-analyze", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"a broker already answers on amqp://guest:****@127.0.0.1:{port}/: using it" in result.stderr
    events = [e for e in read_rows(run_dir, "event") if e["kind"] == "connection_blocked"]
    assert events and "low on memory" in events[0]["detail"]
    publishes = read_rows(run_dir, "publish")
    given_up = [p for p in publishes if p["outcome"] == "blocked_timeout"]
    assert given_up, sorted({p["outcome"] for p in publishes})
    assert all(p["blocked_ms"] >= 300 for p in given_up)
    assert not [p for p in publishes if p["outcome"] == "confirmed"]  # nothing got through the alarm


def test_a_port_held_by_another_process_is_refused(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = sojourn("broker", "up", "--port", str(port), "--dir", str(tmp_path / "b"), timeout=30)
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr


def test_a_setting_rabbitmq_rejects_fails_the_start_showing_the_nodes_log(tmp_path):
    directory = tmp_path / "b"
    try:
        result = sojourn(
            "broker",
            "up",
            "--port",
            str(free_port()),
            "--dir",
            str(directory),
            "--setting",
            "no_such.key=1",
            "--timeout",
            "50",
            timeout=90,
        )
        assert result.returncode == 2
        assert "did not start" in result.stderr
        assert str(directory / "log") in result.stderr
        assert "no_such.key" in result.stderr.split("last lines of", 1)[1]
    finally:
        if (directory / "sojourn-broker.json").exists():
            ManagedBroker.from_dir(directory).stop(timeout=30, purge=True)


def test_down_when_nothing_runs_says_so_and_succeeds(tmp_path):
    result = sojourn("broker", "down", "--port", str(free_port()), "--dir", str(tmp_path / "none"), timeout=30)
    assert result.returncode == 0
    assert "was not running" in result.stderr
