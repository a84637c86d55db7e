"""The `network` section (delay-line proxy): parsing, validation, phases, `at(t)`, `--set`, round trip."""

from __future__ import annotations

import pytest
import yaml

from loadgen.scenario import LinkSpec, NetworkSpec
from tests.unit.scenario_files import error, load

HEAD = """\
name: t
queue: {name: q}
run: {duration_s: 60}
producers:
  - {name: main, rate: 10}
consumers:
  - {name: main}
"""

FULL = (
    HEAD
    + """\
network:
  listen_port: 25672
  upstream: {latency_ms: 5, jitter_ms: 1.5, bandwidth_bytes_per_s: 100000}
  downstream: {latency_ms: 20, jitter_ms: 0, bandwidth_bytes_per_s: null}
  down: false
  reset_peer: false
"""
)

UNIMPAIRED = LinkSpec(latency_ms=0.0, jitter_ms=0.0, bandwidth_bytes_per_s=None)

PHASES = (
    HEAD
    + """\
network:
  downstream: {latency_ms: 20}
timeline:
  - name: slow
    start_s: 10
    end_s: 20
    set:
      network.downstream.latency_ms: 200
      network.upstream.bandwidth_bytes_per_s: 50000
      network.upstream.jitter_ms: 3
  - name: partition
    start_s: 30
    end_s: 35
    set:
      network.down: true
  - name: reset
    start_s: 40
    end_s: 41
    set:
      network.reset_peer: true
      network.downstream.jitter_ms: 7
      network.downstream.bandwidth_bytes_per_s: 1000
      network.upstream.latency_ms: 1
"""
)


def phase(set_lines: str) -> str:
    return "timeline:\n  - name: a\n    start_s: 10\n    end_s: 20\n    set:\n" + set_lines


# ---- parsing


def test_no_network_section_means_no_proxy(tmp_path):
    assert load(tmp_path, HEAD).network is None


def test_network_null_means_no_proxy(tmp_path):
    assert load(tmp_path, HEAD + "network: null\n").network is None


def test_an_empty_network_section_is_a_proxy_with_no_impairment(tmp_path):
    assert load(tmp_path, HEAD + "network: {}\n").network == NetworkSpec(
        listen_port=0, upstream=UNIMPAIRED, downstream=UNIMPAIRED, down=False, reset_peer=False
    )


def test_every_network_key_is_read(tmp_path):
    assert load(tmp_path, FULL).network == NetworkSpec(
        25672, LinkSpec(5.0, 1.5, 100000.0), LinkSpec(20.0, 0.0, None), False, False
    )


def test_an_omitted_or_null_link_is_unimpaired(tmp_path):
    s = load(tmp_path, HEAD + "network:\n  upstream: null\n  downstream: {jitter_ms: 2}\n  down: true\n")
    assert s.network == NetworkSpec(0, UNIMPAIRED, LinkSpec(0.0, 2.0, None), True, False)


def test_network_values_are_floats_even_when_written_as_integers(tmp_path):
    link = load(
        tmp_path, HEAD + "network:\n  upstream: {latency_ms: 5, bandwidth_bytes_per_s: 1000}\n"
    ).network.upstream
    assert (type(link.latency_ms), type(link.bandwidth_bytes_per_s)) == (float, float)


@pytest.mark.parametrize(
    "network, expected",
    [
        ("{listen_port: -1}", "network.listen_port: expected an integer between 0 and 65535, got -1"),
        ("{listen_port: 65536}", "network.listen_port: expected an integer between 0 and 65535, got 65536"),
        ("{listen_port: 1.5}", "network.listen_port: expected an integer between 0 and 65535, got 1.5"),
        ("{upstream: {latency_ms: -1}}", "network.upstream.latency_ms: expected a number >= 0, got -1"),
        ("{downstream: {latency_ms: true}}", "network.downstream.latency_ms: expected a number >= 0, got true"),
        ("{upstream: {jitter_ms: -0.5}}", "network.upstream.jitter_ms: expected a number >= 0, got -0.5"),
        (
            "{downstream: {bandwidth_bytes_per_s: 0}}",
            "network.downstream.bandwidth_bytes_per_s: expected a number > 0 or null (unlimited), got 0",
        ),
        (
            "{upstream: {bandwidth_bytes_per_s: fast}}",
            "network.upstream.bandwidth_bytes_per_s: expected a number > 0 or null (unlimited), got 'fast'",
        ),
        ("{down: 1}", "network.down: expected true or false, got 1"),
        ("{reset_peer: 'yes'}", "network.reset_peer: expected true or false, got 'yes'"),
        ("{upstream: {latency: 5}}", "network.upstream.latency: unknown key (did you mean 'latency_ms'?)"),
        ("{upsteam: {latency_ms: 5}}", "network.upsteam: unknown key (did you mean 'upstream'?)"),
        ("{zzz: 1}", "network.zzz: unknown key (expected one of: listen_port, upstream, downstream, down, reset_peer)"),
        ("{upstream: 5}", "network.upstream: expected a mapping, got 5"),
        ("true", "network: expected a mapping, got true"),
    ],
)
def test_bad_network_settings_are_rejected_naming_the_key(tmp_path, network, expected):
    assert error(tmp_path, HEAD + f"network: {network}\n") == expected


