"""Arrival schedules with an injected rate, change times and random stream (no clock, no sleeping)."""

from __future__ import annotations

import itertools
import math
import pathlib
import random
import statistics
import subprocess
import sys

import pytest

from loadgen.rules.schedule import ArrivalSchedule, changes_after, producer_rng, rate_curve
from loadgen.scenario import load_scenario

REPO = pathlib.Path(__file__).resolve().parents[2]


def steps(*pieces: tuple[float, float]):
    """rate_at and next_change_after for a step function: [(from_s, rate), ...] sorted by from_s."""
    starts = [start for start, _ in pieces]

    def rate_at(t: float) -> float:
        return [rate for start, rate in pieces if start <= t][-1]

    return rate_at, changes_after(starts[1:])


def arrivals(kind, pieces, start_s=0.0, end_s=math.inf, seed=1, limit=10**7):
    rate_at, next_change = steps(*pieces)
    schedule = ArrivalSchedule(kind, rate_at, random.Random(seed), start_s, end_s, next_change)
    return list(itertools.islice(schedule, limit))


def test_constant_rate_is_evenly_spaced_from_the_start():
    times = arrivals("constant", [(0.0, 10.0)], end_s=2.0)
    assert times == pytest.approx([k / 10 for k in range(20)], abs=1e-12)


def test_constant_rate_over_a_window_gives_rate_times_length():
    times = arrivals("constant", [(0.0, 270.0)], start_s=3.0, end_s=13.0)
    assert len(times) == 2700
    assert times[0] == 3.0
    assert times[-1] == pytest.approx(3.0 + 2699 / 270, abs=1e-9)


def test_constant_schedule_does_not_drift_over_a_long_run():
    times = arrivals("constant", [(0.0, 1000.0)], end_s=3600.0)
    assert len(times) == 3_600_000
    assert times[-1] == pytest.approx(3_599_999 / 1000, abs=1e-9)


def test_end_s_is_exclusive_and_never_passed():
    times = arrivals("constant", [(0.0, 4.0)], end_s=1.0)
    assert times == [0.0, 0.25, 0.5, 0.75]
    assert all(t < 1.0 for t in arrivals("poisson", [(0.0, 500.0)], end_s=1.0))


def test_nothing_is_scheduled_in_an_empty_window():
    assert arrivals("constant", [(0.0, 10.0)], start_s=5.0, end_s=5.0) == []


def test_poisson_mean_rate_is_within_the_standard_error():
    rate, duration = 200.0, 500.0
    times = arrivals("poisson", [(0.0, rate)], end_s=duration, seed=42)
    expected = rate * duration  # 100,000 arrivals
    assert abs(len(times) - expected) < 4 * math.sqrt(expected)  # Poisson count sd = sqrt(mean)


def test_poisson_gaps_are_exponential_with_coefficient_of_variation_one():
    times = arrivals("poisson", [(0.0, 200.0)], seed=7, limit=20_001)
    gaps = [b - a for a, b in zip(times, times[1:])]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / 200, rel=4 / math.sqrt(len(gaps)))  # sd of an Exp gap = its mean
    assert statistics.pstdev(gaps) / mean == pytest.approx(1.0, abs=0.04)


def test_poisson_first_arrival_is_at_start():
    assert arrivals("poisson", [(0.0, 5.0)], start_s=2.5, limit=1) == [2.5]


def test_same_seed_gives_the_same_poisson_schedule():
    assert arrivals("poisson", [(0.0, 50.0)], seed=3, limit=100) == arrivals(
        "poisson", [(0.0, 50.0)], seed=3, limit=100
    )


def test_a_rate_step_up_takes_effect_at_the_step():
    times = arrivals("constant", [(0.0, 10.0), (1.0, 1000.0)], end_s=1.01)
    # 10/s until 1.0 (0.0 .. 0.9), then 1000/s from the step itself, not 100 ms later
    expected = [k / 10 for k in range(10)] + [1.0 + k / 1000 for k in range(10)]
    assert times == pytest.approx(expected, abs=1e-9)


