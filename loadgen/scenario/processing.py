"""Simulated processing time per message: its distributions (`Processing`) and the parser of a
consumer group's `processing_ms` (a number of ms, or a distribution and its parameters).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from loadgen.scenario.checks import choice, number, sub
from loadgen.scenario.errors import Invalid, did_you_mean, show
from loadgen.scenario.fields import LEAF

__all__ = ["Processing", "PROCESSING_PARAMS", "PROCESSING_LAYOUT", "processing"]

PROCESSING_PARAMS: dict[str, tuple[str, ...]] = {
    "fixed": ("ms",),
    "exponential": ("mean_ms",),
    "lognormal": ("median_ms", "sigma"),
    "uniform": ("min_ms", "max_ms"),
    "recorded": ("default_ms",),
}
"""Each distribution and its parameters: the one declaration of a `processing_ms` mapping's keys
(the parser, to_dict and PROCESSING_LAYOUT follow from it)."""

PROCESSING_LAYOUT: dict[str, str] = {
    "distribution": LEAF,
    **{key: LEAF for params in PROCESSING_PARAMS.values() for key in params},
}
"""The YAML_LAYOUT entry of a `processing_ms` mapping: `distribution` and every parameter of any
distribution (which ones a distribution takes, the parser checks)."""


@dataclass(frozen=True)
class Processing:
    """Simulated processing time per message: a distribution and its parameters in ms."""

    distribution: str
    params: tuple[tuple[str, float], ...]

    @classmethod
    def fixed(cls, ms: float) -> Processing:
        return cls("fixed", (("ms", float(ms)),))

    @classmethod
    def exponential(cls, mean_ms: float) -> Processing:
        return cls("exponential", (("mean_ms", float(mean_ms)),))

    @classmethod
    def lognormal(cls, median_ms: float, sigma: float) -> Processing:
        return cls("lognormal", (("median_ms", float(median_ms)), ("sigma", float(sigma))))

    @classmethod
    def uniform(cls, min_ms: float, max_ms: float) -> Processing:
        return cls("uniform", (("min_ms", float(min_ms)), ("max_ms", float(max_ms))))

    def param(self, name: str) -> float:
        return dict(self.params)[name]

    @property
    def mean_ms(self) -> float:
        """The exact mean of the distribution (not a sample mean)."""
        p = dict(self.params)
        if self.distribution == "fixed":
            return p["ms"]
        if self.distribution == "exponential":
            return p["mean_ms"]
        if self.distribution == "lognormal":
            return p["median_ms"] * math.exp(p["sigma"] ** 2 / 2)
        if self.distribution == "uniform":
            return (p["min_ms"] + p["max_ms"]) / 2
        if self.distribution == "recorded":
            return p["default_ms"]  # the recorded times are not known before the run
        raise ValueError(f"unknown processing distribution {self.distribution!r}")

    def sample_ms(self, rng: random.Random, recorded_ms: float | None = None) -> float:
        """One processing time in ms, drawn from `rng`; never negative. `recorded`: the
        message's own recorded time (`recorded_ms`, from a replay), else `default_ms`."""
        if self.distribution == "fixed":  # the common case, per delivery: no dict
            return self.params[0][1]
        p = dict(self.params)
        if self.distribution == "recorded":
            if isinstance(recorded_ms, (int, float)) and not isinstance(recorded_ms, bool) and recorded_ms >= 0:
                return float(recorded_ms)
            return p["default_ms"]
        if self.distribution == "fixed":
            return p["ms"]
        if self.distribution == "exponential":
            return rng.expovariate(1.0 / p["mean_ms"]) if p["mean_ms"] > 0 else 0.0
        if self.distribution == "lognormal":
            if p["median_ms"] <= 0:
                return 0.0
            return rng.lognormvariate(math.log(p["median_ms"]), p["sigma"])
        if self.distribution == "uniform":
            return rng.uniform(p["min_ms"], p["max_ms"])
        raise ValueError(f"unknown processing distribution {self.distribution!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"distribution": self.distribution, **dict(self.params)}


def processing(value: Any) -> Processing:
    """A consumer group's `processing_ms`: a number of ms (fixed), or {distribution, its parameters}."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Processing.fixed(number(0)(value))
    if not isinstance(value, dict):
        raise Invalid(
            "expected a number of milliseconds >= 0 or a mapping such as "
            f"{{distribution: exponential, mean_ms: 4}}, got {show(value)}"
        )
    if "distribution" not in value:
        raise Invalid("missing required key", None, "distribution")
    distribution = sub(value, "distribution", choice(*PROCESSING_PARAMS))
    allowed = ("distribution", *PROCESSING_PARAMS[distribution])
    for key in value:
        if key not in allowed:
            hint = did_you_mean(key, allowed) or f" (expected: {', '.join(allowed)})"
            raise Invalid(f"unknown key for distribution {distribution}{hint}", value[key], str(key))
    params = {}
    for key in PROCESSING_PARAMS[distribution]:
        if key not in value:
            raise Invalid("missing required key", None, key)
        params[key] = sub(value, key, number(0, strict=(key == "sigma")))
    if distribution == "uniform" and params["min_ms"] > params["max_ms"]:
        raise Invalid(
            f"expected max_ms >= min_ms ({params['min_ms']:g}), got {show(value['max_ms'])}", value["max_ms"], "max_ms"
        )
    return Processing(distribution, tuple(params.items()))
