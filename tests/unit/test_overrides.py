"""`--set PATH=VALUE`: addressing, YAML values, validation as if the file said it, error wording."""

from __future__ import annotations

import pathlib

import pytest

from loadgen.scenario import Processing, ScenarioError, load_scenario

BASE = """\
name: t
queue:
  name: q
run:
  duration_s: 60
producers:
  - name: main
    rate: 10
consumers:
  - name: main
    prefetch: 20
  - name: eu.west
    prefetch: 30
timeline:
  - name: slow
    start_s: 30
    set:
      consumers.main.processing_ms: 40
slo:
  - "sojourn_ms.p99 < 200"
"""


@pytest.fixture
def scenario_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "x.yaml"
    path.write_text(BASE)
    return path


def load(path, *overrides):
    return load_scenario(path, overrides, env={})


def error(path, *overrides) -> str:
    with pytest.raises(ScenarioError) as info:
        load(path, *overrides)
    text = str(info.value)
    assert text.startswith(f"{path}: ")
    return text[len(f"{path}: ") :]


@pytest.mark.parametrize(
    "override",
    [
        "consumers[0].prefetch=51",
        "consumers.0.prefetch=51",
        "consumers.main.prefetch=51",
    ],
)
def test_list_items_are_addressed_by_index_or_by_name(scenario_file, override):
    s = load(scenario_file, override)
    assert [c.prefetch for c in s.consumers] == [51, 30]


def test_group_names_with_dots_are_addressed_by_name(scenario_file):
    assert load(scenario_file, "consumers.eu.west.prefetch=7").consumer("eu.west").prefetch == 7


@pytest.mark.parametrize(
    "override, read",
    [
        ("run.duration_s=45.5", lambda s: s.run.duration_s == 45.5),
        ("queue.durable=true", lambda s: s.queue.durable is True),
        ("producers.main.routing_key=null", lambda s: s.producers[0].routing_key == "q"),
        (
            "consumers.main.processing_ms={distribution: exponential, mean_ms: 4}",
            lambda s: s.consumer("main").processing == Processing.exponential(4),
        ),
        (
            "slo=[messages.unaccounted == 0, sojourn_ms.p50 < 10]",
            lambda s: s.slo == ("messages.unaccounted == 0", "sojourn_ms.p50 < 10"),
        ),
        ("slo[0]=sojourn_ms.p99 < 500", lambda s: s.slo == ("sojourn_ms.p99 < 500",)),
        ("description=a  quick try", lambda s: s.description == "a  quick try"),
    ],
)
def test_values_are_read_as_yaml(scenario_file, override, read):
    assert read(load(scenario_file, override))


def test_keys_missing_from_the_file_can_be_set(scenario_file):
    s = load(scenario_file, "run.warmup_s=2", "queue.arguments.x-max-length=1000", "broker.heartbeat_s=0")
    assert s.run.warmup_s == 2.0
    assert dict(s.queue.arguments) == {"x-max-length": 1000}
    assert s.broker.heartbeat_s == 0


def test_a_phase_setting_can_be_overridden_in_any_spelling(scenario_file):
    s = load(scenario_file, "timeline.slow.set.consumers[0].processing_ms=80")
    assert s.timeline[0].set == (("consumers.main.processing_ms", Processing.fixed(80)),)


def test_a_phase_can_gain_a_setting(scenario_file):
    s = load(scenario_file, "timeline[0].set.producers.main.rate=0")
    assert s.at(45).producer("main").rate == 0.0


def test_later_overrides_win(scenario_file):
    assert load(scenario_file, "consumers.main.count=2", "consumers.main.count=3").consumer("main").count == 3


def test_scenario_records_the_overrides_as_given(scenario_file):
    assert load(scenario_file, "run.warmup_s=2").overrides == ("run.warmup_s=2",)


def test_a_nested_mapping_can_be_edited_in_place(scenario_file):
    s = load(
        scenario_file,
        "consumers.main.processing_ms={distribution: lognormal, median_ms: 4, sigma: 1}",
        "consumers.main.processing_ms.sigma=0.5",
    )
    assert s.consumer("main").processing == Processing.lognormal(4, 0.5)


