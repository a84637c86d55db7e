"""Each scenario field is declared once, on its dataclass field (loadgen/scenario/fields.py): the YAML
layout, the loader and to_dict all follow from that declaration and list no field of their own.
A `processing_ms` mapping's keys depend on its distribution: PROCESSING_PARAMS declares them."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from loadgen.scenario.fields import declared, written
from loadgen.scenario.model import (
    PROCESSING_PARAMS,
    YAML_LAYOUT,
    BindingSpec,
    Broker,
    Bursts,
    CoDelSpec,
    ConsumerGroup,
    EgressSpec,
    ExchangeSpec,
    FrozenMapping,
    HandlerSpec,
    LinkSpec,
    ManagedSpec,
    NetworkSpec,
    OutcomeRates,
    Phase,
    ProducerGroup,
    QueueSpec,
    ReplaySpec,
    RunSpec,
    Scenario,
)
from tests.unit.scenario_files import load

DECLARED = {
    "producer": ProducerGroup,
    "consumer": ConsumerGroup,
    "bursts": Bursts,
    "replay": ReplaySpec,
    "codel": CoDelSpec,
    "egress": EgressSpec,
    "outcomes": OutcomeRates,
    "handler": HandlerSpec,
    "run": RunSpec,
    "network": NetworkSpec,
    "link": LinkSpec,
    "exchange": ExchangeSpec,
    "binding": BindingSpec,
    "broker": Broker,
    "managed": ManagedSpec,
    "queue": QueueSpec,
    "scenario": Scenario,
    "phase": Phase,
}
# Broker: whether anything gave the URL, set by the loader; Scenario: where it came from
NOT_FROM_YAML = {"url_is_default", "source_path", "overrides"}

EVERY_KEY = """
name: t
queue: {name: q}
run: {duration_s: 10}
producers:
  - {name: p, count: 2, rate: 5, arrival: poisson, size_bytes: 10, persistent: true, confirms: false,
     confirm_window: 3, exchange: "", routing_key: k, bursts: {on_s: 1, off_s: 2}, mandatory: true,
     priority: 3, max_blocked_wait_s: 1}
consumers:
  - {name: c, count: 2, prefetch: 3, prefetch_scope: channel, ack_mode: manual, processing_ms: 4,
     codel: {target_ms: 5, interval_ms: 100}, leave: crash, egress: {},
     outcomes: {requeue: 0.1, discard: 0.1, reject: 0.1, seed: 1}}
"""


@pytest.mark.parametrize("section", DECLARED)
def test_every_dataclass_field_has_a_yaml_declaration(section):
    cls = DECLARED[section]
    missing = [f.name for f in dataclasses.fields(cls) if "yaml" not in f.metadata and f.name not in NOT_FROM_YAML]
    assert not missing, f"{cls.__name__} fields without field(metadata=yaml(...)): {missing}"


@pytest.mark.parametrize("section", DECLARED)
def test_every_yaml_key_is_a_declared_field_in_field_order(section):
    keys = [spec.key for _, spec in declared(DECLARED[section])]
    assert list(YAML_LAYOUT[section]) == keys


def test_the_loader_reads_and_to_dict_writes_every_declared_key_in_order(tmp_path):
    scenario = load(tmp_path, EVERY_KEY)
    every = scenario.to_dict()
    for section, kind in (("producer", "producers"), ("consumer", "consumers")):
        assert list(every[kind][0]) == list(YAML_LAYOUT[section])
        given = yaml.safe_load(EVERY_KEY)[kind][0]
        # replay excludes rate and more; a handler excludes processing_ms, codel, egress and outcomes;
        # offset needs a stream, which excludes codel, egress, outcomes and leave: crash
        assert set(given) == set(YAML_LAYOUT[section]) - {"replay", "handler", "offset"}
    group = scenario.producers[0]
    assert (group.count, group.arrival, group.confirm_window, group.routing_key, group.priority) == (
        2,
        "poisson",
        3,
        "k",
        ((3, 1.0),),
    )
    assert scenario.consumers[0].processing.mean_ms == 4.0 and scenario.consumers[0].leave == "crash"


def test_a_declared_default_is_the_value_of_an_absent_key(tmp_path):
    scenario = load(tmp_path, "name: t\nqueue: {name: q}\nrun: {duration_s: 10}\nproducers: [{name: p, rate: 1}]\n")
    group = scenario.producers[0]
    for attr, spec in declared(ProducerGroup):
        if attr not in ("name", "rate", "routing_key"):  # given; routing_key None is the queue's name
            assert getattr(group, attr) == spec.default, attr
    assert group.routing_key == "q"


# A mapping checked as one value (bursts, codel, egress) reads each declared key; absent, its default.
NESTED = """
name: t
queue: {name: q}
run: {duration_s: 10}
producers:
  - {name: p, rate: 5, bursts: {on_s: 1, off_s: 2, off_rate: 3, start_s: 4}}
  - {name: d, rate: 5, bursts: {on_s: 1, off_s: 2}}
