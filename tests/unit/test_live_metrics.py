"""The live metrics (loadgen.metrics): trace rows folded into Prometheus counters and histograms,
the run's own state as gauges, and the endpoint that serves them. The expected values are counted
here from the rows the test builds, by outcome, not by the code under test."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.broker.local import free_loopback_port
from loadgen.metrics import endpoint
from loadgen.metrics.live import LiveMetrics
from loadgen.trace.rows import own_columns, publish_row


def _publish(group: str, outcome: str) -> tuple:
    row = publish_row("id", f"{group}/w/0", group, 0, "base", 0, 0, 100, "q", False, None, None, None, None)
    row[own_columns("publish").index("outcome")] = outcome
    return tuple(row)


def _delivery(group: str, outcome: str, publish_ns: int, receive_ns: int, start_ns, settle_ns) -> tuple:
    values = dict.fromkeys(own_columns("delivery"))
    values |= {
        "consumer": f"{group}/w/0",
        "consumer_group": group,
        "outcome": outcome,
        "publish_ns": publish_ns,
        "receive_ns": receive_ns,
        "start_ns": start_ns,
        "settle_ns": settle_ns,
    }
    return tuple(values[c] for c in own_columns("delivery"))


def _samples(metrics: LiveMetrics) -> dict[tuple[str, tuple], float]:
    from prometheus_client import generate_latest

    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_publish_rows_count_by_group_outcome_and_discard_reason():
    m = LiveMetrics("run-1", "host-1")
    outcomes = ["confirmed"] * 7 + ["nacked"] * 2 + ["returned", "failed", "failed", "failed", "unconfirmed"]
    m.observe("publish", [_publish("p", o) for o in outcomes] + [_publish("q", "sent")] * 4)
    s = _samples(m)
    # reached the socket: all but the three that failed
    assert s[("sojourn_published_total", (("group", "p"),))] == 7 + 2 + 1 + 1
    assert s[("sojourn_published_total", (("group", "q"),))] == 4
    assert s[("sojourn_confirmed_total", (("group", "p"),))] == 7
    assert ("sojourn_confirmed_total", (("group", "q"),)) not in s  # confirms off: none
    assert s[("sojourn_discarded_total", (("group", "p"), ("reason", "publish_nacked")))] == 2
    assert s[("sojourn_discarded_total", (("group", "p"), ("reason", "unroutable")))] == 1
    assert s[("sojourn_discarded_total", (("group", "p"), ("reason", "publish_failed")))] == 3


def test_delivery_rows_count_and_time_buffer_sojourn_and_end_to_end():
    m = LiveMetrics("run-1", "host-1")
    ms = 1_000_000
    rows = [
        # acked: waited 3 ms in the buffer, 10 ms publish to ack
        *[_delivery("c", "ack", 0, 2 * ms, 5 * ms, 10 * ms)] * 5,
        # acked after 40 ms in the buffer, 250 ms end to end
        _delivery("c", "ack", 0, 10 * ms, 50 * ms, 250 * ms),
        # CoDel's discard: waited 200 ms, never acked
        _delivery("c", "nack_discard", 0, 0, 200 * ms, 200 * ms),
        # egress discard: never processed, no buffer sojourn
        _delivery("c", "egress_discard", 0, 0, None, 1 * ms),
        # the channel closed before it was settled
        _delivery("c", "unsettled", 0, 0, None, None),
    ]
    m.observe("delivery", rows)
    s = _samples(m)
    c = (("group", "c"),)
    assert s[("sojourn_delivered_total", c)] == 9
    assert s[("sojourn_acked_total", c)] == 6
    assert s[("sojourn_discarded_total", (("group", "c"), ("reason", "consumer_nack_discard")))] == 1
    assert s[("sojourn_discarded_total", (("group", "c"), ("reason", "egress_discard")))] == 1
    # buffer sojourn: the seven processed (5 x 3 ms, 40 ms, 200 ms), of the one consumer
    cc = (("consumer", "c/w/0"), ("group", "c"))
    assert s[("sojourn_buffer_sojourn_seconds_count", cc)] == 7
    assert s[("sojourn_buffer_sojourn_seconds_sum", cc)] == pytest.approx(5 * 0.003 + 0.040 + 0.200)
    assert s[("sojourn_buffer_sojourn_seconds_bucket", (*cc, ("le", "0.005")))] == 5
    assert s[("sojourn_buffer_sojourn_seconds_bucket", (*cc, ("le", "0.05")))] == 6
    # end to end: the six acked
    assert s[("sojourn_end_to_end_seconds_count", cc)] == 6
    assert s[("sojourn_end_to_end_seconds_sum", cc)] == pytest.approx(5 * 0.010 + 0.250)


def test_the_live_state_sets_phase_and_consumer_gauges_and_drops_a_consumer_that_left():
    m = LiveMetrics("run-1", "host-1")
    m.set_live({"phase": "base", "elapsed_s": 3.5, "consumers": [["c/w/0", "c", 4, 5], ["c/w/1", "c", 0, 1]]})
    m.set_live({"phase": "slowdown", "elapsed_s": 4.5, "consumers": [["c/w/0", "c", 7, 8]]})
    s = _samples(m)
    assert s[("sojourn_phase", (("phase", "slowdown"),))] == 1
    assert ("sojourn_phase", (("phase", "base"),)) not in s  # one phase at a time
    assert s[("sojourn_elapsed_seconds", ())] == 4.5
    assert s[("sojourn_consumer_buffer_depth", (("consumer", "c/w/0"), ("group", "c")))] == 7
    assert s[("sojourn_consumer_in_flight", (("consumer", "c/w/0"), ("group", "c")))] == 8
    assert ("sojourn_consumer_buffer_depth", (("consumer", "c/w/1"), ("group", "c"))) not in s


def test_dead_letters_count_by_reason():
    m = LiveMetrics("run-1", "host-1")
    reason = own_columns("deadletter").index("reason")
    row = [None] * len(own_columns("deadletter"))
    rows = []
    for r in ["maxlen", "maxlen", "expired"]:
        row[reason] = r
        rows.append(tuple(row))
    m.observe("deadletter", rows)
    s = _samples(m)
    assert s[("sojourn_dead_lettered_total", (("reason", "maxlen"),))] == 2
    assert s[("sojourn_dead_lettered_total", (("reason", "expired"),))] == 1


def test_each_process_of_a_run_has_its_own_port():
    assert endpoint.port_for(9100, "local", None) == 9100
    assert endpoint.port_for(9100, "master", None) == 9100
    assert [endpoint.port_for(9100, "worker", i) for i in range(3)] == [9101, 9102, 9103]


def test_the_endpoint_serves_the_registry_on_the_socket_it_is_given():
    m = LiveMetrics("run-7", "host-1")
    m.observe("publish", [_publish("p", "confirmed")] * 3)
    port = free_loopback_port()
    sock = endpoint.listen(port, "127.0.0.1")
    server = endpoint.serve(sock.fileno(), m.registry)
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
        sock.close()
    assert 'sojourn_published_total{group="p"} 3.0' in body
    assert 'sojourn_run_info{run_id="run-7",worker="host-1"} 1.0' in body


def test_a_port_in_use_or_out_of_range_is_an_error_naming_it():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(endpoint.MetricsPortError, match=f"--metrics-port {port}: can not listen"):
            endpoint.listen(port, "127.0.0.1")
    with pytest.raises(endpoint.MetricsPortError, match="70000 is not a port"):
        endpoint.listen(70000)


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_taken_metrics_port_stops_the_command_before_the_run(command, tmp_path, capsys):
    from loadgen.cli import main

    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: s\nqueue: {name: sojourn.unit.metrics-port}\nrun: {duration_s: 1}\n"
        "producers: [{name: p, rate: 1}]\nconsumers: [{name: c, prefetch: 1}]\n"
    )
    extra = ["--vary", "consumers.c.prefetch=1,2"] if command == "sweep" else ["--no-analyze"]
    with socket.create_server(("0.0.0.0", 0)) as taken:  # the default host: every interface
        port = taken.getsockname()[1]
        code = main([command, str(scenario), "--out", str(tmp_path / "out"), "--metrics-port", str(port), *extra])
    assert code == 2
    assert f"error: --metrics-port {port}: can not listen" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing ran
