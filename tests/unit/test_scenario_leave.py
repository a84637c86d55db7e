"""`leave: clean|crash` on a consumer group: default, phases, validation and the round trip."""

from __future__ import annotations

import yaml

from loadgen.cli import main
from tests.unit.scenario_files import error, load

HEAD = """\
name: t
queue: {name: q}
run: {duration_s: 30}
consumers:
  - name: workers
    count: 2
"""
CRASH_PHASE = """\
timeline:
  - {name: crash, start_s: 10, end_s: 20, set: {consumers.workers.count: 1, consumers.workers.leave: crash}}
"""


def test_consumers_leave_cleanly_by_default(tmp_path):
    assert load(tmp_path, HEAD).consumer("workers").leave == "clean"


def test_a_phase_makes_the_slots_that_leave_crash_and_the_base_comes_back_after_it(tmp_path):
    s = load(tmp_path, HEAD + CRASH_PHASE)
    during = s.at(15).consumer("workers")
    assert (during.count, during.leave) == (1, "crash")
    after = s.at(25).consumer("workers")
    assert (after.count, after.leave) == (2, "clean")


def test_leave_can_be_set_on_the_group_itself(tmp_path):
    assert load(tmp_path, HEAD + "    leave: crash\n").consumer("workers").leave == "crash"


def test_an_unknown_leave_value_names_the_field_and_the_close_match(tmp_path):
    text = HEAD + CRASH_PHASE.replace("leave: crash", "leave: crsh")
    assert error(tmp_path, text) == (
        "timeline[0].set.consumers.workers.leave: expected one of clean, crash, got 'crsh' (did you mean 'crash'?)"
    )


def test_a_group_leave_that_is_not_a_string_is_refused(tmp_path):
    assert error(tmp_path, HEAD + "    leave: true\n") == "consumers[0].leave: expected one of clean, crash, got true"


def test_a_crash_needs_manual_acks_on_the_group(tmp_path):
    text = HEAD + "    ack_mode: auto\n    leave: crash\n"
    assert error(tmp_path, text).startswith("consumers[0].leave: a crash needs ack_mode: manual")


def test_a_phase_can_not_crash_an_auto_ack_group(tmp_path):
    text = HEAD + "    ack_mode: auto\n" + CRASH_PHASE
    assert error(tmp_path, text).startswith(
        "timeline[0].set.consumers.workers.leave: consumer group 'workers' has ack_mode: auto; a crash needs"
    )


def test_leave_round_trips_through_to_dict(tmp_path):
    s = load(tmp_path, HEAD + CRASH_PHASE)
    again = load(tmp_path, yaml.safe_dump(s.to_dict(mask_password=False)))
    assert again == s and again.at(15).consumer("workers").leave == "crash"


def test_validate_exits_2_naming_file_field_and_value(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(HEAD + "    leave: boom\n")
    assert main(["validate", str(path)]) == 2
    assert f"{path}: consumers[0].leave: expected one of clean, crash, got 'boom'" in capsys.readouterr().err
