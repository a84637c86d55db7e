"""Each scenario field is declared once, on its dataclass field (loadgen/scenario/fields.py): the YAML
layout, the loader and to_dict all follow from that declaration and list no field of their own."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from loadgen.scenario.fields import declared
from loadgen.scenario.model import YAML_LAYOUT, ConsumerGroup, ProducerGroup
from tests.unit.scenario_files import load

DECLARED = {"producer": ProducerGroup, "consumer": ConsumerGroup}

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
     codel: {target_ms: 5, interval_ms: 100}, leave: crash, egress: {}}
"""


@pytest.mark.parametrize("section", DECLARED)
def test_every_dataclass_field_has_a_yaml_declaration(section):
    cls = DECLARED[section]
    missing = [f.name for f in dataclasses.fields(cls) if "yaml" not in f.metadata]
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
        assert set(given) == set(YAML_LAYOUT[section]) - {"replay"}  # replay excludes rate and more
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