consumers:
  - {name: c, codel: {target_ms: 5, interval_ms: 100, requeue: false},
     egress: {max_depth_units: 7, min_burst: 2, classes: {high: [5, 255], low: default}}}
  - {name: d, codel: {target_ms: 5, interval_ms: 100}, egress: {classes: null}}
"""


def test_nested_values_read_and_write_every_declared_key_in_order(tmp_path):
    scenario = load(tmp_path, NESTED)
    every = scenario.to_dict()
    given = yaml.safe_load(NESTED)
    for section, kind, i in (("bursts", "producers", 0), ("codel", "consumers", 0), ("egress", "consumers", 0)):
        assert list(every[kind][i][section]) == list(YAML_LAYOUT[section])
        assert set(given[kind][i][section]) == set(YAML_LAYOUT[section])
    assert scenario.producers[0].bursts == Bursts(1.0, 2.0, 3.0, 4.0)
    assert scenario.consumers[0].codel == CoDelSpec(5.0, 100.0, False)
    assert scenario.consumers[0].egress == EgressSpec(7, 2, (("high", ((5, 255),)), ("low", ((0, 4),))))


def test_nested_defaults_are_the_declared_ones(tmp_path):
    scenario = load(tmp_path, NESTED)
    defaults = {attr: spec.default for attr, spec in declared(Bursts)}
    assert scenario.producers[1].bursts == Bursts(**{**defaults, "on_s": 1.0, "off_s": 2.0})
    assert scenario.consumers[1].codel.requeue is dict(declared(CoDelSpec))["requeue"].default is True
    assert scenario.consumers[1].egress == EgressSpec()  # classes: null is the declared default too


def test_the_replay_path_check_is_supplied_by_the_loader():
    checks = {attr: spec.check for attr, spec in declared(ReplaySpec)}
    assert checks.pop("path") is None and all(checks.values())


SECTIONS = """
name: t
queue: {name: q}
run: {duration_s: 10, warmup_s: 1, drain_timeout_s: 2, beyond_limits: true}
network:
  listen_port: 5999
  upstream: {latency_ms: 1, jitter_ms: 2, bandwidth_bytes_per_s: 3}
  downstream: {latency_ms: 4}
  down: true
  reset_peer: true
"""


def test_run_and_network_read_and_write_every_declared_key_in_order(tmp_path):
    scenario = load(tmp_path, SECTIONS)
    every, given = scenario.to_dict(), yaml.safe_load(SECTIONS)
    for section in ("run", "network"):
        assert list(every[section]) == list(given[section]) == list(YAML_LAYOUT[section])
    assert list(every["network"]["upstream"]) == list(given["network"]["upstream"]) == list(YAML_LAYOUT["link"])
    assert scenario.run == RunSpec(10.0, 1.0, 2.0, True)
    assert scenario.network == NetworkSpec(5999, LinkSpec(1.0, 2.0, 3.0), LinkSpec(4.0, 0.0, None), True, True)


def test_run_and_network_defaults_are_the_declared_ones(tmp_path):
    scenario = load(tmp_path, "name: t\nqueue: {name: q}\nrun: {duration_s: 10}\nnetwork: {}\n")
    for cls, value in ((RunSpec, scenario.run), (NetworkSpec, scenario.network)):
        for attr, spec in declared(cls):
            if spec.layout == "link":
                assert getattr(value, attr) == LinkSpec(*(s.default for _, s in declared(LinkSpec))), attr
            elif attr != "duration_s":
                assert getattr(value, attr) == spec.default, attr
    assert scenario.network.upstream == LinkSpec.unimpaired()


TOPOLOGY = """
name: t
queue: {name: q}
run: {duration_s: 10}
exchanges:
  - {name: x, type: headers, durable: false, auto_delete: true, arguments: {a: 1}, delete_on_end: true}
  - {name: y, type: topic}
bindings:
  - {exchange: x, routing_key: k, arguments: {x-match: any}}
  - {exchange: y}
