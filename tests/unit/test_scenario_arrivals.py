"""Producer arrival settings in scenario files: rate profiles, bursts and replay."""

from __future__ import annotations

import pytest

from loadgen.scenario.model import Bursts, ReplaySpec
from tests.unit.scenario_files import error, load

HEAD = "name: t\nqueue: {name: q}\nrun: {duration_s: 60}\n"


def producer(body: str) -> str:
    return HEAD + "producers:\n  - name: main\n" + "".join(f"    {line}\n" for line in body.splitlines())


def test_a_rate_profile_loads_as_points_and_reads_in_the_console(tmp_path):
    s = load(tmp_path, producer("rate: [{at_s: 0, rate: 50}, {at_s: 30, rate: 500}, {at_s: 30, rate: 20}]"))
    group = s.producer("main")
    assert group.rate == ((0.0, 50.0), (30.0, 500.0), (30.0, 20.0))
    assert group.rate_text() == "50 -> 500 -> 20 (profile)"
    assert s.to_dict()["producers"][0]["rate"] == [[0.0, 50.0], [30.0, 500.0], [30.0, 20.0]]


@pytest.mark.parametrize(
    "rate, expected",
    [
        ("[]", "producers[0].rate: expected a number >= 0 or a list of points such as"),
        (
            "[{at_s: 5, rate: 1}, {at_s: 2, rate: 3}]",
            "producers[0].rate[1].at_s: expected points in time order: at_s 2 comes after 5",
        ),
        ("[{at_s: 0, rate: -1}]", "producers[0].rate[0].rate: expected a number >= 0, got -1"),
        ("[{at_sec: 0, rate: 1}]", "producers[0].rate[0].at_sec: unknown key (did you mean 'at_s'?)"),
        ("[{at_s: 0}]", "producers[0].rate[0].rate: missing required key"),
        (
            "[{at_s: 1, rate: 1}, {at_s: 1, rate: 2}, {at_s: 1, rate: 3}]",
            "producers[0].rate[2].at_s: three points at 1 s",
        ),
    ],
)
def test_bad_rate_profiles_are_located_to_the_point(tmp_path, rate, expected):
    assert error(tmp_path, producer(f"rate: {rate}")).startswith(expected)


def test_a_rate_profile_may_be_written_as_pairs_as_to_dict_writes_it(tmp_path):
    pairs = load(tmp_path, producer("rate: [[0, 50], [30, 500], {at_s: 30, rate: 20}]")).producer("main")
    assert pairs.rate == ((0.0, 50.0), (30.0, 500.0), (30.0, 20.0))


@pytest.mark.parametrize(
    "rate, expected",
    [
        ("[[0, -1]]", "producers[0].rate[0][1]: expected a number >= 0, got -1"),
        ("[[5, 1], [2, 3]]", "producers[0].rate[1][0]: expected points in time order: at_s 2 comes after 5"),
        ("[[0, 1, 2]]", "producers[0].rate[0]: expected a point such as {at_s: 0, rate: 50}, got [0, 1, 2]"),
    ],
)
def test_bad_rate_pairs_are_located_to_the_item(tmp_path, rate, expected):
    assert error(tmp_path, producer(f"rate: {rate}")).startswith(expected)


def test_bursts_load_with_defaults_and_reject_bad_values(tmp_path):
    s = load(tmp_path, producer("rate: 100\nbursts: {on_s: 2, off_s: 8}"))
    assert s.producer("main").bursts == Bursts(2.0, 8.0, 0.0, 0.0)
    assert (
        error(tmp_path, producer("rate: 100\nbursts: {on_s: 0, off_s: 8}"))
        == "producers[0].bursts.on_s: expected a number > 0, got 0"
    )
    assert (
        error(tmp_path, producer("rate: 100\nbursts: {on_s: 1}")) == "producers[0].bursts.off_s: missing required key"
    )


def test_replay_resolves_the_path_from_the_scenario_directory(tmp_path):
    (tmp_path / "t.csv").write_text("offset_s,size_bytes\n0,10\n")
    s = load(tmp_path, producer("replay: {path: t.csv, speed: 2, window: [1, null], loop: 3, split: round_robin}"))
    assert s.producer("main").replay == ReplaySpec(str(tmp_path / "t.csv"), 2.0, (1.0, None), 3, "round_robin", "group")
    assert s.producer("main").rate_text() == f"replay of {tmp_path / 't.csv'}"


