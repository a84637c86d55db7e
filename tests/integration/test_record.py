"""`sojourn record` against the real broker: what a recording of known publishes holds.

Each test runs the recorder as a user would (the console script, in its own process
group) on a vhost of its own with firehose tracing on, publishes a known sequence with
pika, and reads the file back with csv / json / pyarrow directly, not with sojourn's code.
About 20 s on a quiet 2-core machine; rabbitmqctl calls (about 0.7 s each, more under
load) are most of it.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pika
import pyarrow.parquet as pq
import pytest

from tests.integration.conftest import BIN, REPO, sojourn

VHOST = "sojourn-record-test"
URL = f"amqp://guest:guest@127.0.0.1:5672/{VHOST}"


def _ctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def vhost():
    if os.environ.get("SOJOURN_AMQP_URL"):
        pytest.skip("needs rabbitmqctl on the broker host (SOJOURN_AMQP_URL points elsewhere)")
    if subprocess.run(["rabbitmqctl", "-q", "add_vhost", VHOST], capture_output=True, timeout=30).returncode:
        _ctl("delete_vhost", VHOST)  # left over from an interrupted run
        _ctl("add_vhost", VHOST)
    try:
        _ctl("set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*")
        _ctl("trace_on", "-p", VHOST)
        yield VHOST
    finally:
        _ctl("delete_vhost", VHOST)


class Recorder:
    """`sojourn record` in a child process; `ready()` waits until its queue is bound."""

    def __init__(self, *args: str):
        self.child = subprocess.Popen(
            [str(BIN / "sojourn"), "record", "--url", URL, *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.err_lines: list[str] = []
        self._bound = threading.Event()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        for line in self.child.stderr:
            self.err_lines.append(line)
            if "recording publishes" in line:
                self._bound.set()

    def ready(self, timeout: float = 15) -> None:
        if not self._bound.wait(timeout):
            self.child.kill()
            raise AssertionError("recorder did not start: " + "".join(self.err_lines))

    def finish(self, timeout: float = 20) -> tuple[int, str, str]:
        self.child.wait(timeout)
        out = self.child.stdout.read()
        self._reader.join(5)
        return self.child.returncode, out, "".join(self.err_lines)


def _message(i: int) -> tuple[str, str, bytes, int | None, dict | None]:
    """The i-th message of the known sequence: exchange, routing key, body, priority, headers."""
    exchange, key = ("", "sojourn.rec.a") if i % 2 == 0 else ("amq.topic", "sojourn.rec.b")
    priority = i % 10 if i % 4 == 1 else None
    headers = {"seq": i, "tag": f"t{i % 3}", "nested": {"even": i % 2 == 0}} if i % 5 == 0 else None
    return exchange, key, b"x" * (1 + (i * 37) % 2000), priority, headers


def _publish(n: int, gap_s: float) -> list[float]:
    """Publish messages 0..n-1 at `gap_s` intervals; return each one's monotonic send time."""
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    channel = conn.channel()
    sent = []
    start = time.monotonic() + 0.05
    for i in range(n):
        target = start + i * gap_s
        if target - time.monotonic() > 0.002:
            time.sleep(target - time.monotonic() - 0.002)
        while time.monotonic() < target:  # the last 2 ms spun: sleep alone overshoots by ~1 ms
            pass
        exchange, key, body, priority, headers = _message(i)
        channel.basic_publish(exchange, key, body, pika.BasicProperties(priority=priority, headers=headers))
        sent.append(time.monotonic())
    conn.close()
    return sent


def _check_rows(rows: list[dict], n: int) -> None:
    """Every row is the message sent in its place: size, routing key, exchange, priority, headers."""
    assert len(rows) == n
    for i, row in enumerate(rows):
        exchange, key, body, priority, headers = _message(i)
        assert int(row["size_bytes"]) == len(body), i
        assert row["routing_key"] == key, i
        assert (row.get("exchange") or "") == exchange, i
        assert (None if row.get("priority") in (None, "") else int(row["priority"])) == priority, i
        assert (json.loads(row["headers"]) if row.get("headers") else None) == headers, i