def test_a_misspelt_network_section_gets_a_close_match(tmp_path):
    assert error(tmp_path, HEAD + "netwrok: {}\n") == "netwrok: unknown key (did you mean 'network'?)"


# ---- phases and at(t)


def test_phases_store_network_settings_under_their_paths(tmp_path):
    s = load(tmp_path, PHASES)
    assert s.timeline[0].set == (
        ("network.downstream.latency_ms", 200.0),
        ("network.upstream.bandwidth_bytes_per_s", 50000.0),
        ("network.upstream.jitter_ms", 3.0),
    )
    assert s.timeline[1].set == (("network.down", True),)


def test_at_gives_the_phase_network_inside_the_phase(tmp_path):
    s = load(tmp_path, PHASES)
    assert s.at(10).network == NetworkSpec(0, LinkSpec(0.0, 3.0, 50000.0), LinkSpec(200.0, 0.0, None), False, False)
    assert s.at(30).network == NetworkSpec(0, UNIMPAIRED, LinkSpec(20.0, 0.0, None), True, False)
    assert s.at(40.5).network == NetworkSpec(0, LinkSpec(1.0, 0.0, None), LinkSpec(20.0, 7.0, 1000.0), False, True)


@pytest.mark.parametrize("t_s", [0, 9.999, 20, 25, 35, 41, 59.9])
def test_at_gives_the_base_network_outside_every_phase(tmp_path, t_s):
    s = load(tmp_path, PHASES)
    assert s.at(t_s).network == NetworkSpec(0, UNIMPAIRED, LinkSpec(20.0, 0.0, None), False, False)


def test_down_is_back_to_the_base_value_after_its_phase(tmp_path):
    s = load(
        tmp_path,
        PHASES.replace("  downstream: {latency_ms: 20}\n", "  downstream: {latency_ms: 20}\n  down: true\n").replace(
            "      network.down: true\n", "      network.down: false\n"
        ),
    )
    assert [s.at(t).network.down for t in (29, 30, 34.9, 35)] == [True, False, False, True]


def test_a_phase_setting_the_network_keeps_the_group_settings(tmp_path):
    s = load(tmp_path, PHASES)
    assert s.at(15).consumer("main") == s.consumer("main") and s.at(15).producer("main") == s.producer("main")


def test_change_times_include_the_network_phase_boundaries(tmp_path):
    assert load(tmp_path, PHASES).change_times() == [10.0, 20.0, 30.0, 35.0, 40.0, 41.0]


def test_a_network_phase_may_set_null_bandwidth_for_unlimited(tmp_path):
    text = FULL + phase("      network.upstream.bandwidth_bytes_per_s: null\n")
    assert load(tmp_path, text).at(15).network.upstream == LinkSpec(5.0, 1.5, None)


@pytest.mark.parametrize(
    "set_line, expected",
    [
        (
            "network.listen_port: 5",
            "timeline[0].set.network.listen_port: can not be changed by a phase (a phase may set network.{"
            "upstream.latency_ms, upstream.jitter_ms, upstream.bandwidth_bytes_per_s, downstream.latency_ms, "
            "downstream.jitter_ms, downstream.bandwidth_bytes_per_s, down, reset_peer})",
        ),
        (
            "network.upstream: {latency_ms: 5}",
            "timeline[0].set.network.upstream: can not be changed by a phase (a phase may set network.{"
            "upstream.latency_ms, upstream.jitter_ms, upstream.bandwidth_bytes_per_s, downstream.latency_ms, "
            "downstream.jitter_ms, downstream.bandwidth_bytes_per_s, down, reset_peer})",
        ),
        (
            "network.upstream.latency: 5",
            "timeline[0].set.network.upstream.latency: unknown key (did you mean 'upstream.latency_ms'?) "
            "(a phase may set network.{upstream.latency_ms, upstream.jitter_ms, upstream.bandwidth_bytes_per_s, "
            "downstream.latency_ms, downstream.jitter_ms, downstream.bandwidth_bytes_per_s, down, reset_peer})",
        ),
        (
            "network.upstream.latency_ms: -5",
            "timeline[0].set.network.upstream.latency_ms: expected a number >= 0, got -5",
        ),
        ("network.down: 'yes'", "timeline[0].set.network.down: expected true or false, got 'yes'"),
        (
            "network.downstream.bandwidth_bytes_per_s: 0",
            "timeline[0].set.network.downstream.bandwidth_bytes_per_s: expected a number > 0 or null (unlimited), "
            "got 0",
        ),
        (
            "network[0].down: true",
            "timeline[0].set.network[0].down: unknown key (a phase may set network.{"
            "upstream.latency_ms, upstream.jitter_ms, upstream.bandwidth_bytes_per_s, downstream.latency_ms, "
            "downstream.jitter_ms, downstream.bandwidth_bytes_per_s, down, reset_peer})",
        ),
        (
            "netwrok.down: true",
            "timeline[0].set.netwrok.down: expected producers.<group>.<field>, consumers.<group>.<field> "
            "or network.<field> (did you mean 'network'?)",
        ),
    ],
)
def test_a_phase_may_only_set_the_documented_network_keys(tmp_path, set_line, expected):
    assert error(tmp_path, FULL + phase(f"      {set_line}\n")) == expected