def test_a_step_between_arrivals_finishes_the_gap_at_the_new_rate():
    # the 0.9 -> 1.0 gap is half done at 0.95; the other half takes 0.5 ms at 1000/s
    times = arrivals("constant", [(0.0, 10.0), (0.95, 1000.0)], end_s=0.953)
    assert times == pytest.approx([k / 10 for k in range(10)] + [0.9505, 0.9515, 0.9525], abs=1e-9)


def test_a_rate_step_down_takes_effect_at_the_step():
    times = arrivals("constant", [(0.0, 1000.0), (1.0, 2.0)], end_s=2.0)
    assert len(times) == 1000 + 2  # 1000 in [0, 1), then 1.0 and 1.5
    assert times[-2:] == pytest.approx([1.0, 1.5], abs=1e-9)


def test_a_poisson_rate_step_takes_effect_at_the_step():
    times = arrivals("poisson", [(0.0, 10.0), (100.0, 1000.0)], end_s=200.0, seed=11)
    before = [t for t in times if t < 100.0]
    after = [t for t in times if t >= 100.0]
    assert abs(len(before) - 1000) < 4 * math.sqrt(1000)
    assert abs(len(after) - 100_000) < 4 * math.sqrt(100_000)
    assert after[0] - 100.0 < 0.02  # P(first gap > 20 ms at 1000/s) = e^-20


def test_rate_zero_pauses_until_the_next_change():
    times = arrivals("constant", [(0.0, 10.0), (1.0, 0.0), (3.0, 10.0)], end_s=4.0)
    assert times == pytest.approx([k / 10 for k in range(10)] + [3.0 + k / 10 for k in range(10)], abs=1e-9)


def test_rate_zero_with_no_further_change_ends_the_schedule():
    assert arrivals("constant", [(0.0, 10.0), (0.5, 0.0)]) == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4], abs=1e-9)
    assert arrivals("poisson", [(0.0, 0.0)]) == []


def test_arrival_kind_may_change_with_time():
    rate_at, next_change = steps((0.0, 100.0), (1.0, 100.0))

    def kind_at(t):
        return "constant" if t < 1.0 else "poisson"

    times = list(ArrivalSchedule(kind_at, rate_at, random.Random(5), 0.0, 3.0, next_change))
    early = [b - a for a, b in zip(times, times[1:]) if b <= 1.0]
    assert early == pytest.approx([0.01] * len(early), abs=1e-9)
    late = [b - a for a, b in zip(times, times[1:]) if a > 1.0]
    assert statistics.pstdev(late) > 0.005  # no longer evenly spaced


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError):
        ArrivalSchedule("poison", lambda t: 1.0, random.Random())
    with pytest.raises(ValueError):
        list(ArrivalSchedule("constant", lambda t: -1.0, random.Random()))
    with pytest.raises(ValueError):
        list(ArrivalSchedule("constant", lambda t: 1.0, random.Random(), next_change_after=lambda t: t))


def test_scenario_timeline_drives_the_schedule():
    s = load_scenario(REPO / "scenarios" / "slow-processing.yaml", env={})
    schedule = ArrivalSchedule(
        "constant",
        lambda t: s.at(t).producer("main").rate,
        random.Random(0),
        0.0,
        s.run.duration_s,
        changes_after(s.change_times()),
    )
    times = list(schedule)
    # 270/s for 20 s, 30/s for 15 s, 100/s for 10 s
    assert sum(t < 20 for t in times) == 5400
    assert sum(20 <= t < 35 for t in times) == 450
    assert sum(t >= 35 for t in times) == 1000


def test_producer_rng_is_deterministic_per_producer():
    a = [producer_rng(7, "main/0").random() for _ in range(2)]
    assert a[0] == a[1]
    assert producer_rng(7, "main/0").random() != producer_rng(7, "main/1").random()
    assert producer_rng(7, "main/0").random() != producer_rng(8, "main/0").random()


def test_producer_rng_is_the_same_in_another_process():
    code = "from loadgen.rules.schedule import producer_rng; print(repr(producer_rng(7, 'main/0').random()))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {repr(producer_rng(7, "main/0").random()) + "\n"}


