"""The summary's network block: impairment periods from network_* events, the proxy's self-measurement."""

from __future__ import annotations

import json

import pytest

from analysis.summary import network_summary
from analysis.transforms import impairment_periods, proxy_measurements

T0 = 1_000_000_000_000
S = 1_000_000_000


def link(latency_ms, jitter_ms=0.0, bandwidth=None):
    return {"latency_ms": latency_ms, "jitter_ms": jitter_ms, "bandwidth_bytes_per_s": bandwidth}


def step(at_s, phase, up, down_link, down=False, reset_peer=False):
    return {
        "at_s": at_s,
        "phase": phase,
        "upstream": up,
        "downstream": down_link,
        "down": down,
        "reset_peer": reset_peer,
    }


def event(kind, at_ns, detail, worker="netem-a", name=""):
    return {
        "kind": kind,
        "ts_ns": at_ns,
        "worker": worker,
        "source": "netem",
        "name": name,
        "detail": json.dumps(detail),
    }


def change_events(worker, offset_ns):
    """What one proxy records for: 50 ms each way; 100 ms from 20 s; down 40-45 s; reset at 50 s."""
    base = step(0.0, "base", link(50), link(50))
    slow = step(20.0, "slow", link(100), link(100, 5))
    cut = step(40.0, "cut", link(50), link(50), down=True)
    back = step(45.0, "base", link(50), link(50))
    rst = step(50.0, "rst", link(50), link(50), reset_peer=True)
    at = lambda s: T0 + int(s * S) + offset_ns  # noqa: E731
    return [
        event("network_change", at(0.2), base, worker),
        event("network_change", at(20), slow, worker),
        event("network_change", at(40), cut, worker),
        event("network_down", at(40), cut, worker),
        event("network_change", at(45), back, worker),
        event("network_up", at(45), back, worker),
        event("network_change", at(50), rst, worker),
        event("network_reset", at(50), rst, worker),
    ]


def stats(scope, direction, count, p50, p99, worst, worker="netem-a", at_s=None, delay_p50=None):
    detail = {
        "scope": scope,
        "direction": direction,
        "count": count,
        "bytes": count * 100,
        "dropped": 0,
        "error_p50_ms": p50,
        "error_p99_ms": p99,
        "error_max_ms": worst,
        "delay_p50_ms": delay_p50,
        "delay_p99_ms": delay_p50,
        "delay_mean_ms": delay_p50,
    }
    if at_s is not None:
        detail["at_s"] = at_s
    return event("proxy_stats", T0 + 60 * S, detail, worker, name=direction)


def test_each_timeline_step_is_one_period_even_when_two_proxies_recorded_it(frame):
    events = frame("event", *change_events("netem-a", 0), *change_events("netem-b", 3_000_000))
    rows = events.transform(impairment_periods(63.5)).collect()
    assert [(r.start_s, r.end_s, r.phase, r.down, r.reset) for r in rows] == [
        (0.0, 20.0, "base", False, False),
        (20.0, 40.0, "slow", False, False),
        (40.0, 45.0, "cut", True, False),
        (45.0, 50.0, "base", False, False),
        (50.0, 63.5, "rst", False, True),
    ]  # the last period ends with the run


def test_a_period_carries_the_settings_of_each_direction(frame):
    rows = frame("event", *change_events("netem-a", 0)).transform(impairment_periods(60)).collect()
    slow = rows[1]
    assert (slow.upstream.latency_ms, slow.upstream.jitter_ms) == (100.0, 0.0)
    assert (slow.downstream.latency_ms, slow.downstream.jitter_ms) == (100.0, 5.0)
    assert slow.upstream.bandwidth_bytes_per_s is None and slow.upstream.measured is None


def test_a_period_shows_what_the_proxy_measured_in_it(frame):
    events = frame(
        "event",
        *change_events("netem-a", 0),
        stats("period", "downstream", 400, 0.1, 0.8, 2.0, at_s=20.0, delay_p50=100.1),
    )
    slow = events.transform(impairment_periods(60)).collect()[1]
    assert slow.downstream.measured["count"] == 400
    assert slow.downstream.measured.delay_p50_ms == pytest.approx(100.1)
    assert slow.upstream.measured is None


def test_two_proxies_measurements_add_counts_weight_p50s_and_keep_the_worst_p99(frame):
    events = frame(
        "event",
        stats("run", "upstream", 300, 0.1, 0.5, 3.0, worker="netem-a"),
        stats("run", "upstream", 100, 0.5, 0.9, 1.0, worker="netem-b"),
        stats("run", "downstream", 50, 0.2, 0.4, 0.6, worker="netem-a"),
        stats("period", "upstream", 999, 9.0, 9.0, 9.0, worker="netem-a", at_s=0.0),
    )
    rows = {r.direction: r for r in events.transform(proxy_measurements("run")).collect()}
    up = rows["upstream"]
    assert (up["proxies"], up["count"], up["bytes"]) == (2, 400, 40_000)
    assert up.error_p50_ms == pytest.approx((300 * 0.1 + 100 * 0.5) / 400)  # 0.2
    assert (up.error_p99_ms, up.error_max_ms) == (0.9, 3.0)
    assert rows["downstream"]["count"] == 50


def test_the_network_block_is_null_for_a_run_without_the_proxy(frame):
    events = frame("event", {"kind": "phase_start", "ts_ns": T0, "name": "slow"})
    assert network_summary(events, T0, 60) is None


def test_the_network_block_lists_periods_and_the_proxys_run_totals(frame):
    events = frame(
        "event",
        *change_events("netem-a", 0),
        stats("run", "upstream", 10, 0.1, 0.2, 0.3),
        stats("run", "downstream", 20, 0.1, 0.2, 0.3),
    )
    block = network_summary(events, T0, 60, ended_ns=T0 + 64 * S)
    assert [p["phase"] for p in block["periods"]] == ["base", "slow", "cut", "base", "rst"]
    assert block["periods"][-1]["end_s"] == 64.0
    assert block["periods"][2]["downstream"]["latency_ms"] == 50.0
    assert block["proxy"]["upstream"]["count"] == 10 and block["proxy"]["downstream"]["count"] == 20
    assert "direction" not in block["proxy"]["upstream"]