def test_a_network_phase_without_a_network_section_is_an_error(tmp_path):
    assert error(tmp_path, HEAD + phase("      network.upstream.latency_ms: 100\n")) == (
        "timeline[0].set.network.upstream.latency_ms: the scenario has no network section "
        "(add 'network:' to put the delay-line proxy in the path)"
    )


def test_set_can_put_a_network_phase_into_the_timeline(tmp_path):
    s = load(tmp_path, FULL + phase("      network.down: true\n"), "timeline.a.set.network.upstream.latency_ms=80")
    assert s.at(15).network.upstream == LinkSpec(80.0, 1.5, 100000.0) and s.at(15).network.down is True


# ---- --set


def test_set_changes_one_network_key(tmp_path):
    s = load(tmp_path, FULL, "network.downstream.latency_ms=100")
    assert s.network.downstream == LinkSpec(100.0, 0.0, None)


def test_set_of_a_network_key_creates_the_section_with_defaults(tmp_path):
    s = load(tmp_path, HEAD, "network.downstream.latency_ms=100")
    assert s.network == NetworkSpec(0, UNIMPAIRED, LinkSpec(100.0, 0.0, None), False, False)


def test_set_network_null_removes_the_proxy(tmp_path):
    assert load(tmp_path, FULL, "network=null").network is None


def test_set_whole_network_mapping(tmp_path):
    s = load(tmp_path, HEAD, "network={listen_port: 5673, down: true}")
    assert s.network == NetworkSpec(5673, UNIMPAIRED, UNIMPAIRED, True, False)


@pytest.mark.parametrize(
    "override, expected",
    [
        ("network.upstream.latency_ms=-1", "--set network.upstream.latency_ms=-1: expected a number >= 0, got -1"),
        (
            "network.upstream.latncy_ms=1",
            "--set network.upstream.latncy_ms=1: unknown key 'latncy_ms' (did you mean 'latency_ms'?)",
        ),
        (
            "network.listen_port=65536",
            "--set network.listen_port=65536: expected an integer between 0 and 65535, got 65536",
        ),
    ],
)
def test_bad_network_overrides_name_the_override(tmp_path, override, expected):
    assert error(tmp_path, HEAD, override) == expected


def test_network_null_removing_the_section_breaks_network_phases(tmp_path):
    assert error(tmp_path, FULL + phase("      network.down: true\n"), "network=null") == (
        "timeline[0].set.network.down: the scenario has no network section "
        "(add 'network:' to put the delay-line proxy in the path)"
    )


# ---- to_dict and the round trip


def test_to_dict_writes_network_null_when_absent(tmp_path):
    assert load(tmp_path, HEAD).to_dict()["network"] is None


def test_to_dict_writes_every_network_key(tmp_path):
    assert load(tmp_path, FULL).to_dict()["network"] == {
        "listen_port": 25672,
        "upstream": {"latency_ms": 5.0, "jitter_ms": 1.5, "bandwidth_bytes_per_s": 100000.0},
        "downstream": {"latency_ms": 20.0, "jitter_ms": 0.0, "bandwidth_bytes_per_s": None},
        "down": False,
        "reset_peer": False,
    }


@pytest.mark.parametrize("text", [HEAD, FULL, PHASES], ids=["absent", "full", "phases"])
def test_network_survives_the_yaml_round_trip(tmp_path, text):
    original = load(tmp_path, text)
    again = load(tmp_path, yaml.safe_dump(original.to_dict(mask_password=False)))
    assert again == original
    assert [again.at(t).network for t in (5, 15, 32, 40.5)] == [original.at(t).network for t in (5, 15, 32, 40.5)]
