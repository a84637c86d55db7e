"""How `sojourn run` (and sweep, nightly) hands its resolved scenario to the Locust it starts.

The command resolves the scenario once (the file, its --set overrides, $SOJOURN_AMQP_URL, a private
node standing in for the default broker) and writes it into RUN_DIR/run.json, status `starting`
(loadgen.run.runinfo.write_starting_run_json). run.json masks the broker's password, so the URL
itself goes to the child in an environment variable, never to disk. The child builds its Scenario
from run.json (loadgen.scenario.load_resolved: the same checks, errors naming run.json and the
field) instead of parsing the YAML again, and writes run.json in full when the run starts. A plain
`locust -f loadgen/locustfile.py --scenario X.yaml` sets neither variable and reads X.yaml.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from loadgen.scenario import Scenario, ScenarioError
from loadgen.scenario.loader import load_resolved

__all__ = ["RUN_JSON_ENV", "BROKER_URL_ENV", "hand_over", "take_over", "never_started", "withdraw"]

RUN_JSON_ENV = "SOJOURN_RUN_JSON"
"""The run.json holding the resolved scenario, set by `sojourn run` for the Locust it starts."""
BROKER_URL_ENV = "SOJOURN_RUN_BROKER_URL"
"""The run's broker URL with its password (run.json masks it), set alongside RUN_JSON_ENV."""


def hand_over(run_dir: str, scenario: Scenario) -> dict[str, str]:
    """Write RUN_DIR/run.json (status `starting`) from `scenario`, as resolved for the run; the
    environment variables that tell the child to read it."""
    from loadgen.run.runinfo import write_starting_run_json

    path = write_starting_run_json(run_dir, scenario)
    return {RUN_JSON_ENV: os.path.abspath(path), BROKER_URL_ENV: scenario.broker.url}


def take_over(environ: MutableMapping[str, str] = os.environ) -> Scenario | None:
    """In the Locust child: the scenario `sojourn run` handed over, or None when no command started
    this process (RUN_JSON_ENV unset). Both variables are taken out of `environ`: the processes this
    one starts (trace writers, the network proxy) need neither, and the URL holds a password.
    Raises ScenarioError when run.json can not be read or its scenario fails a check."""
    path = environ.pop(RUN_JSON_ENV, "")
    url = environ.pop(BROKER_URL_ENV, None)
    if not path:
        return None
    if url is None:
        raise ScenarioError(
            path,
            "",
            None,
            f"${RUN_JSON_ENV} names this file but ${BROKER_URL_ENV} is not set (sojourn run sets both; "
            f"to run a scenario by hand, unset {RUN_JSON_ENV} and give --scenario)",
        )
    return load_resolved(path, url)


def never_started(run_dir: str) -> bool:
    """RUN_DIR/run.json is still the one handed over (status `starting`): the run never started."""
    from loadgen.run.runinfo import STARTING, read_run_json

    try:
        return read_run_json(run_dir).get("status") == STARTING
    except (OSError, ValueError, AttributeError):
        return False


def withdraw(run_dir: str) -> None:
    """Remove the run.json handed over when the run never started: the directory then holds no run
    (as before the hand-over existed), and sweep, analyze and `sojourn run` treat it so."""
    if never_started(run_dir):
        os.remove(os.path.join(run_dir, "run.json"))
