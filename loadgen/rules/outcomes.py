"""The outcome rates' draw: which settle a delivery gets, ack or one of the group's rates
(loadgen.scenario.outcomes), from one uniform draw of the consumer's own seeded stream.

Pure: the stream comes from the caller (`make_rng`, given the rates' seed or None), made once, on
the first draw, and kept for the whole run, whatever rates a phase sets.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

__all__ = ["Rates", "OutcomeDraws", "outcome_of"]


class Rates(Protocol):
    """What the draw needs of a group's outcome rates (loadgen.scenario.outcomes.OutcomeRates)."""

    @property
    def seed(self) -> int | None: ...

    def thresholds(self) -> tuple[float, float, float]: ...


def outcome_of(u: float, bounds: tuple[float, float, float]) -> str:
    """The outcome of a uniform draw `u` in [0, 1) against the rates' cumulative bounds."""
    requeue, discard, reject = bounds
    if u < requeue:
        return "nack_requeue"
    if u < discard:
        return "nack_discard"
    return "reject" if u < reject else "ack"


class OutcomeDraws:
    """One consumer's draws: `draw(rates)` per delivery processed under outcome rates."""

    __slots__ = ("_bounds", "_make_rng", "_rates", "_rng")

    def __init__(self, make_rng: Callable[[int | None], random.Random]) -> None:
        self._make_rng = make_rng
        self._rates: Rates | None = None  # the rates in force (a phase may change them) and their bounds
        self._bounds = (0.0, 0.0, 0.0)
        self._rng: random.Random | None = None

    def draw(self, rates: Rates) -> str:
        if rates is not self._rates:
            self._rates, self._bounds = rates, rates.thresholds()
            if self._rng is None:
                self._rng = self._make_rng(rates.seed)
        assert self._rng is not None
        return outcome_of(self._rng.random(), self._bounds)
