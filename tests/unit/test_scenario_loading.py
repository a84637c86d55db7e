"""Loading valid scenarios: defaults, processing distributions, broker URL precedence, round trip."""

from __future__ import annotations

import dataclasses
import math
import pathlib
import pickle
import random
import textwrap

import pytest
import yaml

from loadgen.scenario import (
    Broker,
    ConsumerGroup,
    Phase,
    Processing,
    ProducerGroup,
    QueueSpec,
    RunSpec,
    Scenario,
    load_scenario,
)

REPO = pathlib.Path(__file__).resolve().parents[2]

MINIMAL = """\
name: minimal
queue:
  name: q.min
run:
  duration_s: 10
producers:
  - name: main
    rate: 50
consumers:
  - name: main
"""


def write(tmp_path: pathlib.Path, text: str, name: str = "s.yaml") -> pathlib.Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_minimal_scenario_gets_every_documented_default(tmp_path):
    s = load_scenario(write(tmp_path, MINIMAL), env={})
    assert s.name == "minimal"
    assert s.description == ""
    assert s.broker == Broker("amqp://guest:guest@127.0.0.1:5672/", 30, 5.0)
    assert s.queue == QueueSpec("q.min", False, False, {}, None, False)  # purge_on_start: absent (broker_side)
    assert s.run == RunSpec(10.0, 0.0, 30.0)
    assert s.producers == (ProducerGroup("main", 1, 50.0, "constant", 100, False, True, 100, "", "q.min"),)
    assert s.consumers == (ConsumerGroup("main", 1, 100, "consumer", "manual", Processing.fixed(0)),)
    assert s.timeline == ()
    assert s.slo == ()
    assert s.network is None