@pytest.mark.parametrize(
    "body, expected",
    [
        ("replay: {path: missing.csv}", "producers[0].replay.path: no such file or directory: "),
        ("replay: {path: t.csv}\nrate: 5", "producers[0].rate: a replay group takes rate from its file"),
        ("replay: {path: t.csv}\nsize_bytes: 5", "producers[0].size_bytes: a replay group takes size_bytes"),
        ("replay: {path: t.csv, window: [5, 2]}", "producers[0].replay.window: expected [start_s, end_s]"),
        ("replay: {path: t.csv, loop: 0}", "producers[0].replay.loop: expected false (one pass)"),
        ("replay: {path: t.csv, speed: 0}", "producers[0].replay.speed: expected a number > 0, got 0"),
        ("replay: {path: t.csv, split: hash}", "producers[0].replay.split: expected one of key, round_robin"),
        ("replay: {file: t.csv}", "producers[0].replay.file: unknown key"),
        ("arrival: poisson", "producers[0].rate: missing required key"),
    ],
)
def test_bad_replay_settings_are_clear(tmp_path, body, expected):
    (tmp_path / "t.csv").write_text("offset_s,size_bytes\n0,10\n")
    assert error(tmp_path, producer(body)).startswith(expected)


def test_a_phase_can_not_change_a_replay_group(tmp_path):
    (tmp_path / "t.csv").write_text("offset_s,size_bytes\n0,10\n")
    text = producer("replay: {path: t.csv}") + "timeline:\n  - {name: p, start_s: 5, set: {producers.main.count: 2}}\n"
    assert error(tmp_path, text).startswith("timeline[0].set.producers.main.count: producer group 'main' replays")


def test_a_priority_mix_is_normalised_and_a_single_priority_is_certain(tmp_path):
    s = load(tmp_path, producer("rate: 10\npriority: {5: 1, 1: 3}\nmandatory: true"))
    assert s.producer("main").priority == ((1, 0.75), (5, 0.25))
    assert s.producer("main").mandatory is True
    assert load(tmp_path, producer("rate: 10\npriority: 7")).producer("main").priority == ((7, 1.0),)
    assert load(tmp_path, producer("rate: 10")).producer("main").priority is None


@pytest.mark.parametrize(
    "value, expected",
    [
        ("300", "producers[0].priority: expected null, a priority from 0 to 255, or a mix such as {1: 0.7, 5: 0.3}"),
        ("{1: 0.5, 256: 0.5}", "producers[0].priority.256: expected priorities from 0 to 255 as keys, got 256"),
        ("{1: 0}", "producers[0].priority.1: expected a number > 0, got 0"),
        ("{}", "producers[0].priority: expected null, a priority from 0 to 255"),
    ],
)
def test_bad_priorities_are_named(tmp_path, value, expected):
    assert error(tmp_path, producer(f"rate: 10\npriority: {value}")).startswith(expected)


def test_max_blocked_wait_is_a_positive_number_or_null(tmp_path):
    assert load(tmp_path, producer("rate: 10\nmax_blocked_wait_s: 2.5")).producer("main").max_blocked_wait_s == 2.5
    assert load(tmp_path, producer("rate: 10")).producer("main").max_blocked_wait_s is None
    assert error(tmp_path, producer("rate: 10\nmax_blocked_wait_s: 0")) == (
        "producers[0].max_blocked_wait_s: expected a number > 0 or null (wait as long as it takes), got 0"
    )


def test_a_priority_mix_may_be_written_as_pairs_as_to_dict_writes_it(tmp_path):
    s = load(tmp_path, producer("rate: 10\npriority: [[5, 0.25], [1, 0.75]]"))
    assert s.producer("main").priority == ((1, 0.75), (5, 0.25))
    assert s.to_dict()["producers"][0]["priority"] == [[1, 0.75], [5, 0.25]]
    weights = load(tmp_path, producer("rate: 10\npriority: [[5, 1], [1, 3]]")).producer("main").priority
    assert weights == ((1, 0.75), (5, 0.25))  # not summing to 1: weights, as in a mapping
    sevenths = tuple((p, 1 / 7) for p in range(1, 8))  # sums to 1 within a rounding error: taken as it is
    text = "rate: 10\npriority: [" + ", ".join(f"[{p}, {w!r}]" for p, w in sevenths) + "]"
    assert load(tmp_path, producer(text)).producer("main").priority == sevenths


@pytest.mark.parametrize(
    "value, expected",
    [
        ("[[1, 0.5], [256, 0.5]]", "producers[0].priority[1][0]: expected a priority from 0 to 255, got 256"),
        ("[[1, 0]]", "producers[0].priority[0][1]: expected a number > 0, got 0"),
        ("[[1, 0.5], [1, 0.5]]", "producers[0].priority[1][0]: priority 1 is given twice"),
        ("[1, 2]", "producers[0].priority[0]: expected a [priority, probability] pair such as [1, 0.7], got 1"),
        ("[]", "producers[0].priority: expected null, a priority from 0 to 255"),
    ],
)
def test_bad_priority_pairs_are_located_to_the_item(tmp_path, value, expected):
    assert error(tmp_path, producer(f"rate: 10\npriority: {value}")).startswith(expected)
