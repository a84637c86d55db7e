"""The proxy's pure parts with an injected clock: delay line, token bucket, timeline, histogram, URLs.

Every expected value is worked out by hand in the test (times in ms; the code uses ns).
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from loadgen.amqp.connection import parameters
from loadgen.netem import (
    DelayLine,
    LinkSettings,
    NetworkState,
    Step,
    TokenBucket,
    proxied_url,
    resolve_timeline,
    step_index_at,
    transitions,
    upstream_address,
)
from loadgen.netem.measure import DirectionMeter, Histogram
from loadgen.netem.timeline import timeline_from_json, timeline_to_json
from loadgen.scenario import load_scenario

MS = 1_000_000


class FixedDraws:
    """An rng whose uniform(a, b) returns the next of the given values (checked to lie in [a, b])."""

    def __init__(self, *values: float):
        self.values = list(values)

    def uniform(self, a: float, b: float) -> float:
        value = self.values.pop(0)
        assert a <= value <= b
        return value


# --- delay line ------------------------------------------------------------------------


def test_each_chunk_is_released_its_latency_after_it_was_read():
    line = DelayLine(LinkSettings(latency_ms=50))
    assert [line.push(name, 100, t * MS) for name, t in (("a", 0), ("b", 1), ("c", 2))] == [50 * MS, 51 * MS, 52 * MS]


def test_due_returns_only_what_is_due_in_arrival_order_and_without_sleeping_in_series():
    line = DelayLine(LinkSettings(latency_ms=50))
    for name, t in (("a", 0), ("b", 1), ("c", 2)):
        line.push(name, 100, t * MS)
    assert line.due(49 * MS) == []
    assert [item for _, _, item in line.due(50 * MS + MS // 2)] == ["a"]
    # b and c were queued together: both are due 52 ms after a's read, not 50 + 50 + 50
    assert line.due(52 * MS) == [(51 * MS, 1 * MS, "b"), (52 * MS, 2 * MS, "c")]
    assert len(line) == 0 and line.queued_bytes == 0 and line.next_release_ns() is None


def test_jitter_adds_between_zero_and_jitter_ms_and_never_reorders():
    # latency 10 ms, jitter 10 ms: a (read at 0) draws +9 -> 19 ms; b (read at 1) draws +0 -> 11 ms,
    # which would overtake a, so b waits for a: 19 ms.
    line = DelayLine(LinkSettings(latency_ms=10, jitter_ms=10), rng=FixedDraws(9.0, 0.0, 5.0))
    assert line.push("a", 10, 0) == 19 * MS
    assert line.push("b", 10, 1 * MS) == 19 * MS
    assert line.push("c", 10, 20 * MS) == 35 * MS  # 20 + 10 + 5: nothing ahead of it any more


def test_a_shorter_latency_applies_to_new_chunks_but_keeps_the_order():
    line = DelayLine(LinkSettings(latency_ms=100))
    assert line.push("a", 1, 0) == 100 * MS
    line.configure(LinkSettings(latency_ms=50), 10 * MS)
    assert line.push("b", 1, 20 * MS) == 100 * MS  # 20 + 50 = 70 would overtake a
    assert line.push("c", 1, 60 * MS) == 110 * MS  # 60 + 50


def test_a_bandwidth_cap_serialises_chunks_before_the_latency():
    # 1,000 B/s: 100 B take 100 ms on the wire, then 10 ms of latency.
    line = DelayLine(LinkSettings(latency_ms=10, bandwidth_bytes_per_s=1000))
    assert line.push("a", 100, 0) == 110 * MS
    assert line.push("b", 100, 0) == 210 * MS  # behind a on the wire: 200 + 10
    assert line.push("c", 100, 500 * MS) == 610 * MS  # the link was idle: 500 + 100 + 10


def test_clearing_a_cut_connection_drops_everything_in_flight():
    line = DelayLine(LinkSettings(latency_ms=50))
    line.push("a", 100, 0)
    line.push("b", 100, 0)
    assert line.clear() == 2 and line.due(10**12) == [] and line.queued_bytes == 0


def test_a_link_with_no_delay_is_transparent():
    assert LinkSettings().transparent
    assert not LinkSettings(jitter_ms=1).transparent
    assert not LinkSettings(bandwidth_bytes_per_s=1e6).transparent


@pytest.mark.parametrize(
    "kwargs", [{"latency_ms": -1}, {"jitter_ms": -0.5}, {"bandwidth_bytes_per_s": 0}, {"latency_ms": True}]
)
def test_settings_refuse_negative_or_non_numeric_values(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LinkSettings(**kwargs)


# --- token bucket ------------------------------------------------------------------------


def test_a_token_bucket_lets_a_burst_through_then_charges_the_rate():
    bucket = TokenBucket(1000, burst_bytes=300)
    assert bucket.take(100, 0) == 0  # 300 -> 200 tokens
    assert bucket.take(300, 0) == 100 * MS  # 200 - 300 = -100: 100 B owed at 1,000 B/s
    assert bucket.take(100, 1000 * MS) == 1000 * MS  # refilled to the 300 cap meanwhile


def test_a_new_rate_charges_what_comes_next_at_that_rate():
    bucket = TokenBucket(1000)
    assert bucket.take(100, 0) == 100 * MS
    bucket.set_rate(2000, 0)
    assert bucket.take(100, 0) == 100 * MS  # 200 B owed at 2,000 B/s
    bucket.set_rate(None, 0)
    assert bucket.take(10**9, 5 * MS) == 5 * MS  # no cap: no wait at all


# --- timeline ----------------------------------------------------------------------------

SCENARIO = """\
name: t
queue: {name: q}
run: {duration_s: 60}
producers: [{name: main, rate: 10}]
consumers: [{name: main}]
network:
  upstream: {latency_ms: 50}
  downstream: {latency_ms: 50, jitter_ms: 2}
