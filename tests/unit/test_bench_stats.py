"""benchmarks.stats: the interval around a median of paired ratios, and the verdict against a target."""

from __future__ import annotations

import pytest

from benchmarks.stats import median_interval, paired, verdict


def test_paired_ratios_are_taken_round_by_round_and_skip_a_zero_denominator():
    assert paired([10, 30, 5], [20, 10, 0]) == [0.5, 3.0]


@pytest.mark.parametrize(
    "n, k, probability",
    [
        # 1 - 2 * P(Binomial(n, 1/2) <= k - 1), worked out by hand:
        (9, 2, 1 - 2 * (1 + 9) / 512),  # 0.9609: k = 3 would give 1 - 2 * 46/512 = 0.8203
        (12, 3, 1 - 2 * (1 + 12 + 66) / 4096),  # 0.9614: k = 4 would give 1 - 2 * 299/4096 = 0.8540
        (5, 1, 1 - 2 / 32),  # 0.9375, the most 5 rounds can give
    ],
)
def test_the_interval_is_the_kth_order_statistics_with_the_highest_k_that_keeps_95_percent(n, k, probability):
    values = [float(v) for v in range(n, 0, -1)]  # n .. 1, unsorted on purpose
    low, high, p = median_interval(values)
    assert (low, high) == (float(k), float(n + 1 - k))
    assert p == pytest.approx(probability, abs=1e-4)


def test_no_rounds_have_no_interval():
    assert median_interval([]) is None


def test_a_target_is_met_or_missed_only_when_the_whole_interval_is_on_one_side():
    above = [0.91, 0.95, 0.93, 0.97, 0.92, 0.99, 0.94, 0.96, 0.98]  # interval 0.92-0.98
    assert verdict(above, 0.9, higher_is_better=True) == "met"
    assert verdict(above, 0.99, higher_is_better=True) == "missed"
    # 9 rounds: the 2nd lowest is 0.85 and the 2nd highest 0.97; the median (0.93) is above 0.9
    straddling = [0.80, 0.85, 0.93, 0.97, 0.92, 0.99, 0.94, 0.91, 0.88]
    assert verdict(straddling, 0.9, higher_is_better=True) == "met by the median, not resolved"
    assert verdict(straddling, 0.95, higher_is_better=True) == "missed by the median, not resolved"


def test_for_an_overhead_lower_is_better():
    overheads = [0.01, 0.02, 0.03, 0.04, 0.02, 0.03, 0.01, 0.02, 0.04]  # interval 0.01-0.04
    assert verdict(overheads, 0.05, higher_is_better=False) == "met"
    assert verdict([x + 0.05 for x in overheads], 0.05, higher_is_better=False) == "missed"


@pytest.mark.parametrize("rounds", [1, 4])
def test_four_rounds_or_fewer_settle_nothing_however_far_from_the_target(rounds):
    # 4 rounds: the lowest to the highest holds the median with 1 - 2/16 = 87.5 %, under 90 %
    assert verdict([0.5] * rounds, 0.9, higher_is_better=True) == "missed by the median, not resolved"
    assert verdict([1.5] * rounds, 0.9, higher_is_better=True) == "met by the median, not resolved"
    assert verdict([0.5] * 5, 0.9, higher_is_better=True) == "missed"  # 93.75 %
