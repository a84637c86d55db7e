"""broker.managed (a private node for the run) and where the broker URL came from."""

from __future__ import annotations

from loadgen.scenario import load_scenario
from tests.unit.scenario_files import error, load

BODY = "name: t\nqueue: {name: q}\nrun: {duration_s: 5}\n"


def test_a_managed_broker_sets_the_url_to_its_port(tmp_path):
    s = load(
        tmp_path, BODY + "broker: {managed: {port: 5674, settings: {vm_memory_high_watermark.absolute: 200MiB}}}\n"
    )
    assert s.broker.url == "amqp://guest:guest@127.0.0.1:5674/"
    assert s.broker.managed.port == 5674 and dict(s.broker.managed.settings) == {
        "vm_memory_high_watermark.absolute": "200MiB"
    }
    assert s.broker.managed.keep is False and s.broker.url_is_default is False
    assert load(tmp_path, BODY + "broker: {managed: true}\n").broker.managed.port == 5673
    assert s.to_dict()["broker"]["managed"] == {
        "port": 5674,
        "keep": False,
        "settings": {"vm_memory_high_watermark.absolute": "200MiB"},
    }


def test_the_environment_url_does_not_replace_a_managed_node(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(BODY + "broker: {managed: {port: 5675}}\n")
    s = load_scenario(path, env={"SOJOURN_AMQP_URL": "amqp://u:p@elsewhere:5672/"})
    assert s.broker.url == "amqp://guest:guest@127.0.0.1:5675/"


def test_bad_managed_settings_are_located(tmp_path):
    assert error(tmp_path, BODY + "broker: {url: 'amqp://h/', managed: true}\n").startswith(
        "broker.url: give broker.url or broker.managed, not both"
    )
    assert (
        error(tmp_path, BODY + "broker: {managed: {prot: 1}}\n")
        == "broker.managed.prot: unknown key (did you mean 'port'?)"
    )
    assert (
        error(tmp_path, BODY + "broker: {managed: {port: 0}}\n")
        == "broker.managed.port: expected an integer between 1 and 65535, got 0"
    )
    assert error(tmp_path, BODY + "broker: {managed: {settings: {listeners.tcp.other: 1}}}\n").startswith(
        "broker.managed.settings.listeners.tcp.other:"
    )


def test_url_is_default_only_when_nothing_gave_one(tmp_path):
    assert load(tmp_path, BODY).broker.url_is_default is True
    assert load(tmp_path, BODY + "broker: {url: 'amqp://h/'}\n").broker.url_is_default is False
    assert load(tmp_path, BODY, "broker.url=amqp://h/").broker.url_is_default is False
    path = tmp_path / "y.yaml"
    path.write_text(BODY)
    assert load_scenario(path, env={"SOJOURN_AMQP_URL": "amqp://h/"}).broker.url_is_default is False
    assert load(tmp_path, BODY) == load(tmp_path, BODY + "broker: {url: 'amqp://guest:guest@127.0.0.1:5672/'}\n")