timeline:
  - {name: slow, start_s: 10, end_s: 20, set: {network.upstream.latency_ms: 100, network.downstream.latency_ms: 100}}
  - {name: busy, start_s: 20, end_s: 30, set: {producers.main.rate: 20}}
  - {name: cut, start_s: 30, end_s: 35, set: {network.down: true}}
  - {name: rst, start_s: 40, end_s: 45, set: {network.reset_peer: true}}
"""


@pytest.fixture()
def scenario(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    return load_scenario(str(path), [])


def test_the_timeline_has_a_step_wherever_the_network_changes_and_nowhere_else(scenario):
    steps = resolve_timeline(scenario)
    assert [(s.at_s, s.phase) for s in steps] == [
        (0.0, "base"),
        (10.0, "slow"),
        (20.0, "busy"),
        (30.0, "cut"),
        (35.0, "base"),
        (40.0, "rst"),
        (45.0, "base"),
    ]
    base = NetworkState(LinkSettings(50), LinkSettings(50, 2))
    assert steps[0].state == base
    assert steps[1].state == NetworkState(LinkSettings(100), LinkSettings(100, 2))
    assert steps[2].state == base  # 'busy' changes no network setting, but it ends 'slow'
    assert steps[3].state.down and not steps[4].state.down
    assert steps[5].state.reset_peer


def test_a_scenario_without_a_network_section_has_no_timeline(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.split("network:")[0])
    assert resolve_timeline(load_scenario(str(path), [])) is None


def test_each_step_records_a_change_and_the_outage_and_reset_edges(scenario):
    steps = resolve_timeline(scenario)
    kinds = [transitions(a.state if a else None, b) for a, b in zip((None, *steps), steps)]
    assert kinds == [
        ["network_change"],
        ["network_change"],
        ["network_change"],
        ["network_change", "network_down"],
        ["network_change", "network_up"],
        ["network_change", "network_reset"],
        ["network_change"],
    ]


def test_a_reset_acts_when_reset_peer_turns_on_not_while_it_stays_on():
    on = NetworkState(reset_peer=True)
    assert "network_reset" not in transitions(on, Step(5.0, "rst2", on))
    assert "network_reset" not in transitions(None, Step(0.0, "base", on))  # no connection yet


def test_the_step_in_force_is_the_last_one_started(scenario):
    steps = resolve_timeline(scenario)
    assert [step_index_at(steps, t) for t in (0, 9.99, 10, 34.9, 59)] == [0, 0, 1, 3, 6]


def test_the_timeline_survives_its_trip_to_the_proxy_process_as_json(scenario):
    steps = resolve_timeline(scenario)
    assert timeline_from_json(timeline_to_json(steps)) == steps


# --- self-measurement ----------------------------------------------------------------------


def test_histogram_percentiles_are_exact_to_the_microsecond_below_a_millisecond():
    h = Histogram()
    for us in range(1, 101):
        h.add(us * 1000)
    # rank (n-1)q/100: p50 -> index 49 -> 50 µs, in bin [50, 51) µs whose midpoint is 50.5 µs
    assert h.percentile_ms(50) == pytest.approx(0.0505)
    assert h.percentile_ms(99) == pytest.approx(0.0995)
    assert h.max_ns == 100_000 and h.mean_ms() == pytest.approx(0.0505)


def test_histogram_bins_above_a_millisecond_are_a_thousandth_of_their_octave():
    h = Histogram()
    h.add(50 * MS)  # 50,000 µs lies in [32,768, 65,536): bins of 32 µs, [49,984, 50,016)
    assert h.percentile_ms(50) == pytest.approx(50.0)


def test_a_meter_hands_over_one_period_and_starts_afresh():
    meter = DirectionMeter()
    meter.record(stamp_ns=0, release_ns=50 * MS, sent_ns=50 * MS + 200_000, size=100)
    period = meter.take()
    assert meter.count == 0 and period.count == 1
    summary = period.summary()
    assert summary["error_max_ms"] == 0.2 and summary["delay_mean_ms"] == 50.2 and summary["bytes"] == 100


# --- routing through the proxy ----------------------------------------------------------------


def test_a_proxied_url_keeps_user_password_vhost_and_query():
    assert (
        proxied_url("amqps://u:p%40w@broker.example:5671/vh?heartbeat=5", 40000)
        == "amqps://u:p%40w@127.0.0.1:40000/vh?heartbeat=5"
    )
    assert proxied_url("amqp://broker/", 1234) == "amqp://127.0.0.1:1234/"


def test_the_upstream_is_the_urls_host_and_port_or_the_schemes_default():
    assert upstream_address("amqp://u:p@10.1.2.3:5673/") == ("10.1.2.3", 5673)
    assert upstream_address("amqps://broker.example/vh") == ("broker.example", 5671)
    assert upstream_address("amqp://broker.example") == ("broker.example", 5672)


def test_tls_through_the_proxy_still_checks_the_brokers_name(monkeypatch):
    monkeypatch.delenv("SOJOURN_TLS_INSECURE", raising=False)
    url = proxied_url("amqps://app:secret@broker.example/vh", 40000)
    p = parameters(url, tls_server_hostname="broker.example")
    assert (p.host, p.port) == ("127.0.0.1", 40000)
    assert p.ssl_options.server_hostname == "broker.example"
    assert p.ssl_options.context.verify_mode == ssl.CERT_REQUIRED