def test_a_recording_holds_every_publish_with_its_properties_and_timing(vhost, tmp_path: Path):
    """150 messages, 20 ms apart, on two exchanges and routing keys, some with priority and headers.

    Timing tolerance (two busy cores): the median recorded gap is within 20 +- 3 ms, and
    the 90th percentile of |recorded gap - actual send gap| is at most 10 ms.
    """
    out = tmp_path / "x.csv"
    n, gap_s = 150, 0.020
    rec = Recorder("--out", str(out), "--count", str(n))
    rec.ready()
    sent = _publish(n, gap_s)
    code, stdout, stderr = rec.finish()
    assert code == 0, stderr
    assert f"recorded {n} messages" in stdout and str(out) in stdout

    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["offset_s", "size_bytes", "routing_key", "exchange", "priority", "headers"]
    _check_rows(rows, n)
    assert all(len(r["offset_s"].split(".")[1]) == 6 for r in rows)

    offsets = [float(r["offset_s"]) for r in rows]
    recorded_gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    sent_gaps = [b - a for a, b in zip(sent, sent[1:])]
    errors_ms = sorted(abs(r - s) * 1000 for r, s in zip(recorded_gaps, sent_gaps))
    median_gap_ms = statistics.median(recorded_gaps) * 1000
    p90_error_ms = errors_ms[int(0.9 * len(errors_ms))]
    print(
        f"timing: median recorded gap {median_gap_ms:.2f} ms (sent 20), |gap error| p50 "
        f"{statistics.median(errors_ms):.2f} ms, p90 {p90_error_ms:.2f} ms, max {errors_ms[-1]:.2f} ms"
    )
    assert abs(median_gap_ms - 20) <= 3
    assert p90_error_ms <= 10


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_jsonl_and_parquet_recordings_hold_the_same_rows_and_payloads(vhost, tmp_path: Path, suffix: str):
    out = tmp_path / f"x{suffix}"
    n = 20
    rec = Recorder("--out", str(out), "--count", str(n), "--payloads")
    rec.ready()
    _publish(n, 0.005)
    code, _stdout, stderr = rec.finish()
    assert code == 0, stderr
    if suffix == ".jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    else:
        rows = pq.read_table(out).to_pylist()
    _check_rows(rows, n)
    assert [base64.b64decode(r["payload_b64"]) for r in rows] == [_message(i)[2] for i in range(n)]


def test_ctrl_c_exits_130_and_keeps_what_was_recorded(vhost, tmp_path: Path):
    out = tmp_path / "x.parquet"  # the format that loses everything if the file is not closed
    rec = Recorder("--out", str(out), "--duration", "60")
    rec.ready()
    _publish(25, 0.005)
    time.sleep(0.5)  # let the firehose copies arrive
    os.killpg(rec.child.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    code, stdout, stderr = rec.finish()
    assert code == 130, stderr
    assert "recorded 25 messages" in stdout and "interrupted" in stdout
    _check_rows(pq.read_table(out).to_pylist(), 25)


def test_exchange_filter_records_only_that_exchange(vhost, tmp_path: Path):
    out = tmp_path / "x.csv"
    rec = Recorder("--out", str(out), "--count", "5", "--exchange", "amq.topic")
    rec.ready()
    _publish(10, 0.002)
    code, _stdout, stderr = rec.finish()
    assert code == 0, stderr
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["exchange"], int(r["size_bytes"])) for r in rows] == [
        ("amq.topic", len(_message(i)[2])) for i in range(1, 10, 2)
    ]


def test_bad_extension_and_unreachable_broker_name_the_problem(tmp_path: Path):
    bad = sojourn("record", "--out", str(tmp_path / "x.txt"), "--count", "1")
    assert bad.returncode == 2 and "unknown replay file extension '.txt'" in bad.stderr
    away = sojourn("record", "--url", "amqp://guest:s3cret@127.0.0.1:1/", "--out", str(tmp_path / "x.csv"))
    assert away.returncode == 3
    assert "amqp://guest:****@127.0.0.1:1/" in away.stderr and "s3cret" not in away.stderr
    assert not (tmp_path / "x.csv").exists()


