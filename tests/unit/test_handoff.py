"""`sojourn run` hands the Locust child the scenario it resolved (loadgen.run.handoff): run.json in the
run directory, status `starting`, the broker URL with its password in the environment only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.run import handoff
from loadgen.run.runinfo import read_run_json, write_run_json
from loadgen.scenario import ScenarioError, load_scenario

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios/quickstart.yaml"
SECRET_URL = "amqp://u:secret@h:5672/"
PRIVATE = "amqp://guest:guest@127.0.0.1:5999/"


def test_the_child_takes_over_the_scenario_the_command_resolved(tmp_path):
    scenario = load_scenario(QUICKSTART, ["consumers.main.prefetch=7"], env={"SOJOURN_AMQP_URL": SECRET_URL})
    environ = handoff.hand_over(str(tmp_path), scenario)
    assert environ == {handoff.RUN_JSON_ENV: str(tmp_path / "run.json"), handoff.BROKER_URL_ENV: SECRET_URL}
    on_disk = (tmp_path / "run.json").read_text()
    assert "secret" not in on_disk
    assert json.loads(on_disk)["status"] == "starting" and handoff.never_started(str(tmp_path))
    taken = handoff.take_over(environ)
    assert environ == {}  # both taken out: the child's own children do not inherit the password
    assert taken == scenario and taken.broker.url == SECRET_URL
    assert (taken.source_path, taken.overrides) == (str(QUICKSTART), ("consumers.main.prefetch=7",))


def test_without_the_variables_the_child_reads_its_own_scenario():
    environ = {"OTHER": "1"}
    assert handoff.take_over(environ) is None and environ == {"OTHER": "1"}


def test_run_json_without_the_url_is_an_error(tmp_path):
    handoff.hand_over(str(tmp_path), load_scenario(QUICKSTART, env={}))
    with pytest.raises(ScenarioError, match=handoff.BROKER_URL_ENV):
        handoff.take_over({handoff.RUN_JSON_ENV: str(tmp_path / "run.json")})


@pytest.mark.parametrize(
    "scenario",
    [
        load_scenario(QUICKSTART, ["broker.url=amqp://u:secret@h:5672/"], env={}),
        load_scenario(QUICKSTART, env={}).with_broker_url(PRIVATE),  # a private node standing in
        load_scenario(REPO / "scenarios/replay-burst.yaml", env={}),
        load_scenario(REPO / "scenarios/producer-flow-control.yaml", env={}),
    ],
    ids=["url", "stand-in", "replay", "managed"],
)
def test_run_json_written_by_the_child_is_the_one_the_command_would_write(tmp_path, scenario):
    """The child writes run.json when the run starts, from the scenario it took over: the same
    document as from the command's own scenario (the password masked in both)."""
    taken = handoff.take_over(handoff.hand_over(str(tmp_path / "child"), scenario))
    for run_dir, s in ((tmp_path / "child", taken), (tmp_path / "command", scenario)):
        write_run_json(str(run_dir), s, run_id="r", t0_ns=1, status="running")
    assert read_run_json(str(tmp_path / "child")) == read_run_json(str(tmp_path / "command"))


def test_a_stand_in_url_is_as_a_broker_url_override_gives_it():
    stood_in = load_scenario(QUICKSTART, ["run.warmup_s=1"], env={}).with_broker_url(PRIVATE)
    overridden = load_scenario(QUICKSTART, ["run.warmup_s=1", f"broker.url={PRIVATE}"], env={})
    assert stood_in == overridden and stood_in.overrides == overridden.overrides
    assert stood_in.broker.url_is_default is overridden.broker.url_is_default is False


def test_a_run_that_never_started_leaves_no_run_json(tmp_path):
    scenario = load_scenario(QUICKSTART, env={})
    handoff.hand_over(str(tmp_path), scenario)
    handoff.withdraw(str(tmp_path))
    assert not (tmp_path / "run.json").exists()
    handoff.hand_over(str(tmp_path), scenario)
    write_run_json(str(tmp_path), scenario, run_id="r", t0_ns=1, status="running")  # the child started it
    handoff.withdraw(str(tmp_path))
    assert read_run_json(str(tmp_path))["status"] == "running"
    handoff.withdraw(str(tmp_path / "elsewhere"))  # no run.json at all: nothing to do


def _import_locustfile(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Import the locustfile in a child as Locust does, with `argv`: what it took for its scenario."""
    script = (
        "import os, sys\n"
        f"sys.argv = {['locust', *argv]!r}\n"
        "import loadgen.locustfile as lf\n"
        "s = lf.SCENARIO\n"
        "print(s.source_path, s.broker.url, s.consumer('main').prefetch, lf.USER_COUNT,\n"
        f"      os.environ.get({handoff.BROKER_URL_ENV!r}, '-'))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOJOURN_")}
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120, env={**clean, **env}
    )


def test_the_locustfile_started_by_sojourn_run_reads_run_json(tmp_path):
    scenario = load_scenario(QUICKSTART, ["consumers.main.prefetch=7"], env={"SOJOURN_AMQP_URL": SECRET_URL})
    out = _import_locustfile(["--headless", "--run-dir", str(tmp_path)], handoff.hand_over(str(tmp_path), scenario))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(QUICKSTART), SECRET_URL, "7", str(scenario.participant_count()), "-"]


def test_the_locustfile_run_by_hand_reads_its_scenario_file():
    out = _import_locustfile(["--scenario", "scenarios/quickstart.yaml", "--set", "consumers.main.prefetch=9"], {})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:3] == ["scenarios/quickstart.yaml", "amqp://guest:guest@127.0.0.1:5672/", "9"]


def test_the_locustfile_names_run_json_and_the_field_when_it_fails_a_check(tmp_path):
    env = handoff.hand_over(str(tmp_path), load_scenario(QUICKSTART, env={}))
    data = json.loads((tmp_path / "run.json").read_text())
    data["scenario"]["consumers"][0]["prefetch"] = -1
    (tmp_path / "run.json").write_text(json.dumps(data))
    out = _import_locustfile(["--headless"], env)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"error: {tmp_path / 'run.json'}: scenario.consumers[0].prefetch: expected an integer between 0 and 65535, "
        "got -1"
    )
