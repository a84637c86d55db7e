"""The resolved scenario (Scenario.to_dict, as run.json holds it) reads back into an equal Scenario
(loader.load_resolved), checked as a scenario file is, its errors naming run.json and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.scenario import ScenarioError, load_scenario
from loadgen.scenario.loader import load_resolved

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "scenarios").glob("*.yaml"))


def write_run_json(path: Path, resolved) -> Path:
    """`resolved` as run.json's `scenario`, through JSON as run.json is written."""
    path.write_text(json.dumps({"scenario": resolved}))
    return path


def test_every_shipped_scenario_is_tested():
    assert len(SHIPPED) >= 12


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_scenario_reads_back_equal_from_its_resolved_form(path, tmp_path):
    scenario = load_scenario(path, env={})
    resolved = json.loads(json.dumps(scenario.to_dict()))  # the password masked, as in run.json
    again = load_resolved(write_run_json(tmp_path / "run.json", resolved), url=scenario.broker.url)
    assert again == scenario
    assert json.loads(json.dumps(again.to_dict())) == resolved


def test_unmasked_the_resolved_form_needs_no_url(tmp_path):
    scenario = load_scenario(REPO / "scenarios/quickstart.yaml", ["broker.url=amqp://u:secret@h:5672/"], env={})
    again = load_resolved(write_run_json(tmp_path / "run.json", scenario.to_dict(mask_password=False)))
    assert again == scenario and again.broker.url == "amqp://u:secret@h:5672/"


def test_scenario_path_and_overrides_come_from_run_json_as_recorded(tmp_path):
    scenario = load_scenario(REPO / "scenarios/quickstart.yaml", ["consumers.main.prefetch=7"], env={})
    run_json = tmp_path / "run.json"
    run_json.write_text(
        json.dumps({"scenario_path": "scenarios/quickstart.yaml", "overrides": ["a=1"], "scenario": scenario.to_dict()})
    )
    again = load_resolved(run_json, url=scenario.broker.url)
    assert (again.source_path, again.overrides) == ("scenarios/quickstart.yaml", ("a=1",))


EGRESS_DEFAULT_AMID = """
name: t
queue: {name: q}
run: {duration_s: 10}
producers:
  - {name: p, rate: [{at_s: 0, rate: 1}, {at_s: 5, rate: 3}], priority: {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1}}
consumers:
  - {name: c, egress: {classes: {high: [5, 255], low: default, mid: 1}}}
timeline:
  - {name: a, start_s: 1, set: {producers.p.rate: [{at_s: 0, rate: 4}, {at_s: 9, rate: 1}]}}
"""


def test_values_to_dict_writes_in_another_form_read_back_equal(tmp_path):
    """A rate profile and a priority mix as pairs (a mix of sevenths sums to 1 only within a rounding
    error), and a default egress class resolved in the middle of the listing (its priorities below a
    later class's: the order rule of a written listing does not apply to a resolved one)."""
    yaml_file = tmp_path / "x.yaml"
    yaml_file.write_text(EGRESS_DEFAULT_AMID)
    scenario = load_scenario(yaml_file, env={})
    resolved = json.loads(json.dumps(scenario.to_dict()))
    assert resolved["consumers"][0]["egress"]["classes"] == {"high": [5, 255], "low": [[2, 4], [0, 0]], "mid": [1, 1]}
    assert load_resolved(write_run_json(tmp_path / "run.json", resolved), url=scenario.broker.url) == scenario


def resolved_quickstart():
    return json.loads(json.dumps(load_scenario(REPO / "scenarios/quickstart.yaml", env={}).to_dict()))


def error(run_json: Path, resolved, url=None) -> str:
    with pytest.raises(ScenarioError) as info:
        load_resolved(write_run_json(run_json, resolved), url=url)
    return str(info.value)


def test_an_error_names_run_json_and_the_field_below_scenario(tmp_path):
    resolved = resolved_quickstart()
    resolved["consumers"][0]["prefetch"] = -1
    run_json = tmp_path / "run.json"
    assert error(run_json, resolved) == (
        f"{run_json}: scenario.consumers[0].prefetch: expected an integer between 0 and 65535, got -1"
    )
    resolved = resolved_quickstart()
    resolved["run"]["warmup_s"] = 1e6
    assert error(run_json, resolved).startswith(f"{run_json}: scenario.run.warmup_s: expected a number >= 0 and <")
    assert error(run_json, None) == f"{run_json}: scenario: expected the resolved scenario (a mapping), got null"


def test_a_run_json_that_can_not_be_read_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "nowhere" / "run.json"
    with pytest.raises(ScenarioError, match="no such file"):
        load_resolved(missing)
    broken = tmp_path / "run.json"
    broken.write_text("{")
    with pytest.raises(ScenarioError) as info:
        load_resolved(broken)
    assert str(info.value).startswith(f"{broken}: line 1, column 2: invalid JSON")


def test_a_replay_group_gives_what_its_file_decides_only_as_resolved(tmp_path):
    scenario = load_scenario(REPO / "scenarios/replay-burst.yaml", env={})
    resolved = json.loads(json.dumps(scenario.to_dict()))
    for key, value in (("rate", 5), ("size_bytes", 7), ("arrival", "poisson")):
        changed = json.loads(json.dumps(resolved))
        changed["producers"][0][key] = value
        assert error(tmp_path / "run.json", changed, scenario.broker.url) == (
            f"{tmp_path / 'run.json'}: scenario.producers[0].{key}: a replay group takes {key} from its file "
            "(remove it, or remove replay)"
        )


def test_a_managed_broker_gives_its_nodes_url_only(tmp_path):
    scenario = load_scenario(REPO / "scenarios/producer-flow-control.yaml", env={})
    resolved = json.loads(json.dumps(scenario.to_dict()))
    assert (
        resolved["broker"]["managed"]
        and load_resolved(write_run_json(tmp_path / "run.json", resolved), url=scenario.broker.url) == scenario
    )
    assert error(tmp_path / "run.json", resolved, "amqp://guest:guest@elsewhere:5673/").startswith(
        f"{tmp_path / 'run.json'}: scenario.broker.url: give broker.url or broker.managed, not both"
    )


def test_a_scenario_file_still_refuses_what_only_a_resolved_scenario_gives(tmp_path):
    """The YAML keeps its rules: a replay group's rate, a managed broker's URL, a class listed above."""
    from tests.unit.scenario_files import error as yaml_error

    head = "name: t\nqueue: {name: q}\nrun: {duration_s: 10}\n"
    (tmp_path / "t.csv").write_text("offset_s\n0\n")
    replay = head + "producers: [{name: p, rate: 0.0, replay: {path: t.csv}}]\n"
    assert yaml_error(tmp_path, replay).startswith("producers[0].rate: a replay group takes rate from its file")
    managed = head + "broker: {managed: true, url: 'amqp://guest:guest@127.0.0.1:5673/'}\n"
    assert yaml_error(tmp_path, managed).startswith("broker.url: give broker.url or broker.managed, not both")
    classes = head + "consumers: [{name: c, egress: {classes: {high: [5, 255], low: [[2, 4], [0, 0]], mid: 1}}}]\n"
    assert "listed before it" in yaml_error(tmp_path, classes)