def test_a_failed_start_leaves_an_earlier_recording_alone(tmp_path: Path):
    out = tmp_path / "x.csv"
    out.write_text("offset_s,size_bytes\n0.0,1\n")
    result = sojourn("record", "--url", "amqp://guest:guest@127.0.0.1:1/", "--out", str(out))
    assert result.returncode == 3
    assert out.read_text() == "offset_s,size_bytes\n0.0,1\n"


def test_tracing_off_exits_2_unless_trace_on_which_turns_it_off_again(vhost, tmp_path: Path):
    out = tmp_path / "x.csv"
    _ctl("trace_off", "-p", VHOST)
    try:
        refused = sojourn("record", "--url", URL, "--out", str(out), "--count", "1", timeout=60)
        rec = Recorder("--out", str(out), "--count", "3", "--trace-on")
        rec.ready()
        _publish(3, 0.005)
        code, _stdout, stderr = rec.finish()
        listing = subprocess.run(
            ["rabbitmqctl", "-q", "list_vhosts", "name", "tracing", "--formatter", "json"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    finally:
        _ctl("trace_on", "-p", VHOST)
    assert refused.returncode == 2, refused.stderr
    assert (
        f"firehose tracing is off on vhost '{VHOST}': run `rabbitmqctl trace_on -p {VHOST}` "
        f"(and trace_off afterwards), or pass --trace-on"
    ) in refused.stderr
    assert code == 0, stderr
    with open(out, newline="", encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == 3
    assert {"name": VHOST, "tracing": False} in json.loads(listing)
    assert "turned off again" in stderr


def test_a_recording_replays_with_its_counts_and_gaps(vhost, tmp_path: Path):
    """Record 120 publishes, replay the recording through `sojourn run`, compare the gaps.

    The replay's intended times are the recording's offsets (to the microsecond); its actual
    send gaps match the recorded gaps with a median |error| of at most 2 ms and a 90th
    percentile of at most 10 ms (two busy cores; a gevent timer alone can be 1-5 ms late).
    """
    from tests.integration.traces import read_rows

    recording = tmp_path / "rec.csv"
    n = 120
    rec = Recorder("--out", str(recording), "--count", str(n))
    rec.ready()
    _publish(n // 2, 0.020)
    _publish(n // 2, 0.005)
    code, _stdout, stderr = rec.finish()
    assert code == 0, stderr
    with open(recording, newline="", encoding="utf-8") as f:
        offsets = [float(r["offset_s"]) for r in csv.DictReader(f)]
    assert len(offsets) == n

    scenario = tmp_path / "replay.yaml"
    scenario.write_text(f"""
name: it-record-replay
broker: {{url: "{URL}"}}
queue: {{name: sojourn.rec.replay, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {offsets[-1] + 1.0:.3f}, drain_timeout_s: 10}}
producers:
  - name: rec
    replay: {{path: rec.csv}}
consumers:
  - name: c
    prefetch: 100
""")
    run_dir = tmp_path / "run"
    result = sojourn("run", str(scenario), "--out", str(run_dir), "--no-analyze")
    assert result.returncode == 0, result.stderr[-3000:]
    publishes = sorted(read_rows(run_dir, "publish"), key=lambda p: p["replay_index"])
    assert [p["replay_index"] for p in publishes] == list(range(n))
    recorded_gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    intended_gaps = [(b["intended_ns"] - a["intended_ns"]) / 1e9 for a, b in zip(publishes, publishes[1:])]
    assert max(abs(i - r) for i, r in zip(intended_gaps, recorded_gaps)) < 1e-6
    sent_gaps = [(b["publish_ns"] - a["publish_ns"]) / 1e9 for a, b in zip(publishes, publishes[1:])]
    errors_ms = sorted(abs(s - r) * 1000 for s, r in zip(sent_gaps, recorded_gaps))
    print(
        f"replay gap |error|: p50 {statistics.median(errors_ms):.2f} ms, "
        f"p90 {errors_ms[int(0.9 * len(errors_ms))]:.2f} ms, max {errors_ms[-1]:.2f} ms"
    )
    assert statistics.median(errors_ms) <= 2
    assert errors_ms[int(0.9 * len(errors_ms))] <= 10
    assert len(read_rows(run_dir, "delivery")) == n
