"""Scenarios: what a load test does, loaded once from YAML into frozen, validated objects.

`load_scenario(path, overrides, env)` is the entry point; every problem raises
`ScenarioError`. The YAML schema is documented in docs/scenarios.md.
"""

from loadgen.scenario.errors import ScenarioError
from loadgen.scenario.loader import load_scenario
from loadgen.scenario.model import (
    Broker,
    CoDelSpec,
    ConsumerGroup,
    LinkSpec,
    NetworkSpec,
    Phase,
    Processing,
    ProducerGroup,
    QueueSpec,
    RunSpec,
    Scenario,
)

__all__ = [
    "load_scenario",
    "ScenarioError",
    "Scenario",
    "Broker",
    "QueueSpec",
    "RunSpec",
    "ProducerGroup",
    "ConsumerGroup",
    "CoDelSpec",
    "Processing",
    "NetworkSpec",
    "LinkSpec",
    "Phase",
]
