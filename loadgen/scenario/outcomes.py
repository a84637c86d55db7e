"""A consumer group's outcome rates (`outcomes`): the share of deliveries a consumer settles
otherwise than with an ack, drawn per delivery from a seeded generator (docs/scenarios.md).

After its processing, each delivery is nacked with requeue with probability `requeue`, nacked
without requeue with probability `discard` (dead-lettered when the queue has a dead-letter
exchange), rejected without requeue with probability `reject`, and acked otherwise; what
RabbitMQ PerfTest's `--nack`/`--requeue` and omq's `--requeue-rate`/`--discard-rate` do, per
group and per timeline phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadgen.scenario.checks import integer, mapping_fields
from loadgen.scenario.errors import Invalid, show
from loadgen.scenario.fields import yaml

__all__ = ["OutcomeRates", "outcomes", "OUTCOMES_EXAMPLE"]

OUTCOMES_EXAMPLE = "{requeue: 0.05, discard: 0.01, reject: 0.01}"


def _fraction(value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
        raise Invalid(f"expected a fraction between 0 and 1, got {show(value)}")
    return float(value)


def _seed(value: Any) -> int | None:
    return None if value is None else integer(0)(value)


@dataclass(frozen=True)
class OutcomeRates:
    """Fractions of a group's deliveries settled by a nack with requeue, a nack without requeue
    and a reject without requeue; the rest are acked. `seed`: the generator's seed (with the
    consumer's name), None for one derived from the run id."""

    requeue: float = field(default=0.0, metadata=yaml(_fraction))
    discard: float = field(default=0.0, metadata=yaml(_fraction))
    reject: float = field(default=0.0, metadata=yaml(_fraction))
    seed: int | None = field(default=None, metadata=yaml(_seed))

    def thresholds(self) -> tuple[float, float, float]:
        """The cumulative bounds a uniform draw u in [0, 1) is held against: u < first requeues,
        u < second discards, u < third rejects, otherwise the delivery is acked."""
        return (self.requeue, self.requeue + self.discard, self.requeue + self.discard + self.reject)


def outcomes(value: Any) -> OutcomeRates | None:
    """A consumer group's `outcomes` value: a mapping of fractions, or null for every delivery acked."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise Invalid(f"expected a mapping such as {OUTCOMES_EXAMPLE}, or null for none, got {show(value)}")
    rates = OutcomeRates(**mapping_fields(value, OutcomeRates))
    total = rates.requeue + rates.discard + rates.reject
    if total > 1 + 1e-9:
        raise Invalid(
            f"requeue + discard + reject is {total:g}: the fractions of one delivery's outcomes add up to 1 at most"
        )
    return rates