# ---- ramps, steps and on/off bursts (rate_curve)


def curve_arrivals(kind, rate, bursts=None, start_s=0.0, end_s=10.0, seed=3):
    rate_at, next_change = rate_curve(rate, bursts)
    return list(ArrivalSchedule(kind, rate_at, random.Random(seed), start_s, end_s, next_change))


def test_a_linear_ramp_sends_the_integral_of_the_rate_at_the_right_times():
    # 0 -> 100 msg/s over 10 s: the k-th arrival is where 5 t^2 = k, i.e. t = sqrt(k / 5)
    times = curve_arrivals("constant", [(0.0, 0.0), (10.0, 100.0)])
    assert len(times) == 500
    assert times == pytest.approx([math.sqrt(k / 5) for k in range(500)], abs=1e-9)


def test_a_falling_ramp_to_zero_stops_and_a_later_point_resumes():
    # 100 -> 0 over 2 s (100 arrivals of work), nothing until 5 s, then 10/s again
    times = curve_arrivals("constant", [(0.0, 100.0), (2.0, 0.0), (5.0, 0.0), (5.0, 10.0)], end_s=7.0)
    ramp = [t for t in times if t < 2.0]
    assert len(ramp) == 100
    # work done by t on the falling ramp: 100 t - 25 t^2 = k
    assert ramp == pytest.approx([(100 - math.sqrt(100**2 - 100 * k)) / 50 for k in range(100)], abs=1e-9)
    assert not [t for t in times if 2.0 <= t < 5.0]
    assert [t for t in times if t >= 5.0] == pytest.approx([5.0 + k / 10 for k in range(20)])


def test_two_points_at_one_time_make_a_step_and_the_last_rate_holds():
    times = curve_arrivals("constant", [(0.0, 10.0), (4.0, 10.0), (4.0, 50.0)], end_s=6.0)
    assert [t for t in times if t < 4.0] == pytest.approx([k / 10 for k in range(40)])
    assert len([t for t in times if t >= 4.0]) == 100  # 50/s for 2 s, held after the last point


def test_poisson_on_a_ramp_matches_the_integrated_rate():
    counts = [len(curve_arrivals("poisson", [(0.0, 0.0), (20.0, 1000.0)], end_s=20.0, seed=s)) for s in range(3)]
    for n in counts:  # expected 10,000 (the ramp's area); Poisson sd = 100
        assert abs(n - 10_000) < 400


def test_bursts_send_only_during_the_on_periods():
    times = curve_arrivals("constant", 100.0, bursts=(1.0, 4.0, 0.0, 0.0), end_s=10.0)
    assert len(times) == 200
    assert all(t < 1.0 or 5.0 <= t < 6.0 for t in times)
    assert times[100] == pytest.approx(5.0)  # each burst starts with an arrival at its edge


def test_bursts_with_an_off_rate_and_an_offset_start():
    # on 2 s at 100/s from t=1, off 3 s at 10/s: [0,1) off, [1,3) on, [3,6) off, [6,8) on, [8,10) off
    times = curve_arrivals("constant", 100.0, bursts=(2.0, 3.0, 10.0, 1.0), end_s=10.0)

    def count(a, b):
        return len([t for t in times if a <= t < b])

    assert count(1.0, 3.0) == 200 and count(6.0, 8.0) == 200
    assert count(3.0, 6.0) == pytest.approx(30, abs=1) and count(8.0, 10.0) == pytest.approx(20, abs=1)
    assert count(0.0, 1.0) == pytest.approx(10, abs=1)


def test_poisson_bursts_keep_the_mean_rate_of_their_on_share():
    counts = [len(curve_arrivals("poisson", 500.0, bursts=(0.5, 1.5, 0.0, 0.0), end_s=40.0, seed=s)) for s in range(3)]
    for n in counts:  # 20 bursts x 0.5 s x 500/s = 5,000; sd ~71
        assert abs(n - 5_000) < 300
