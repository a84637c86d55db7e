"""The capacity check before a run (loadgen.scenario.capacity), against the queueing arithmetic of
docs/queueing.md worked out here: per consumer min(prefetch / R, 1 / p) with R = p + the network's
round trip, the groups sharing the offered rate, and a saturated consumer's buffer wait
(prefetch - R/p) x p. Three scenarios: underloaded, on the knife-edge (prefetch = R/p) and
overloaded (the issue's example: 500 msg/s into 3 consumers at prefetch 50 and 20 ms)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadgen.cli import main
from loadgen.scenario import load_scenario
from loadgen.scenario.capacity import LOOPBACK_ROUND_TRIP_MS, capacity_rows, capacity_warnings
from loadgen.scenario.topology import FrozenMapping


def _scenario(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nqueue: {name: sojourn.unit.capacity}\nrun: {duration_s: 60}\n" + text)
    return load_scenario(path, env={})


def test_underloaded_two_consumers_take_what_is_offered_with_no_standing_backlog(tmp_path):
    s = _scenario(
        tmp_path,
        "producers: [{name: p, rate: 100}]\nconsumers: [{name: c, count: 2, prefetch: 10, processing_ms: 5}]\n",
    )
    (row,) = capacity_rows(s)
    r = 5 + LOOPBACK_ROUND_TRIP_MS
    per_consumer = min(10 / r, 1 / 5) * 1000  # 200/s: the processing bounds it
    assert row.capacity_per_s == pytest.approx(2 * per_consumer)
    assert row.offered_per_s == 100
    assert row.utilisation == pytest.approx(100 / (2 * per_consumer))  # 25 %
    assert row.buffer_wait_ms == 0 and row.backlog_growth_per_s == 0
    assert capacity_warnings([row]) == []


def test_on_the_knife_edge_prefetch_equal_to_r_over_p_keeps_the_consumer_busy_with_an_empty_buffer(tmp_path):
    # 49.9 ms each way and the loopback's 0.2 ms: a network round trip of 100 ms; p = 4 ms: R = 104, R/p = 26
    s = _scenario(
        tmp_path,
        "producers: [{name: p, rate: 250}]\nconsumers: [{name: c, prefetch: 26, processing_ms: 4}]\n"
        "network:\n  upstream: {latency_ms: 49.9}\n  downstream: {latency_ms: 49.9}\n",
    )
    (row,) = capacity_rows(s)
    r = 4 + 49.9 + 49.9 + LOOPBACK_ROUND_TRIP_MS
    assert r == pytest.approx(104) and row.round_trip_ms == pytest.approx(r)
    assert row.capacity_per_s == pytest.approx(min(26 / r, 1 / 4) * 1000) == pytest.approx(250)
    assert row.utilisation == pytest.approx(1.0)
    assert row.buffer_wait_ms == pytest.approx((26 - r / 4) * 4, abs=1e-9) == pytest.approx(0, abs=1e-9)
    assert row.backlog_growth_per_s == pytest.approx(0, abs=1e-9)
    assert capacity_warnings([row]) == []


def test_overloaded_the_backlog_grows_and_the_phase_and_group_are_named(tmp_path):
    s = _scenario(
        tmp_path,
        "producers: [{name: p, rate: 500}]\nconsumers: [{name: c, count: 3, prefetch: 50, processing_ms: 20}]\n"
        "timeline:\n  - {name: calm, start_s: 30, end_s: 60, set: {producers.p.rate: 100}}\n",
    )
    base, calm = capacity_rows(s)
    r = 20 + LOOPBACK_ROUND_TRIP_MS
    capacity = 3 * min(50 / r, 1 / 20) * 1000  # 150/s
    assert (base.phase, base.start_s, base.end_s) == ("base", 0, 30)
    assert base.capacity_per_s == pytest.approx(capacity)
    assert base.utilisation == pytest.approx(500 / capacity)
    assert base.buffer_wait_ms == pytest.approx((50 - r / 20) * 20)  # 979.8 ms
    assert base.backlog_growth_per_s == pytest.approx(500 - capacity)  # 350/s
    assert (calm.phase, calm.utilisation, calm.buffer_wait_ms) == ("calm", pytest.approx(100 / capacity), 0)
    (warning,) = capacity_warnings([base, calm])
    assert warning.startswith("phase base (0-30 s): the producers offer 500 msg/s")
    assert "consumer group(s) c (150/s)" in warning and "grows by 350 msg/s, 10,500 messages" in warning


def test_two_groups_share_the_queue_and_a_rate_profile_counts_at_its_peak(tmp_path):
    s = _scenario(
        tmp_path,
        "producers: [{name: p, count: 2, rate: [[0, 50], [60, 150]]}]\n"
        "consumers:\n  - {name: a, prefetch: 1, processing_ms: 10}\n  - {name: b, prefetch: 100, processing_ms: 10}\n",
    )
    a, b = capacity_rows(s)
    r = 10 + LOOPBACK_ROUND_TRIP_MS
    cap_a, cap_b = min(1 / r, 1 / 10) * 1000, min(100 / r, 1 / 10) * 1000
    assert (a.capacity_per_s, b.capacity_per_s) == (pytest.approx(cap_a), pytest.approx(cap_b))
    assert a.queue_capacity_per_s == b.queue_capacity_per_s == pytest.approx(cap_a + cap_b)
    assert a.offered_per_s == 2 * 150  # the profile's peak in the window, for both producers
    assert a.utilisation == pytest.approx(300 / (cap_a + cap_b))


def test_validate_prints_the_table_and_warns_with_exit_status_0(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nqueue: {name: sojourn.unit.capacity}\nrun: {duration_s: 10}\n"
        "producers: [{name: p, rate: 500}]\nconsumers: [{name: c, count: 3, prefetch: 50, processing_ms: 20}]\n"
    )
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr()
    assert "capacity check" in out.out and "333 %" in out.out and "980 ms" in out.out
    assert "warning: phase base (0-10 s): the producers offer 500 msg/s" in out.err


def test_a_group_that_requeues_a_share_finishes_only_the_rest(tmp_path):
    # 40 % of deliveries requeued: each message costs 1 / 0.6 deliveries on average, so 2 consumers
    # at 200 deliveries/s each finish 240 messages/s; 300 offered is too many.
    s = _scenario(
        tmp_path,
        "producers: [{name: p, rate: 300}]\n"
        "consumers: [{name: c, count: 2, prefetch: 10, processing_ms: 5, outcomes: {requeue: 0.4, discard: 0.1}}]\n",
    )
    (row,) = capacity_rows(s)
    per_consumer = min(10 / (5 + LOOPBACK_ROUND_TRIP_MS), 1 / 5) * 1000
    assert row.capacity_per_s == pytest.approx(2 * per_consumer * 0.6)
    assert row.backlog_growth_per_s == pytest.approx(300 - 2 * per_consumer * 0.6)
    (warning,) = capacity_warnings([row])
    assert "backlog grows by 60 msg/s" in warning


def test_a_single_active_consumer_queue_has_one_consumers_capacity(tmp_path):
    # Three consumers subscribe, but the broker delivers to one at a time: 200/s, not 600/s.
    s = _scenario(
        tmp_path,
        "producers: [{name: p, rate: 300}]\nconsumers: [{name: c, count: 3, prefetch: 10, processing_ms: 5}]\n",
    )
    s = replace(s, queue=replace(s.queue, arguments=FrozenMapping({"x-single-active-consumer": True})))
    (row,) = capacity_rows(s)
    per_consumer = min(10 / (5 + LOOPBACK_ROUND_TRIP_MS), 1 / 5) * 1000
    assert row.capacity_per_s == pytest.approx(per_consumer)
    assert row.backlog_growth_per_s == pytest.approx(300 - per_consumer)
