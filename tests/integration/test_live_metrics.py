"""Live metrics scraped by a real Prometheus: `sojourn run --metrics-port P --processes 2` serves on
P (the master) and P+1, P+2 (the two workers, one with the producer, one with the consumer); a
Prometheus server of the test's own (Debian's `prometheus`, loopback only) scrapes all three
every second, and its query API gives the run's ack rate within 5 % of summary.json's (and the one
trace flush by which the counters move at a time)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from loadgen.broker.local import port_free
from loadgen.run.runtime import FLUSH_EVERY_S
from tests.integration.conftest import free_port, run_in_batch

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("prometheus") is None,
        reason="Prometheus not found (apt-get install prometheus, or scripts/setup.sh --install-broker)",
    ),
]

RATE, WARMUP_S, DURATION_S = 100, 2, 14
SCRAPE_S = 1


def _free_triple() -> int:
    for _ in range(50):
        base = free_port()
        if all(port_free(base + i) for i in (1, 2)):
            return base
    pytest.skip("no three free ports in a row")


METRICS_PORT = _free_triple()
PROMETHEUS_PORT = free_port(avoid={METRICS_PORT, METRICS_PORT + 1, METRICS_PORT + 2})
_PROMETHEUS: dict[str, object] = {}

SCENARIO = f"""
name: it-live-metrics
queue:
  name: sojourn.it.live-metrics
  purge_on_start: true
  delete_on_end: true
run:
  duration_s: {DURATION_S}
  warmup_s: {WARMUP_S}
  drain_timeout_s: 10
producers:
  - name: p
    rate: {RATE}
    arrival: constant
    confirms: true
consumers:
  - name: c
    prefetch: 20
    processing_ms: 2
"""


def _start_prometheus(base: Path) -> None:
    base.mkdir(parents=True, exist_ok=True)
    targets = [f"127.0.0.1:{METRICS_PORT + i}" for i in range(3)]
    config = base / "prometheus.yml"
    config.write_text(
        f"global: {{scrape_interval: {SCRAPE_S}s, scrape_timeout: {SCRAPE_S}s}}\n"
        f"scrape_configs:\n  - job_name: sojourn\n    static_configs:\n      - targets: {json.dumps(targets)}\n"
    )
    log = open(base / "prometheus.log", "w")  # noqa: SIM115 - the process's, closed with it
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={base / 'data'}",
            f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    _PROMETHEUS.update(proc=proc, log=log, dir=base)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready", timeout=1).read()
            return
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    raise AssertionError(f"Prometheus did not become ready: {(base / 'prometheus.log').read_text()[-2000:]}")


run_in_batch(
    __name__,
    "live-metrics",
    SCENARIO,
    extra=("--metrics-port", str(METRICS_PORT), "--processes", "2"),
    env={"SOJOURN_METRICS_HOST": "127.0.0.1"},
    before=lambda: _start_prometheus(Path("/tmp") / f"sojourn-it-prometheus-{PROMETHEUS_PORT}"),
)


@pytest.fixture(scope="module", autouse=True)
def _stop_prometheus():
    yield
    proc = _PROMETHEUS.get("proc")
    if isinstance(proc, subprocess.Popen):
        proc.terminate()
        proc.wait(30)
        _PROMETHEUS["log"].close()  # type: ignore[union-attr]
        shutil.rmtree(_PROMETHEUS["dir"], ignore_errors=True)  # type: ignore[arg-type]


def _query(promql: str, at_s: float) -> list[dict]:
    url = f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/query?" + urllib.parse.urlencode(
        {"query": promql, "time": f"{at_s:.3f}"}
    )
    answer = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def test_prometheus_scrapes_every_process_and_reads_the_summarys_ack_rate(batch, analyze_in_process):
    ran = batch["live-metrics"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = analyze_in_process(ran.run_dir)
    assert summary["messages"]["unaccounted"] == 0
    run = json.loads((ran.run_dir / "run.json").read_text())
    t0_s = int(run["t0_ns"]) / 1e9
    end_s = t0_s + DURATION_S - 1  # the last full second of publishing
    # every process was scraped: the master and both workers
    up = _query("up", end_s)
    assert sorted(int(r["metric"]["instance"].rsplit(":", 1)[1]) for r in up if r["value"][1] == "1") == [
        METRICS_PORT,
        METRICS_PORT + 1,
        METRICS_PORT + 2,
    ], up
    # the ack rate over the steady part of the run, summed over the processes: within 5 %, and one
    # flush: the counters move when the trace writer's rows arrive, once every FLUSH_EVERY_S and a few
    # ms (a flush waits a second after the last one ended), so the window's samples, scraped on the
    # second, can span one flush fewer than their seconds (7 in 8 s: 12.5 % under)
    window_s = DURATION_S - WARMUP_S - 3
    expected = summary["throughput"]["ack_per_s"]
    tolerance = (0.05 + FLUSH_EVERY_S / (window_s - SCRAPE_S)) * expected
    (rate,) = _query(f"sum(rate(sojourn_acked_total[{window_s}s]))", end_s)
    live = float(rate["value"][1])
    print(f"\n[live metrics] ack rate: Prometheus {live:.2f}/s, summary.json {expected:.2f}/s")
    assert abs(live - expected) <= tolerance, (live, expected)
    # the buffer-sojourn histogram counts the same deliveries, and the phase was "base" then
    (count,) = _query(f"sum(rate(sojourn_buffer_sojourn_seconds_count[{window_s}s]))", end_s)
    assert abs(float(count["value"][1]) - expected) <= tolerance
    phases = _query("sojourn_phase == 1", end_s)
    assert {r["metric"]["phase"] for r in phases} == {"base"}
