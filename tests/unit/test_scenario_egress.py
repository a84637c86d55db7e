"""Egress classes per consumer group: the `egress` mapping, its validation, the warning, the round trip."""

from __future__ import annotations

import yaml

from loadgen.scenario.advice import egress_warnings
from loadgen.scenario.model import EgressSpec
from tests.unit.scenario_files import error, load

HEAD = """\
name: t
queue: {name: q}
run: {duration_s: 60}
producers:
  - name: p
    rate: 10
    size_bytes: 5000
consumers:
  - name: main
"""


def test_egress_is_off_when_absent(tmp_path):
    assert load(tmp_path, HEAD).consumer("main").egress is None


def test_an_empty_mapping_takes_the_solace_defaults_in_one_class(tmp_path):
    spec = load(tmp_path, HEAD + "    egress: {}\n").consumer("main").egress
    assert spec == EgressSpec(20_000, 4, (("all", ((0, 255),)),))


def test_classes_are_kept_in_the_order_listed_highest_first(tmp_path):
    text = HEAD + "    egress: {max_depth_units: 50, min_burst: 2, classes: {top: 255, high: [5, 254], low: [0, 4]}}\n"
    spec = load(tmp_path, text).consumer("main").egress
    assert spec == EgressSpec(50, 2, (("top", ((255, 255),)), ("high", ((5, 254),)), ("low", ((0, 4),))))


def test_a_default_class_takes_every_priority_no_other_class_names(tmp_path):
    spec = load(tmp_path, HEAD + "    egress: {classes: {high: [5, 9], low: default}}\n").consumer("main").egress
    assert spec.classes == (("high", ((5, 9),)), ("low", ((10, 255), (0, 4))))


def test_the_resolved_scenario_loads_back_to_the_same_classes(tmp_path):
    s = load(tmp_path, HEAD + "    egress: {classes: {high: [5, 9], low: default}}\n")
    again = load(tmp_path, yaml.safe_dump(s.to_dict()))
    assert again.consumer("main").egress == s.consumer("main").egress


def test_ranges_that_leave_priorities_out_are_refused_naming_them(tmp_path):
    message = error(tmp_path, HEAD + "    egress: {classes: {high: [5, 9], low: [0, 3]}}\n")
    assert message.startswith("consumers[0].egress.classes: priorities 4, 10-255 are in no class")


def test_overlapping_classes_are_refused_at_the_second_class(tmp_path):
    message = error(tmp_path, HEAD + "    egress: {classes: {high: [5, 255], low: [0, 5]}}\n")
    assert message == ("consumers[0].egress.classes.low: priority 5 is also in class 'high': classes may not overlap")


def test_classes_listed_lowest_first_are_refused(tmp_path):
    message = error(tmp_path, HEAD + "    egress: {classes: {low: [0, 4], high: [5, 255]}}\n")
    assert message.startswith("consumers[0].egress.classes.high: [5, 255] is above class 'low', listed before it")


def test_max_depth_and_min_burst_must_be_positive_integers(tmp_path):
    assert (
        error(tmp_path, HEAD + "    egress: {max_depth_units: 0}\n")
        == "consumers[0].egress.max_depth_units: expected an integer >= 1, got 0"
    )
    assert (
        error(tmp_path, HEAD + "    egress: {min_burst: 1.5}\n")
        == "consumers[0].egress.min_burst: expected an integer >= 1, got 1.5"
    )


def test_an_unknown_key_names_the_close_match(tmp_path):
    assert (
        error(tmp_path, HEAD + "    egress: {max_depth: 10}\n")
        == "consumers[0].egress.max_depth: unknown key (did you mean 'max_depth_units'?)"
    )


def test_a_set_override_reaches_the_egress_fields(tmp_path):
    s = load(tmp_path, HEAD + "    egress: {}\n", "consumers.main.egress.max_depth_units=7")
    assert s.consumer("main").egress.max_depth_units == 7


def test_warns_when_the_prefetch_can_never_fill_a_class(tmp_path):
    # 5,000 B = 3 work units; prefetch 100 x 3 = 300 units <= 300: never over the max depth.
    s = load(tmp_path, HEAD + "    prefetch: 100\n    egress: {max_depth_units: 300}\n")
    (warning,) = egress_warnings(s)
    assert warning.startswith(
        "consumers.main.egress: with ack_mode manual a class holds at most prefetch 100 "
        "messages x 3 work units (the largest message, 5000 B) = 300 units"
    )
    assert "ack_mode: auto" in warning


def test_does_not_warn_when_the_prefetch_can_overflow_a_class(tmp_path):
    # 101 x 3 = 303 > 300
    assert egress_warnings(load(tmp_path, HEAD + "    prefetch: 101\n    egress: {max_depth_units: 300}\n")) == []


def test_warns_when_the_prefetch_is_not_more_than_min_burst(tmp_path):
    s = load(tmp_path, HEAD + "    prefetch: 4\n    egress: {max_depth_units: 1, min_burst: 4}\n")
    (warning,) = egress_warnings(s)
    assert "4 messages are not more than min_burst 4" in warning


def test_a_phase_with_a_larger_prefetch_or_size_makes_discards_reachable(tmp_path):
    text = (
        HEAD + "    prefetch: 10\n    egress: {max_depth_units: 100}\n"
        "timeline:\n  - name: big\n    start_s: 10\n    set: {producers.p.size_bytes: 30000}\n"
    )
    assert egress_warnings(load(tmp_path, text)) == []  # 10 x 15 units = 150 > 100


def test_auto_ack_and_unlimited_prefetch_are_never_warned_about(tmp_path):
    assert egress_warnings(load(tmp_path, HEAD + "    ack_mode: auto\n    egress: {max_depth_units: 10000}\n")) == []
    assert egress_warnings(load(tmp_path, HEAD + "    prefetch: 0\n    egress: {max_depth_units: 10000}\n")) == []
