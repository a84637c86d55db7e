"""How far a benchmark's median can be trusted: paired ratios, an interval for their median, a verdict.

A round's two trials run back to back, so their ratio cancels most of the drift between rounds
(the broker's state, other load); what is left still moves one round's ratio by several per cent
on a 2-core machine shared with the broker. The median of the rounds' ratios is the estimate, and
the order statistics around it give an interval that holds the true median with a known
probability, whatever the distribution of the rounds (the sign test's interval): with 9 rounds,
the 2nd lowest to the 2nd highest ratio, 96 %. A target is *met* or *missed* only when the whole
interval is on one side of it; otherwise the rounds can not tell, and the verdict says so.
"""

from __future__ import annotations

import math
import statistics

__all__ = ["paired", "median_interval", "verdict"]

COVERAGE = 0.95
SETTLES = 0.9  # an interval less likely than this to hold the median settles nothing (4 rounds or fewer)


def paired(a: list[float], b: list[float]) -> list[float]:
    """a / b for each round (the same index: the two trials of one round)."""
    return [round(x / y, 4) for x, y in zip(a, b) if y]


def median_interval(values: list[float], coverage: float = COVERAGE) -> tuple[float, float, float] | None:
    """(low, high, probability) for the median of what `values` were drawn from: the k-th lowest and
    k-th highest value, k the largest whose probability is at least `coverage`. With too few values
    for that (5 give at most 94 %), the lowest and highest, with the probability they give. None
    for no values."""
    n = len(values)
    if not n:
        return None
    ordered = sorted(values)
    best_k, best_p = 1, _sign_coverage(n, 1)
    for k in range(2, n // 2 + 1):
        p = _sign_coverage(n, k)
        if p < coverage:
            break
        best_k, best_p = k, p
    return ordered[best_k - 1], ordered[n - best_k], round(best_p, 4)


def _sign_coverage(n: int, k: int) -> float:
    """P(k-th lowest <= median <= k-th highest) of n draws: 1 - 2 P(Binomial(n, 1/2) <= k - 1)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


def verdict(values: list[float], target: float, higher_is_better: bool) -> str:
    """'met', 'missed', or, when the interval straddles the target (or there are too few rounds for
    an interval that settles anything), what the median says and that the rounds did not settle it."""
    interval = median_interval(values)
    if interval is None:
        return "no rounds"
    low, high, probability = interval
    good = (lambda x: x >= target) if higher_is_better else (lambda x: x <= target)
    if probability >= SETTLES and good(low) and good(high):
        return "met"
    if probability >= SETTLES and not good(low) and not good(high):
        return "missed"
    return f"{'met' if good(statistics.median(values)) else 'missed'} by the median, not resolved"
