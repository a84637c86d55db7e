"""The outcome rates' draw (loadgen/rules/outcomes.py): where a uniform draw falls against the
rates' cumulative bounds, and one seeded stream per consumer for the whole run."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from loadgen.rules.outcomes import OutcomeDraws, outcome_of


@dataclass(frozen=True)
class Rates:
    requeue: float
    discard: float
    reject: float
    seed: int | None = None

    def thresholds(self) -> tuple[float, float, float]:
        return (self.requeue, self.requeue + self.discard, self.requeue + self.discard + self.reject)


@pytest.mark.parametrize(
    ("u", "expected"),
    [(0.0, "nack_requeue"), (0.099, "nack_requeue"), (0.1, "nack_discard"), (0.3, "reject"), (0.6, "ack")],
)
def test_a_draw_falls_in_the_share_of_its_outcome(u, expected):
    # requeue 10 %, discard 20 %, reject 30 %: bounds 0.1, 0.3, 0.6
    assert outcome_of(u, (0.1, 0.3, 0.6)) == expected


def test_the_stream_is_made_once_from_the_seed_and_kept_when_a_phase_changes_the_rates():
    made = []

    def make(seed):
        made.append(seed)
        return random.Random(seed)

    draws = OutcomeDraws(make)
    first, second = Rates(0.5, 0.0, 0.0, seed=7), Rates(0.0, 0.0, 1.0, seed=8)
    got = [draws.draw(first) for _ in range(20)] + [draws.draw(second) for _ in range(5)]
    reference = random.Random(7)
    expected = ["nack_requeue" if reference.random() < 0.5 else "ack" for _ in range(20)]
    assert got == expected + ["reject"] * 5
    assert made == [7]  # one stream per consumer, all run