def test_the_model_is_frozen_and_uses_tuples(tmp_path):
    s = load_scenario(write(tmp_path, MINIMAL), env={})
    assert isinstance(s.producers, tuple) and isinstance(s.consumers, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.run.duration_s = 5  # type: ignore[misc]


def test_a_scenario_survives_pickling_for_worker_processes(tmp_path):
    s = load_scenario(REPO / "scenarios" / "slow-processing.yaml", env={})
    s.at(25)  # fill the per-phase memo first
    again = pickle.loads(pickle.dumps(s))
    assert again == s
    assert again.at(25).producer("main").rate == 30.0 and again.at(40).producer("main").rate == 100.0


def test_source_path_is_recorded_and_path_like_accepted(tmp_path):
    path = write(tmp_path, MINIMAL)
    assert load_scenario(path, env={}).source_path == str(path)


def test_queue_arguments_are_read_only_but_convert_to_a_dict(tmp_path):
    text = MINIMAL.replace(
        "  name: q.min\n", "  name: q.min\n  arguments: {x-max-length: 1000, x-overflow: reject-publish}\n"
    )
    q = load_scenario(write(tmp_path, text), env={}).queue
    assert dict(q.arguments) == {"x-max-length": 1000, "x-overflow": "reject-publish"}
    assert q.arguments["x-max-length"] == 1000
    with pytest.raises(TypeError):
        q.arguments["x-max-length"] = 5  # type: ignore[index]


def test_explicit_routing_key_and_exchange_are_kept(tmp_path):
    text = MINIMAL.replace("    rate: 50\n", "    rate: 50\n    exchange: amq.direct\n    routing_key: rk\n")
    p = load_scenario(write(tmp_path, text), env={}).producers[0]
    assert (p.exchange, p.routing_key) == ("amq.direct", "rk")


def test_empty_lists_written_as_null_mean_none(tmp_path):
    text = "name: x\nqueue: {name: q}\nrun: {duration_s: 5}\nproducers:\nconsumers:\ntimeline:\nslo:\n"
    s = load_scenario(write(tmp_path, text), env={})
    assert (s.producers, s.consumers, s.timeline, s.slo) == ((), (), (), ())


def test_group_names_may_contain_dots(tmp_path):
    text = MINIMAL.replace("consumers:\n  - name: main", "consumers:\n  - name: eu.west-1_a")
    assert load_scenario(write(tmp_path, text), env={}).consumer("eu.west-1_a").count == 1


def test_producer_and_consumer_lookup_by_name(tmp_path):
    s = load_scenario(write(tmp_path, MINIMAL), env={})
    assert s.producer("main").rate == 50.0
    with pytest.raises(KeyError):
        s.consumer("nope")


# ---- processing_ms forms


@pytest.mark.parametrize(
    "text, expected, mean",
    [
        ("4", Processing("fixed", (("ms", 4.0),)), 4.0),
        ("{distribution: fixed, ms: 2.5}", Processing("fixed", (("ms", 2.5),)), 2.5),
        ("{distribution: exponential, mean_ms: 4}", Processing("exponential", (("mean_ms", 4.0),)), 4.0),
        (
            "{distribution: lognormal, median_ms: 4, sigma: 0.5}",
            Processing("lognormal", (("median_ms", 4.0), ("sigma", 0.5))),
            4 * math.exp(0.125),
        ),
        (
            "{distribution: uniform, min_ms: 2, max_ms: 6}",
            Processing("uniform", (("min_ms", 2.0), ("max_ms", 6.0))),
            4.0,
        ),
    ],
)
def test_processing_forms_and_their_exact_means(tmp_path, text, expected, mean):
    yaml_text = MINIMAL.replace("  - name: main\n", "  - name: main\n", 1) + f"    processing_ms: {text}\n"
    processing = load_scenario(write(tmp_path, yaml_text), env={}).consumers[0].processing
    assert processing == expected
    assert processing.mean_ms == pytest.approx(mean)


@pytest.mark.parametrize(
    "processing, mean",
    [
        (Processing.exponential(4), 4.0),
        (Processing.lognormal(4, 0.5), 4 * math.exp(0.5**2 / 2)),
        (Processing.uniform(2, 6), 4.0),
    ],
)
def test_samples_are_never_negative_and_average_to_the_mean(processing, mean):
    rng = random.Random(7)
    samples = [processing.sample_ms(rng) for _ in range(40_000)]
    assert min(samples) >= 0
    # sd of these distributions is at most ~1.1 x mean, so 5 standard errors is ~3 % of the mean
    assert sum(samples) / len(samples) == pytest.approx(mean, rel=0.03)


def test_zero_mean_distributions_sample_zero():
    rng = random.Random(1)
    assert Processing.exponential(0).sample_ms(rng) == 0.0
    assert Processing.lognormal(0, 1).sample_ms(rng) == 0.0
    assert Processing.fixed(0).sample_ms(rng) == 0.0


# ---- broker URL precedence: --set > $SOJOURN_AMQP_URL > file > default

FILE_URL = "amqp://file:pw@file-host:5672/"
ENV = {"SOJOURN_AMQP_URL": "amqps://env:pw@env-host:5671/vh"}


def with_url(tmp_path):
    return write(tmp_path, MINIMAL + f"broker:\n  url: {FILE_URL}\n")


def test_file_url_beats_the_default(tmp_path):
    assert load_scenario(with_url(tmp_path), env={}).broker.url == FILE_URL


def test_environment_url_beats_the_file(tmp_path):
    assert load_scenario(with_url(tmp_path), env=ENV).broker.url == "amqps://env:pw@env-host:5671/vh"


def test_environment_url_applies_when_the_file_has_no_broker_section(tmp_path):
    assert load_scenario(write(tmp_path, MINIMAL), env=ENV).broker.url == "amqps://env:pw@env-host:5671/vh"


def test_empty_environment_url_is_ignored(tmp_path):
    assert load_scenario(with_url(tmp_path), env={"SOJOURN_AMQP_URL": ""}).broker.url == FILE_URL


def test_set_broker_url_beats_the_environment(tmp_path):
    s = load_scenario(with_url(tmp_path), ["broker.url=amqp://cli@cli-host/"], env=ENV)
    assert s.broker.url == "amqp://cli@cli-host/"


def test_environment_is_read_from_os_environ_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("SOJOURN_AMQP_URL", "amqp://from-os-environ/")
    assert load_scenario(with_url(tmp_path)).broker.url == "amqp://from-os-environ/"


# ---- to_dict and the round trip


def test_to_dict_masks_the_password_by_default(tmp_path):
    s = load_scenario(with_url(tmp_path), env={})
    assert s.to_dict()["broker"]["url"] == "amqp://file:****@file-host:5672/"
    assert s.to_dict(mask_password=False)["broker"]["url"] == FILE_URL


WITH_CODEL_AND_NETWORK = (
    "consumers.main.codel={target_ms: 5, interval_ms: 100, requeue: false}",
    "network={listen_port: 5673, upstream: {latency_ms: 5, jitter_ms: 1}, downstream: {bandwidth_bytes_per_s: 1000}}",
    "timeline.busy.set.network.down=true",
    "timeline.busy.set.network.downstream.bandwidth_bytes_per_s=null",
)


@pytest.mark.parametrize(
    "name, extra", [("quickstart.yaml", ()), ("slow-processing.yaml", ()), ("quickstart.yaml", WITH_CODEL_AND_NETWORK)]
)
def test_dumped_to_dict_loads_back_to_an_equal_scenario(tmp_path, name, extra):
    original = load_scenario(REPO / "scenarios" / name, ["broker.url=amqp://u:secret@h:5672/", *extra], env={})
    dumped = write(tmp_path, yaml.safe_dump(original.to_dict(mask_password=False)), "dumped.yaml")
    again = load_scenario(dumped, env={})
    assert again == original
    assert again.to_dict() == original.to_dict()


def test_equality_ignores_where_the_scenario_came_from(tmp_path):
    a = load_scenario(write(tmp_path, MINIMAL, "a.yaml"), env={})
    b = load_scenario(write(tmp_path, MINIMAL, "b.yaml"), ["consumers.main.count=1"], env={})
    assert a == b and hash(a) == hash(b)


# ---- the shipped scenarios


def test_quickstart_loads_with_the_documented_settings():
    s = load_scenario(REPO / "scenarios" / "quickstart.yaml", env={})
    assert (s.name, s.queue.name) == ("quickstart", "sojourn.quickstart")
    assert s.run == RunSpec(40.0, 5.0, 20.0)
    p = s.producer("main")
    assert (p.count, p.rate, p.arrival, p.size_bytes, p.confirms, p.confirm_window) == (
        1,
        150.0,
        "poisson",
        256,
        True,
        100,
    )
    c = s.consumer("main")
    assert (c.count, c.prefetch, c.ack_mode, c.processing) == (1, 20, "manual", Processing.exponential(4))
    assert s.timeline == (
        Phase(
            "busy",
            15.0,
            30.0,
            (("consumers.main.count", 2), ("consumers.main.processing_ms", Processing.exponential(9))),
        ),
    )
    assert s.slo == ("messages.unaccounted == 0", "sojourn_ms.p99 < 2000")


def test_slow_processing_loads_with_the_documented_settings():
    s = load_scenario(REPO / "scenarios" / "slow-processing.yaml", env={})
    assert (s.name, s.queue.name, s.run) == ("slow-processing", "sojourn.slow-processing", RunSpec(45.0, 3.0, 30.0))
    p = s.producer("main")
    assert (p.rate, p.arrival, p.size_bytes, p.confirm_window) == (270.0, "constant", 100, 200)
    c = s.consumer("main")
    assert (c.prefetch, c.ack_mode, c.processing) == (26, "manual", Processing.fixed(4))
    assert s.phase_windows() == [("slow", 20.0, 35.0), ("recovery", 35.0, 45.0)]
    assert s.at(25).consumer("main").processing == Processing.fixed(40)
    assert s.at(25).producer("main").rate == 30.0
    assert s.at(40).producer("main").rate == 100.0
    assert s.at(40).consumer("main").processing == Processing.fixed(4)


def test_scenario_is_exported_with_the_documented_fields():
    names = [f.name for f in dataclasses.fields(Scenario)]
    assert names == [
        "name",
        "description",
        "source_path",
        "overrides",
        "broker",
        "queue",
        "run",
        "producers",
        "consumers",
        "timeline",
        "slo",
        "network",
        "exchanges",
        "bindings",
    ]


# ---- the documentation stays true

DOCS = (REPO / "docs" / "scenarios.md").read_text()


def test_the_documented_complete_example_loads(tmp_path):
    example = DOCS.split("## A complete example", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    s = load_scenario(write(tmp_path, example), env={})
    assert s.name == "prefetch-51"


def test_every_schema_key_is_documented():
    from loadgen.scenario.model import YAML_LAYOUT

    missing = [f"{section}.{key}" for section, keys in YAML_LAYOUT.items() for key in keys if f"`{key}`" not in DOCS]
    assert missing == []
