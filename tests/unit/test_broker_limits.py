"""Managed-node settings that can not work are refused with the reason; those RabbitMQ accepts but
that block publishing from the start are warned about (issue 48). Expected byte counts are written
out by hand, not computed with the code under test."""

from __future__ import annotations

import pytest

from loadgen.broker import config
from loadgen.broker.config import BrokerSettingsError, check_against_host, effective_settings, information_bytes
from loadgen.scenario import ScenarioError, load_scenario


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("123", 123),
        ("512k", 524_288),
        ("1kiB", 1_024),
        ("1kB", 1_000),
        ("100MiB", 104_857_600),
        ("100MB", 100_000_000),
        ("2M", 2_097_152),
        ("1GiB", 1_073_741_824),
        ("1GB", 1_000_000_000),
    ],
)
def test_sizes_are_read_as_rabbitmq_reads_them(text, expected):
    assert information_bytes(text) == expected


@pytest.mark.parametrize("value", ["123", 123, "1048575", "1023k", "1MB"])  # 1MB = 1,000,000 < 1,048,576
def test_a_nonzero_absolute_watermark_below_1_mib_is_refused_with_the_reason(value):
    with pytest.raises(BrokerSettingsError) as caught:
        effective_settings({"vm_memory_high_watermark.absolute": value})
    assert caught.value.key == "vm_memory_high_watermark.absolute"
    assert "can not work" in caught.value.reason and "125-140 MiB" in caught.value.reason


def test_the_bare_number_hint_names_the_unit_it_probably_lacked():
    with pytest.raises(BrokerSettingsError, match=r"did you mean 123MiB\?"):
        effective_settings({"vm_memory_high_watermark.absolute": 123})


@pytest.mark.parametrize("value", ["0", "1048576", "1MiB", "230MiB"])
def test_zero_and_from_1_mib_up_are_accepted(value):
    assert effective_settings({"vm_memory_high_watermark.absolute": value})["vm_memory_high_watermark.absolute"] == (
        value
    )


@pytest.mark.parametrize("value", ["-0.1", "1.01", "2"])
def test_a_relative_watermark_outside_0_to_1_is_refused(value):
    with pytest.raises(BrokerSettingsError, match="fraction from 0 to 1"):
        effective_settings({"vm_memory_high_watermark.relative": value})


def test_a_scenario_names_file_field_and_value(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nqueue: {name: q}\nrun: {duration_s: 1}\n"
        "broker: {managed: {settings: {vm_memory_high_watermark.absolute: 123}}}\n"
    )
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, env={})
    text = str(caught.value)
    assert text.startswith(f"{path}: broker.managed.settings.vm_memory_high_watermark.absolute: 123 bytes can not work")
    assert text.endswith("got '123'")


def test_a_disk_limit_above_the_disks_size_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "_disk", lambda _d: (10 * 2**30, 5 * 2**30))  # a 10 GiB disk, 5 GiB free
    with pytest.raises(BrokerSettingsError) as caught:
        check_against_host(effective_settings({"disk_free_limit.absolute": "11GiB"}), tmp_path)
    assert caught.value.key == "disk_free_limit.absolute"
    assert "asks for 11,264 MiB free on a disk of 10,240 MiB" in caught.value.reason
    check_against_host(effective_settings({"disk_free_limit.absolute": "10GiB"}), tmp_path)  # the whole disk: allowed
    monkeypatch.setattr(config, "_ram_bytes", lambda: 8 * 2**30)
    with pytest.raises(BrokerSettingsError, match=r"disk_free_limit\.relative"):
        check_against_host(effective_settings({"disk_free_limit.relative": 1.5}), tmp_path)  # 12 GiB > 10 GiB


def test_what_blocks_publishing_at_once_is_warned_about(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "_disk", lambda _d: (10 * 2**30, 5 * 2**30))
    monkeypatch.setattr(config, "_ram_bytes", lambda: 8 * 2**30)

    def warnings(settings):
        return config.settings_warnings(effective_settings(settings), tmp_path)

    assert warnings({}) == []  # RabbitMQ's defaults: 0.4 of 8 GiB, 50MB of 5 GiB free
    [low] = warnings({"vm_memory_high_watermark.absolute": "100MiB"})
    assert low.startswith("vm_memory_high_watermark.absolute=100MiB: 100.0 MiB is below a node's own use")
    assert warnings({"vm_memory_high_watermark.absolute": "128MiB"}) == []
    assert len(warnings({"vm_memory_high_watermark.relative": 0})) == 1
    assert len(warnings({"vm_memory_high_watermark.relative": 0.01})) == 1  # 81.9 MiB of 8 GiB
    assert warnings({"vm_memory_high_watermark.relative": 0.02}) == []  # 163.8 MiB
    [disk] = warnings({"disk_free_limit.absolute": "6GiB"})
    assert "more than the 5,120 MiB free now" in disk


def test_broker_up_refuses_a_disk_limit_above_the_disk_before_it_starts_a_node(monkeypatch, tmp_path, capsys):
    """`sojourn broker up --setting` is held to the same checks as a scenario's private node: exit 2,
    the key and value named, and no node started."""
    from loadgen.broker import managed
    from loadgen.cli import main

    monkeypatch.setattr(config, "_disk", lambda _d: (10 * 2**30, 5 * 2**30))
    started = []
    monkeypatch.setattr(managed.ManagedBroker, "start", lambda self, **_kw: started.append(self))
    argv = ["broker", "up", "--dir", str(tmp_path / "node"), "--setting", "disk_free_limit.absolute=11GiB"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "disk_free_limit.absolute='11GiB'" in err and "a disk of 10,240 MiB" in err
    assert started == []


def test_broker_up_says_what_would_block_every_publisher(monkeypatch, tmp_path, capsys):
    from loadgen.broker import managed
    from loadgen.cli import main

    monkeypatch.setattr(config, "_disk", lambda _d: (10 * 2**30, 5 * 2**30))

    class Started:
        seconds, pid = 0.1, 1234

    monkeypatch.setattr(managed.ManagedBroker, "start", lambda self, **_kw: Started())
    argv = ["broker", "up", "--dir", str(tmp_path / "node"), "--setting", "disk_free_limit.absolute=6GiB"]
    assert main(argv) == 0
    assert "warning: disk_free_limit.absolute=6GiB" in capsys.readouterr().err
