"""The start barrier: the count that decides when t0 is fixed (pure), and the network proxy that
holds its timeline's first state until it is told t0 (a real proxy process; no broker needed)."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq

from loadgen.netem.link import LinkSettings, NetworkState
from loadgen.netem.process import NetemProcess
from loadgen.netem.timeline import Step
from loadgen.rules.barrier import START_TIMEOUT_S, StartBarrier


def test_the_barrier_is_complete_once_every_process_has_reported_all_its_participants():
    barrier = StartBarrier(expected=5, opened_s=100.0)
    barrier.report("worker-a", 1)
    barrier.report("worker-b", 2)
    assert barrier.ready == 3 and not barrier.complete()
    barrier.report("worker-a", 3)
    assert barrier.ready == 5 and barrier.complete()


def test_a_count_that_arrives_late_does_not_lower_what_a_process_reported():
    barrier = StartBarrier(expected=4, opened_s=0.0)
    barrier.report("worker-a", 4)
    barrier.report("worker-a", 2)  # an earlier message, delivered after the later one
    assert barrier.complete()


def test_the_detail_says_how_long_start_up_took_and_who_was_ready():
    barrier = StartBarrier(expected=3, opened_s=10.0)
    barrier.report("local", 3)
    assert barrier.detail(t0_s=14.25) == {"startup_s": 4.25, "participants": 3, "ready": 3, "timed_out": False}


def test_after_the_timeout_the_run_starts_with_those_ready_and_says_it_timed_out():
    barrier = StartBarrier(expected=3, opened_s=10.0)
    barrier.report("local", 2)
    assert not barrier.timed_out(10.0 + START_TIMEOUT_S - 0.1)
    assert barrier.timed_out(10.0 + START_TIMEOUT_S)
    detail = barrier.detail(t0_s=10.0 + START_TIMEOUT_S)
    assert detail["ready"] == 2 and detail["timed_out"] is True
    assert "2 of 3 participants ready" in barrier.progress(15.0)


def _entered_phases(run_dir: Path) -> list[str]:
    rows = [
        r for part in sorted((run_dir / "traces" / "event").glob("*.parquet")) for r in pq.read_table(part).to_pylist()
    ]
    return [r["name"] for r in sorted(rows, key=lambda r: r["ts_ns"]) if r["kind"] == "network_change"]


def test_the_proxy_holds_the_first_state_until_it_is_told_t0_then_follows_the_timeline(tmp_path: Path):
    slow = NetworkState(LinkSettings(30), LinkSettings(30))
    timeline = (Step(0.0, "base", NetworkState()), Step(0.3, "slow", slow))
    proxy = NetemProcess.start(
        "amqp://guest:guest@127.0.0.1:1/", timeline, t0_ns=None, run_dir=str(tmp_path / "held"), run_id="r"
    )
    time.sleep(1.0)  # far past the step at 0.3 s, had the proxy counted from its own start
    proxy.stop()
    assert _entered_phases(tmp_path / "held") == ["base"]

    proxy = NetemProcess.start(
        "amqp://guest:guest@127.0.0.1:1/", timeline, t0_ns=None, run_dir=str(tmp_path / "told"), run_id="r"
    )
    time.sleep(0.5)
    proxy.set_t0(time.time_ns())
    time.sleep(1.0)
    proxy.stop()
    assert _entered_phases(tmp_path / "told") == ["base", "slow"]