"""


def test_exchanges_and_bindings_read_and_write_every_declared_key_in_order(tmp_path):
    scenario = load(tmp_path, TOPOLOGY)
    every, given = scenario.to_dict(), yaml.safe_load(TOPOLOGY)
    for kind, section in (("exchanges", "exchange"), ("bindings", "binding")):
        assert list(every[kind][0]) == list(given[kind][0]) == list(YAML_LAYOUT[section])
    assert scenario.exchanges[0] == ExchangeSpec("x", "headers", False, True, FrozenMapping({"a": 1}), True)
    assert scenario.bindings[0] == BindingSpec("x", "k", FrozenMapping({"x-match": "any"}))
    for value, given_keys in ((scenario.exchanges[1], ("name", "type")), (scenario.bindings[1], ("exchange",))):
        for attr, spec in declared(type(value)):
            if attr not in given_keys:
                assert getattr(value, attr) == spec.default, attr


def test_broker_and_managed_read_and_write_every_declared_key_in_order(tmp_path):
    text = "name: t\nqueue: {name: q}\nrun: {duration_s: 10}\n"
    text += "broker: {heartbeat_s: 7, connect_timeout_s: 2, managed: %s}\n"
    every = load(tmp_path, text % "{port: 5999, settings: {a: 1}, keep: true}").to_dict(mask_password=False)
    assert list(every["broker"]) == list(YAML_LAYOUT["broker"])
    assert every["broker"]["managed"] == {"port": 5999, "settings": {"a": 1}, "keep": True}
    assert list(every["broker"]["managed"]) == list(YAML_LAYOUT["managed"])
    broker = load(tmp_path, text % "true").broker
    assert (broker.url, broker.heartbeat_s, broker.connect_timeout_s) == ("amqp://guest:guest@127.0.0.1:5673/", 7, 2.0)
    assert broker.managed == ManagedSpec(*(spec.default for _, spec in declared(ManagedSpec)))
    assert dict(declared(ManagedSpec))["port"].default == 5673


def test_broker_defaults_are_the_declared_ones(tmp_path):
    broker = load(tmp_path, "name: t\nqueue: {name: q}\nrun: {duration_s: 10}\n").broker
    for attr, spec in declared(Broker):
        assert getattr(broker, attr) == spec.default, attr
    assert broker.url_is_default


def test_network_paths_are_the_declared_leaves_in_field_order():
    from loadgen.scenario.model import NETWORK_PATHS

    links = [f"{link}.{key}" for link in ("upstream", "downstream") for key in YAML_LAYOUT["link"]]
    assert ("listen_port", *links, "down", "reset_peer") == NETWORK_PATHS


def test_written_after_moves_a_key_in_to_dict_only():
    from loadgen.scenario.fields import layout, plain_dict, yaml as declare

    @dataclasses.dataclass(frozen=True)
    class Section:
        a: int = dataclasses.field(metadata=declare(None))
        pairs: tuple = dataclasses.field(metadata=declare(None, layout="{}"))
        c: int = dataclasses.field(metadata=declare(None, written_after="a"))

    assert list(layout(Section)) == ["a", "pairs", "c"]
    assert [spec.key for _, spec in written(Section)] == ["a", "c", "pairs"]
    plain = plain_dict(Section(1, (("k", (2,)),), 3))
    assert plain == {"a": 1, "c": 3, "pairs": {"k": [2]}} and list(plain) == ["a", "c", "pairs"]


QUEUE = """
name: t
queue: {name: q, type: classic, durable: true, auto_delete: true, arguments: {x-max-length: 5},
        purge_on_start: false, delete_on_end: true}
run: {duration_s: 10}
"""


def test_the_queue_reads_and_writes_every_declared_key(tmp_path):
    scenario = load(tmp_path, QUEUE)
    every, given = scenario.to_dict()["queue"], yaml.safe_load(QUEUE)["queue"]
    assert list(every) == [spec.key for _, spec in written(QueueSpec)]
    assert set(every) == set(given) == set(YAML_LAYOUT["queue"])
    assert scenario.queue == QueueSpec("q", True, True, FrozenMapping({"x-max-length": 5}), False, True, type="classic")


def test_the_queue_keeps_the_orders_it_has_always_had():
    """The layout (and its error messages) list `type` second; run.json has it last."""
    assert list(YAML_LAYOUT["queue"]) == [
        *("name", "type", "durable", "auto_delete", "arguments", "purge_on_start", "delete_on_end")
    ]
    assert [spec.key for _, spec in written(QueueSpec)] == [
        *("name", "durable", "auto_delete", "arguments", "purge_on_start", "delete_on_end", "type")
    ]


def test_the_queue_defaults_are_the_declared_ones(tmp_path):
    queue = load(tmp_path, "name: t\nqueue: {name: q}\nrun: {duration_s: 10}\n").queue
    for attr, spec in declared(QueueSpec):
        if attr != "name":
            assert getattr(queue, attr) == spec.default, attr
    quorum = load(tmp_path, "name: t\nqueue: {name: q, type: quorum}\nrun: {duration_s: 10}\n").queue
    assert quorum.durable is True  # the declared default is a classic queue's: read_queue gives quorum's


EVERY_SECTION = """
name: t
description: d
broker: {url: "amqp://u:secret@h:5672/", heartbeat_s: 7, connect_timeout_s: 2}
queue: {name: q}
run: {duration_s: 10}
producers: [{name: p, rate: 5}]
consumers: [{name: c}]
timeline:
  - {name: a, start_s: 1, end_s: 2, set: {consumers.c.count: 2}}
