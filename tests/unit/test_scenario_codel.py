"""CoDel per consumer group: the `codel` mapping, its validation, `--set`, phases and the round trip."""

from __future__ import annotations

import pytest
import yaml

from loadgen.scenario import CoDelSpec
from tests.unit.scenario_files import error, load

HEAD = """\
name: t
queue: {name: q}
run: {duration_s: 60}
consumers:
  - name: main
    prefetch: 200
"""


def test_codel_is_off_when_absent(tmp_path):
    assert load(tmp_path, HEAD).consumer("main").codel is None


def test_codel_null_means_off(tmp_path):
    assert load(tmp_path, HEAD + "    codel: null\n").consumer("main").codel is None


def test_a_codel_mapping_becomes_a_codel_spec(tmp_path):
    s = load(tmp_path, HEAD + "    codel: {target_ms: 100, interval_ms: 20, requeue: false}\n")
    assert s.consumer("main").codel == CoDelSpec(target_ms=100.0, interval_ms=20.0, requeue=False)


def test_requeue_defaults_to_true(tmp_path):
    s = load(tmp_path, HEAD + "    codel: {target_ms: 5, interval_ms: 100}\n")
    assert s.consumer("main").codel == CoDelSpec(5.0, 100.0, True)


def test_codel_is_per_group(tmp_path):
    text = HEAD + "    codel: {target_ms: 5.5, interval_ms: 0.25}\n  - name: other\n"
    s = load(tmp_path, text)
    assert (s.consumer("main").codel, s.consumer("other").codel) == (CoDelSpec(5.5, 0.25, True), None)


@pytest.mark.parametrize(
    "codel, expected",
    [
        ("{target_ms: 0, interval_ms: 20}", "consumers[0].codel.target_ms: expected a number > 0, got 0"),
        ("{target_ms: -1, interval_ms: 20}", "consumers[0].codel.target_ms: expected a number > 0, got -1"),
        ("{target_ms: true, interval_ms: 20}", "consumers[0].codel.target_ms: expected a number > 0, got true"),
        (
            "{target_ms: '5', interval_ms: 20}",
            "consumers[0].codel.target_ms: expected a number > 0, got '5' "
            "(that is text, not a number: drop the quotes; write 1e3 as 1000 or 1.0e+3)",
        ),
        ("{target_ms: 5, interval_ms: 0}", "consumers[0].codel.interval_ms: expected a number > 0, got 0"),
        ("{target_ms: 5, interval_ms: .inf}", "consumers[0].codel.interval_ms: expected a number > 0, got inf"),
        ("{target_ms: 5, interval_ms: 20, requeue: 1}", "consumers[0].codel.requeue: expected true or false, got 1"),
        ("{target_ms: 5}", "consumers[0].codel.interval_ms: missing required key"),
        ("{interval_ms: 5}", "consumers[0].codel.target_ms: missing required key"),
        ("{target: 5, interval_ms: 20}", "consumers[0].codel.target: unknown key (did you mean 'target_ms'?)"),
        (
            "{target_ms: 5, interval_ms: 20, zzz: 1}",
            "consumers[0].codel.zzz: unknown key (expected one of: target_ms, interval_ms, requeue)",
        ),
        (
            "true",
            "consumers[0].codel: expected a mapping such as {target_ms: 5, interval_ms: 100}, "
            "or null for CoDel off, got true",
        ),
    ],
)
def test_bad_codel_settings_are_rejected_naming_the_key(tmp_path, codel, expected):
    assert error(tmp_path, HEAD + f"    codel: {codel}\n") == expected


def test_set_changes_one_codel_key_in_place(tmp_path):
    s = load(tmp_path, HEAD + "    codel: {target_ms: 5, interval_ms: 100}\n", "consumers.main.codel.target_ms=50")
    assert s.consumer("main").codel == CoDelSpec(50.0, 100.0, True)


def test_set_turns_codel_on_with_a_whole_mapping(tmp_path):
    s = load(tmp_path, HEAD, "consumers.main.codel={target_ms: 50, interval_ms: 10}")
    assert s.consumer("main").codel == CoDelSpec(50.0, 10.0, True)


def test_set_null_turns_codel_off(tmp_path):
    s = load(tmp_path, HEAD + "    codel: {target_ms: 5, interval_ms: 100}\n", "consumers.main.codel=null")
    assert s.consumer("main").codel is None


def test_set_of_one_codel_key_when_codel_is_off_asks_for_the_whole_value(tmp_path):
    assert error(tmp_path, HEAD, "consumers.main.codel.target_ms=50") == (
        "--set consumers.main.codel.target_ms=50: consumers[0].codel is not set "
        "(set the whole value, e.g. consumers[0].codel={target_ms: 5, interval_ms: 100})"
    )


def test_a_bad_set_value_names_the_override(tmp_path):
    assert (
        error(tmp_path, HEAD + "    codel: {target_ms: 5, interval_ms: 100}\n", "consumers.main.codel.target_ms=0")
        == "--set consumers.main.codel.target_ms=0: expected a number > 0, got 0"
    )


def test_a_phase_can_not_change_codel(tmp_path):
    text = HEAD + "timeline:\n  - name: a\n    start_s: 1\n    set:\n      consumers.main.codel: null\n"
    assert error(tmp_path, text) == (
        "timeline[0].set.consumers.main.codel: can not be changed by a phase "
        "(a phase may set consumers.<group>.{count, processing_ms, prefetch, leave, outcomes})"
    )


def test_a_phase_keeps_the_groups_codel(tmp_path):
    text = (
        HEAD + "    codel: {target_ms: 5, interval_ms: 100}\n"
        "timeline:\n  - name: a\n    start_s: 10\n    set:\n      consumers.main.count: 3\n"
    )
    assert load(tmp_path, text).at(20).consumer("main").codel == CoDelSpec(5.0, 100.0, True)


def test_to_dict_writes_codel_as_a_mapping_or_null(tmp_path):
    text = HEAD + "    codel: {target_ms: 5, interval_ms: 100, requeue: false}\n  - name: other\n"
    consumers = load(tmp_path, text).to_dict()["consumers"]
    assert [c["codel"] for c in consumers] == [{"target_ms": 5.0, "interval_ms": 100.0, "requeue": False}, None]


def test_codel_survives_the_yaml_round_trip(tmp_path):
    original = load(tmp_path, HEAD + "    codel: {target_ms: 5, interval_ms: 100, requeue: false}\n  - name: other\n")
    again = load(tmp_path, yaml.safe_dump(original.to_dict(mask_password=False)))
    assert again == original
    assert again.consumer("main").codel == CoDelSpec(5.0, 100.0, False)
