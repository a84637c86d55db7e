"""Timeline phases: which phase is active, the effective settings at a time, and phase errors."""

from __future__ import annotations

import pytest

from loadgen.scenario import Processing
from tests.unit.scenario_files import error, load

HEAD = """\
name: t
queue: {name: q}
run: {duration_s: 60}
producers:
  - {name: main, rate: 100, count: 2}
consumers:
  - {name: main, count: 1, prefetch: 26, processing_ms: 4}
"""

# Written out of order on purpose: phases are sorted by start_s.
TIMELINE = (
    HEAD
    + """\
timeline:
  - name: slow
    start_s: 30
    set:
      consumers.main.processing_ms: 40
      producers.main.rate: 30
  - name: crowd
    start_s: 10
    end_s: 20
    set:
      consumers[0].count: 4
      producers.0.count: 5
  - name: quiet
    start_s: 45
    set:
      producers.main.rate: 0
"""
)


@pytest.fixture
def scenario(tmp_path):
    return load(tmp_path, TIMELINE)


def test_phases_are_sorted_and_end_at_the_next_start_or_the_end(scenario):
    assert scenario.phase_windows() == [("crowd", 10.0, 20.0), ("slow", 30.0, 45.0), ("quiet", 45.0, 60.0)]


@pytest.mark.parametrize(
    "t, phase",
    [
        (0.0, "base"),
        (9.999, "base"),
        (10.0, "crowd"),
        (19.999, "crowd"),
        (20.0, "base"),
        (30.0, "slow"),
        (44.999, "slow"),
        (45.0, "quiet"),
        (59.9, "quiet"),
        (60.0, "base"),
    ],
)
def test_phase_at_is_start_inclusive_and_end_exclusive(scenario, t, phase):
    assert scenario.phase_at(t) == phase


def test_effective_settings_inside_and_outside_phases(scenario):
    assert scenario.at(5).consumer("main").processing == Processing.fixed(4)
    assert scenario.at(35).consumer("main").processing == Processing.fixed(40)
    assert scenario.at(35).producer("main").rate == 30.0
    assert scenario.at(15).consumer("main").count == 4
    assert scenario.at(15).producer("main").count == 5
    assert scenario.at(25).consumer("main").count == 1


def test_phases_apply_to_the_base_and_do_not_accumulate(scenario):
    quiet = scenario.at(50)
    assert quiet.producer("main").rate == 0.0
    # 'slow' set processing to 40 ms; 'quiet' does not mention it, so it is the base 4 ms again
    assert quiet.consumer("main").processing == Processing.fixed(4)
    # asking an effective scenario for another time still starts from the base
    assert scenario.at(35).at(50) == quiet
    assert scenario.at(35).at(5) == scenario


def test_fields_a_phase_does_not_touch_keep_their_base_values(scenario):
    effective = scenario.at(35)
    assert effective.consumer("main").prefetch == 26
    assert effective.producer("main").count == 2
    assert effective.queue == scenario.queue and effective.timeline == scenario.timeline


def test_effective_settings_are_computed_once_per_phase(scenario):
    assert scenario.at(31) is scenario.at(44)
    assert scenario.at(1) is scenario


def test_max_count_covers_the_base_and_every_phase(scenario):
    assert scenario.max_count("consumers", "main") == 4
    assert scenario.max_count("producers", "main") == 5


def test_change_times_are_the_phase_edges_inside_the_run(scenario):
    assert scenario.change_times() == [10.0, 20.0, 30.0, 45.0]


def test_a_scenario_without_a_timeline_is_always_base(tmp_path):
    s = load(tmp_path, HEAD)
    assert (s.phase_at(3), s.change_times(), s.phase_windows()) == ("base", [], [])
    assert s.at(3) is s


def test_a_phase_starting_at_zero_is_not_a_change_time(tmp_path):
    s = load(tmp_path, HEAD + "timeline:\n  - {name: a, start_s: 0, end_s: 10}\n")
    assert s.change_times() == [10.0]
    assert s.phase_at(0) == "a"


def test_phase_values_are_validated_like_the_base_field(tmp_path):
    text = HEAD + "timeline:\n  - name: a\n    start_s: 1\n    set:\n      consumers.main.processing_ms: -4\n"
    assert error(tmp_path, text) == "timeline[0].set.consumers.main.processing_ms: expected a number >= 0, got -4"