slo: ["sojourn_ms.p99 < 200"]
network: {}
exchanges: [{name: x, type: topic}]
bindings: [{exchange: x}]
"""


def test_the_top_level_and_a_phase_read_and_write_every_declared_key(tmp_path):
    scenario = load(tmp_path, EVERY_SECTION)
    every, given = scenario.to_dict(), yaml.safe_load(EVERY_SECTION)
    for section, cls, value, given_value in (
        ("scenario", Scenario, every, given),
        ("phase", Phase, every["timeline"][0], given["timeline"][0]),
    ):
        assert list(value) == [spec.key for _, spec in written(cls)], section
        assert set(value) == set(given_value) == set(YAML_LAYOUT[section]), section
    assert (scenario.name, scenario.description, scenario.slo) == ("t", "d", ("sojourn_ms.p99 < 200",))
    assert scenario.timeline == (Phase("a", 1.0, 2.0, (("consumers.c.count", 2),)),)
    assert every["timeline"][0]["set"] == {"consumers.c.count": 2}
    assert every["broker"]["url"] == "amqp://u:****@h:5672/"
    assert scenario.to_dict(mask_password=False)["broker"]["url"] == "amqp://u:secret@h:5672/"


def test_the_top_level_keeps_the_orders_it_has_always_had():
    """The layout (and its error messages) list exchanges and bindings last; run.json has them after
    the queue."""
    assert list(YAML_LAYOUT["scenario"]) == [
        *("name", "description", "broker", "queue", "run", "producers", "consumers", "timeline", "slo"),
        *("network", "exchanges", "bindings"),
    ]
    assert [spec.key for _, spec in written(Scenario)] == [
        *("name", "description", "broker", "queue", "exchanges", "bindings", "run", "producers", "consumers"),
        *("timeline", "slo", "network"),
    ]


def test_the_top_level_and_phase_defaults_are_the_declared_ones(tmp_path):
    text = "name: t\nqueue: {name: q}\nrun: {duration_s: 10}\ntimeline: [{name: a, start_s: 1}]\n"
    scenario = load(tmp_path, text)
    for attr, spec in declared(Scenario):
        if attr not in ("name", "queue", "run", "timeline", "broker"):  # given, or a section read whole
            assert getattr(scenario, attr) == spec.default, attr
    phase = dict(declared(Phase))
    assert phase["end_s"].default is None and scenario.timeline[0].end_s == 10.0  # None: the run's end
    assert scenario.timeline[0].set == phase["set"].default == ()
    assert load(tmp_path, text + "description: null\nslo: null\n").to_dict()["description"] == ""


PROCESSING = """
name: t
queue: {name: q}
run: {duration_s: 10}
consumers:
  - {name: fixed, processing_ms: {distribution: fixed, ms: 1}}
  - {name: exponential, processing_ms: {distribution: exponential, mean_ms: 1}}
  - {name: lognormal, processing_ms: {distribution: lognormal, median_ms: 1, sigma: 1}}
  - {name: uniform, processing_ms: {distribution: uniform, min_ms: 1, max_ms: 1}}
  - {name: recorded, processing_ms: {distribution: recorded, default_ms: 1}}
"""


def test_processing_layout_and_to_dict_follow_processing_params(tmp_path):
    scenario = load(tmp_path, PROCESSING)
    assert [g.name for g in scenario.consumers] == list(PROCESSING_PARAMS)  # one group per distribution
    keys = set()
    for distribution, params in PROCESSING_PARAMS.items():
        written_keys = list(scenario.consumer(distribution).to_dict()["processing_ms"])
        assert written_keys == ["distribution", *params]
        keys.update(written_keys)
    assert list(YAML_LAYOUT["processing"]) == ["distribution", *(k for ps in PROCESSING_PARAMS.values() for k in ps)]
    assert set(YAML_LAYOUT["processing"]) == keys