def test_the_recorded_distributions_default_can_be_set_alone(scenario_file):
    s = load(
        scenario_file,
        "consumers.main.processing_ms={distribution: recorded, default_ms: 2}",
        "consumers.main.processing_ms.default_ms=5",
    )
    assert s.consumer("main").processing == Processing("recorded", (("default_ms", 5.0),))


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            ["consumers.main.prefech=3"],
            "--set consumers.main.prefech=3: unknown key 'prefech' (did you mean 'prefetch'?)",
        ),
        (["runn.duration_s=3"], "--set runn.duration_s=3: unknown key 'runn' (did you mean 'run'?)"),
        (
            ["consumers.mian.prefetch=3"],
            "--set consumers.mian.prefetch=3: no consumer group named 'mian' (did you mean 'main'?)",
        ),
        (
            ["consumers.nobody.prefetch=3"],
            "--set consumers.nobody.prefetch=3: no consumer group named 'nobody' (known: main, eu.west)",
        ),
        (
            ["consumers[5].prefetch=3"],
            "--set consumers[5].prefetch=3: index 5 is out of range: consumers has 2 entries",
        ),
        (
            ["consumers.main.prefetch"],
            "--set consumers.main.prefetch: expected PATH=VALUE, e.g. consumers.main.prefetch=50",
        ),
        (["=3"], "--set =3: the path before '=' is empty, e.g. consumers.main.prefetch=50"),
        (
            ["consumers.main.prefetch=-3"],
            "--set consumers.main.prefetch=-3: expected an integer between 0 and 65535, got -3",
        ),
        (
            ["producers.main.arrival=poison"],
            "--set producers.main.arrival=poison: expected one of constant, poisson, got 'poison' "
            "(did you mean 'poisson'?)",
        ),
        (["run.duration_s=yes"], "--set run.duration_s=yes: expected a number > 0, got true"),
        (
            ["run.duration_s.x=1"],
            "--set run.duration_s.x=1: run.duration_s is a single value; there is nothing below it",
        ),
        (
            ["consumers.main.processing_ms.mean_ms=3"],
            "--set consumers.main.processing_ms.mean_ms=3: consumers[0].processing_ms is not set "
            "(set the whole value, e.g. consumers[0].processing_ms={distribution: exponential, mean_ms: 4})",
        ),
        (
            ["consumers.main.processing_ms=4", "consumers.main.processing_ms.mean_ms=3"],
            "--set consumers.main.processing_ms.mean_ms=3: consumers[0].processing_ms is 4, not a mapping "
            "(set the whole value, e.g. consumers[0].processing_ms={distribution: exponential, mean_ms: 4})",
        ),
        (["run=[1]"], "--set run=[1]: expected a mapping, got [1]"),
        (
            ["consumers=[{name: a}]", "consumers.a.prefetch.x=1"],
            "--set consumers.a.prefetch.x=1: consumers[0].prefetch is a single value; there is nothing below it",
        ),
        (
            ["consumers.main={name: main, prefech: 3}"],
            "--set consumers.main={name: main, prefech: 3}: consumers[0].prefech: unknown key "
            "(did you mean 'prefetch'?)",
        ),
        (
            ["timeline.slow.set.consumers.main.ack_mode=auto"],
            "--set timeline.slow.set.consumers.main.ack_mode=auto: can not be changed by a phase "
            "(a phase may set consumers.<group>.{count, processing_ms, prefetch, leave, outcomes})",
        ),
        (["slo.first=x < 1"], "--set slo.first=x < 1: slo entries are addressed by index, e.g. slo[0], not 'first'"),
        (["run.duration_s={a: [}"], None),
    ],
)
def test_override_errors_name_the_override(scenario_file, overrides, expected):
    text = error(scenario_file, *overrides)
    if expected is None:
        assert text.startswith("--set run.duration_s={a: [}: the value is not valid YAML")
    else:
        assert text == expected


def test_override_errors_carry_the_yaml_path_and_the_override(scenario_file):
    with pytest.raises(ScenarioError) as info:
        load(scenario_file, "consumers.main.prefech=3")
    err = info.value
    assert (err.yaml_path, err.value, err.override) == ("consumers[0].prefech", 3, "consumers.main.prefech=3")


def test_an_override_that_breaks_another_field_reports_that_field(scenario_file):
    # warmup_s is not set by the override, so the error points at the file's path
    text = error(scenario_file, "run.warmup_s=10", "run.duration_s=5")
    assert text == "--set run.warmup_s=10: expected a number >= 0 and < run.duration_s (5), got 10"


def test_an_override_password_is_masked_in_errors(scenario_file):
    text = error(scenario_file, "broker.url=http://me:hunter2@host/")
    assert "hunter2" not in text
    assert text.startswith("--set broker.url=http://me:****@host/: expected an amqp:// or amqps:// URL")


def test_a_single_string_is_taken_as_one_override(scenario_file):
    assert load_scenario(scenario_file, "run.warmup_s=2", env={}).run.warmup_s == 2.0