@pytest.mark.parametrize(
    "set_line, expected",
    [
        (
            "consumers.main.ack_mode: auto",
            "timeline[0].set.consumers.main.ack_mode: can not be changed by a phase "
            "(a phase may set consumers.<group>.{count, processing_ms, prefetch, leave, outcomes})",
        ),
        (
            "producers.main.confirms: false",
            "timeline[0].set.producers.main.confirms: can not be changed by a phase "
            "(a phase may set producers.<group>.{rate, count, size_bytes, arrival})",
        ),
        (
            "consumers.main.prefech: 3",
            "timeline[0].set.consumers.main.prefech: unknown key (did you mean 'prefetch'?) "
            "(a phase may set consumers.<group>.{count, processing_ms, prefetch, leave, outcomes})",
        ),
        (
            "consumers.mian.count: 3",
            "timeline[0].set.consumers.mian.count: no consumer group named 'mian' (did you mean 'main'?)",
        ),
        (
            "consumer.main.count: 3",
            "timeline[0].set.consumer.main.count: expected producers.<group>.<field>, consumers.<group>.<field> "
            "or network.<field> "
            "(did you mean 'consumers'?)",
        ),
        (
            "producers.main.arrival: poison",
            "timeline[0].set.producers.main.arrival: expected one of constant, poisson, got 'poison' "
            "(did you mean 'poisson'?)",
        ),
    ],
)
def test_a_phase_may_only_set_known_group_fields(tmp_path, set_line, expected):
    text = HEAD + f"timeline:\n  - name: a\n    start_s: 1\n    set:\n      {set_line}\n"
    assert error(tmp_path, text) == expected


def test_two_spellings_of_one_field_in_a_phase_are_rejected(tmp_path):
    text = (
        HEAD + "timeline:\n  - name: a\n    start_s: 1\n    set:\n"
        "      consumers.main.count: 2\n      consumers[0].count: 3\n"
    )
    assert error(tmp_path, text) == "timeline[0].set.consumers[0].count: sets the same field as 'consumers.main.count'"


@pytest.mark.parametrize(
    "timeline, expected",
    [
        (
            "  - {name: a, start_s: 10, end_s: 30}\n  - {name: b, start_s: 20}\n",
            "timeline[1].start_s: phase 'b' (starting at 20) overlaps phase 'a' (timeline[0], 10-30 s)",
        ),
        (
            "  - {name: b, start_s: 20}\n  - {name: a, start_s: 10, end_s: 30}\n",
            "timeline[0].start_s: phase 'b' (starting at 20) overlaps phase 'a' (timeline[1], 10-30 s)",
        ),
        (
            "  - {name: a, start_s: 10}\n  - {name: b, start_s: 10}\n",
            "timeline[1].start_s: phase 'b' (starting at 10) overlaps phase 'a' (timeline[0], 10-? s)",
        ),
        (
            "  - {name: a, start_s: 60}\n",
            "timeline[0].start_s: expected a number >= 0 and < run.duration_s (60), got 60",
        ),
        (
            "  - {name: a, start_s: 10, end_s: 10}\n",
            "timeline[0].end_s: expected a number > start_s (10) and <= run.duration_s (60), got 10",
        ),
        (
            "  - {name: a, start_s: 10, end_s: 61}\n",
            "timeline[0].end_s: expected a number > start_s (10) and <= run.duration_s (60), got 61",
        ),
        ("  - {name: base, start_s: 10}\n", "timeline[0].name: 'base' is reserved for the time outside every phase"),
        (
            "  - {name: a, start_s: 10}\n  - {name: a, start_s: 20}\n",
            "timeline[1].name: duplicate name: timeline[0] is also called 'a'",
        ),
        ("  - {name: a}\n", "timeline[0].start_s: missing required key"),
        ("  - {name: a, start_s: 1, stop_s: 3}\n", "timeline[0].stop_s: unknown key (did you mean 'start_s'?)"),
    ],
)
def test_bad_timelines_are_rejected_naming_the_phases(tmp_path, timeline, expected):
    assert error(tmp_path, HEAD + "timeline:\n" + timeline) == expected


def test_phases_that_touch_do_not_overlap(tmp_path):
    s = load(
        tmp_path, HEAD + "timeline:\n  - {name: a, start_s: 10, end_s: 20}\n  - {name: b, start_s: 20, end_s: 30}\n"
    )
    assert s.phase_windows() == [("a", 10.0, 20.0), ("b", 20.0, 30.0)]


def test_end_s_null_means_the_default_end(tmp_path):
    s = load(tmp_path, HEAD + "timeline:\n  - {name: a, start_s: 10, end_s: null}\n  - {name: b, start_s: 40}\n")
    assert s.phase_windows() == [("a", 10.0, 40.0), ("b", 40.0, 60.0)]


def test_boundaries_and_the_settings_in_force_after_the_run_are_the_last_phases(tmp_path):
    from tests.unit.scenario_files import load

    s = load(
        tmp_path,
        """
name: t
queue: {name: q}
run: {duration_s: 10}
producers: [{name: p, rate: 5}]
consumers: [{name: c, prefetch: 1}]
timeline:
  - {name: wide, start_s: 2, end_s: 5, set: {consumers.c.prefetch: 20}}
  - {name: last, start_s: 8, set: {consumers.c.prefetch: 7}}
""",
    )
    assert s.boundaries() == [0.0, 2.0, 5.0, 8.0]
    assert s.in_run(3.0) == 3.0 and s.in_run(12.0) < 10.0
    assert [s.settings_at(t).consumer("c").prefetch for t in (-0.5, 0.0, 2.0, 5.0, 9.9, 10.0, 25.0)] == [
        1,
        1,
        20,
        1,
        7,
        7,  # the drain keeps the run's final conditions
        7,
    ]
