"""The private broker's rabbitmq.conf: rendering and validation (pure; no broker)."""

from __future__ import annotations

import pytest

from loadgen.broker import (
    BrokerSettingsError,
    ManagedBroker,
    default_dir,
    effective_settings,
    parse_setting,
    render_config,
    watermark_settings,
)
from loadgen.broker.config import tls_ports


def conf_lines(text: str) -> dict[str, str]:
    pairs = [line.split(" = ", 1) for line in text.splitlines() if line and not line.startswith("#")]
    return dict(pairs)


def test_the_listener_is_bound_to_loopback_on_the_given_port():
    assert conf_lines(render_config({}, port=5699))["listeners.tcp.default"] == "127.0.0.1:5699"


def test_without_settings_the_node_gets_rabbitmqs_default_watermark_and_disk_limit():
    conf = conf_lines(render_config(None, port=5673))
    assert conf["vm_memory_high_watermark.relative"] == "0.4"
    assert conf["disk_free_limit.absolute"] == "50MB"


def test_an_absolute_watermark_replaces_the_default_relative_one():
    conf = conf_lines(render_config({"vm_memory_high_watermark.absolute": "150MiB"}, port=5673))
    assert conf["vm_memory_high_watermark.absolute"] == "150MiB"
    assert "vm_memory_high_watermark.relative" not in conf


def test_a_relative_disk_limit_replaces_the_default_absolute_one():
    conf = conf_lines(render_config({"disk_free_limit.relative": 1.5}, port=5673))
    assert conf["disk_free_limit.relative"] == "1.5"
    assert "disk_free_limit.absolute" not in conf


def test_other_settings_are_written_as_given_after_the_defaults():
    text = render_config({"queue_index_embed_msgs_below": 0, "log.file.level": "debug"}, port=5673)
    assert text.splitlines()[-2:] == ["queue_index_embed_msgs_below = 0", "log.file.level = debug"]


def test_yaml_booleans_become_rabbitmq_booleans():
    assert effective_settings({"log.console": True})["log.console"] == "true"


def test_watermark_in_mib_is_written_as_bytes():
    assert watermark_settings(absolute_mb=100) == {"vm_memory_high_watermark.absolute": str(100 * 1024 * 1024)}
    assert watermark_settings(absolute_mb=0.5) == {"vm_memory_high_watermark.absolute": "524288"}


def test_relative_watermark_is_written_as_the_fraction():
    assert watermark_settings(relative=0.2) == {"vm_memory_high_watermark.relative": "0.2"}


def test_a_whole_number_fraction_is_written_as_a_float_because_rabbitmq_types_it_so():
    assert watermark_settings(relative=1) == {"vm_memory_high_watermark.relative": "1.0"}


def test_no_watermark_option_means_no_setting():
    assert watermark_settings() == {}


def test_a_zero_watermark_is_allowed_because_it_blocks_every_publisher():
    assert effective_settings({"vm_memory_high_watermark.relative": "0"})["vm_memory_high_watermark.relative"] == "0.0"


@pytest.mark.parametrize(
    "settings, key",
    [
        (
            {"vm_memory_high_watermark.relative": "0.3", "vm_memory_high_watermark.absolute": "1GB"},
            "vm_memory_high_watermark.absolute",
        ),
        ({"disk_free_limit.absolute": "1GB", "disk_free_limit.relative": "1.0"}, "disk_free_limit.relative"),
    ],
)
def test_relative_and_absolute_forms_of_one_limit_conflict(settings, key):
    with pytest.raises(BrokerSettingsError, match="conflicts with") as caught:
        effective_settings(settings)
    assert caught.value.key == key


def test_both_watermark_options_at_once_are_refused():
    with pytest.raises(BrokerSettingsError, match="not both"):
        watermark_settings(relative=0.2, absolute_mb=100)


@pytest.mark.parametrize(
    "key, value, reason",
    [
        ("vm_memory_high_watermark.relative", "1.5", "fraction from 0 to 1"),
        ("vm_memory_high_watermark.relative", "-0.1", "fraction from 0 to 1"),
        ("vm_memory_high_watermark.relative", "lots", "must be a number"),
        ("vm_memory_high_watermark.absolute", "100 MB", "size such as 100MiB"),
        ("vm_memory_high_watermark.absolute", "-5", "size such as 100MiB"),
        ("disk_free_limit.absolute", "1.5GB", "size such as 100MiB"),
        ("disk_free_limit.absolute", "2TB", "size such as 100MiB"),
        ("listeners.tcp.default", "0.0.0.0:5672", "use --port"),
        ("listeners.tcp.other", "5674", "use --port"),
        ("listeners.ssl.default", "5671", "loopback only"),
        ("listeners.ssl.default", "0.0.0.0:5671", "loopback only"),
        ("listeners.ssl.default", "127.0.0.1:70000", "loopback only"),
        ("ssl_options.certfile", "certs/server.pem", "absolute path"),
        ("ssl_options.keyfile", "server.key", "absolute path"),
        ("bad key", "1", "not a rabbitmq.conf key"),
        ("default_pass", "a#b", "'#'"),
        ("default_user", "a\nlisteners.tcp.x = 0.0.0.0:1", "newline"),
        ("default_user", "  ", "empty value"),
        ("channel_max", [1, 2], "string, number or boolean"),
        ("channel_max", float("nan"), "finite"),
        ("memory_monitor_interval", -1, "whole number >= 0"),
        ("memory_monitor_interval", "often", "whole number >= 0"),
        ("vm_memory_high_watermark_paging_ratio", "abc", "must be a number"),
        ("vm_memory_high_watermark_paging_ratio", 1.5, "fraction from 0 to 1"),
        ("channel_max", 70_000, "whole number from 0 to 65,535"),
        ("heartbeat", 65_536, "whole number from 0 to 65,535"),
        ("consumer_timeout", 0, "whole number >= 1"),
        ("max_message_size", 2**30, "whole number from 1 to 536,870,912"),
        ("log.console", "yes", "true or false"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_key_and_the_reason(key, value, reason):
    with pytest.raises(BrokerSettingsError, match=reason) as caught:
        effective_settings({key: value})
    assert caught.value.key == key
    assert key in str(caught.value)


def test_typed_settings_within_their_bounds_are_written_as_given():
    settings = effective_settings(
        {
            "memory_monitor_interval": 0,
            "channel_max": 65_535,
            "heartbeat": 0,
            "consumer_timeout": 1_800_000,
            "vm_memory_high_watermark_paging_ratio": 0.75,
            "log.console": True,
        }
    )
    assert {k: settings[k] for k in ("memory_monitor_interval", "channel_max", "heartbeat", "consumer_timeout")} == {
        "memory_monitor_interval": "0",
        "channel_max": "65535",
        "heartbeat": "0",
        "consumer_timeout": "1800000",
    }
    assert settings["vm_memory_high_watermark_paging_ratio"] == "0.75" and settings["log.console"] == "true"


@pytest.mark.parametrize("value", ["104857600", "100MB", "100MiB", "2GB", "2GiB", "512kB", "1024M", "64k"])
def test_information_units_rabbitmq_accepts_are_accepted(value):
    # disk_free_limit: the same units; a memory watermark below 1 MiB (512kB, 64k) is refused for
    # its size (tests/unit/test_broker_limits.py)
    assert effective_settings({"disk_free_limit.absolute": value})["disk_free_limit.absolute"] == value


def test_a_negative_watermark_in_mib_is_refused():
    with pytest.raises(BrokerSettingsError, match="MiB >= 0"):
        watermark_settings(absolute_mb=-1)


def test_parse_setting_splits_on_the_first_equals_sign():
    assert parse_setting("default_pass = a=b ") == ("default_pass", "a=b")


def test_parse_setting_without_equals_sign_is_refused():
    with pytest.raises(BrokerSettingsError, match="expected key=value"):
        parse_setting("vm_memory_high_watermark.relative")


@pytest.mark.parametrize("port", [0, 65536, "5673", True])
def test_a_port_outside_1_to_65535_is_refused(port):
    with pytest.raises(BrokerSettingsError, match="1 to 65535"):
        render_config({}, port=port)


def test_the_managed_broker_validates_settings_when_made():
    with pytest.raises(BrokerSettingsError):
        ManagedBroker("/nonexistent", 5673, {"vm_memory_high_watermark.relative": "2"})


def test_the_node_name_url_and_default_directory_follow_the_port():
    broker = ManagedBroker(port=5701)
    assert broker.node == "sojourn-5701@localhost"
    assert broker.url == "amqp://guest:guest@127.0.0.1:5701/"
    assert broker.dir == default_dir(5701) == default_dir(5701, ".")
    assert str(broker.dir) == ".sojourn/broker/sojourn-5701"


def test_the_watermark_is_described_as_configured():
    assert ManagedBroker(port=5701).watermark == "relative 0.4"
    assert ManagedBroker(port=5701, settings=watermark_settings(absolute_mb=1)).watermark == "absolute 1048576 (1 MiB)"


# -- the command line, where it needs no broker -----------------------------------------------
def test_without_rabbitmq_installed_up_exits_2_naming_the_package(monkeypatch, tmp_path, capsys):
    import loadgen.broker.managed as managed
    from loadgen.cli import main

    monkeypatch.setattr(managed.shutil, "which", lambda _name: None)
    monkeypatch.setattr(managed, "FALLBACK_SCRIPTS", tmp_path / "no-rabbitmq")
    assert main(["broker", "up", "--dir", str(tmp_path / "b")]) == 2
    assert "apt-get install -y rabbitmq-server" in capsys.readouterr().err


def test_a_bad_setting_on_the_command_line_exits_2_before_anything_starts(tmp_path, capsys):
    from loadgen.cli import main

    assert main(["broker", "up", "--dir", str(tmp_path / "b"), "--setting", "vm_memory_high_watermark.relative=3"]) == 2
    assert "vm_memory_high_watermark.relative" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_a_corrupt_state_file_is_reported_not_raised(tmp_path, capsys):
    from loadgen.cli import main

    (tmp_path / "sojourn-broker.json").write_text("{not json")
    assert main(["broker", "status", "--dir", str(tmp_path)]) == 2
    assert "sojourn-broker.json" in capsys.readouterr().err


def test_an_amqps_listener_on_loopback_and_its_certificate_files_are_written_as_given():
    tls = {
        "listeners.ssl.default": "127.0.0.1:5671",
        "ssl_options.cacertfile": "/tmp/c/ca.pem",
        "ssl_options.certfile": "/tmp/c/server.pem",
        "ssl_options.keyfile": "/tmp/c/server.key",
        "ssl_options.verify": "verify_none",
        "ssl_options.fail_if_no_peer_cert": False,
    }
    conf = conf_lines(render_config(tls, port=5673))
    assert conf["listeners.tcp.default"] == "127.0.0.1:5673"
    assert conf["listeners.ssl.default"] == "127.0.0.1:5671"
    assert conf["ssl_options.keyfile"] == "/tmp/c/server.key"
    assert conf["ssl_options.fail_if_no_peer_cert"] == "false"
    assert tls_ports(effective_settings(tls)) == {"listeners.ssl.default": 5671}


def test_the_amqps_listener_can_not_share_the_amqp_port():
    with pytest.raises(BrokerSettingsError, match="other than the AMQP port 5673") as caught:
        render_config({"listeners.ssl.default": "127.0.0.1:5673"}, port=5673)
    assert caught.value.key == "listeners.ssl.default"


def test_a_taken_amqps_port_is_refused_before_the_node_starts(tmp_path):
    import socket

    from loadgen.broker import BrokerNotInstalled, BrokerPortInUse

    with socket.socket() as busy, socket.socket() as free:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        free.bind(("127.0.0.1", 0))
        amqp_port, tls_port = free.getsockname()[1], busy.getsockname()[1]
        free.close()
        broker = ManagedBroker(tmp_path / "node", amqp_port, {"listeners.ssl.default": f"127.0.0.1:{tls_port}"})
        try:
            broker.start(timeout=1)
        except BrokerNotInstalled:
            pytest.skip("rabbitmq-server is not installed")
        except BrokerPortInUse as exc:
            assert exc.port == tls_port
            assert "TLS (amqps) port" in str(exc) and "listeners.ssl.default" in str(exc)
        else:  # pragma: no cover - it started: stop it before failing
            broker.stop(purge=True)
            pytest.fail("the node started although its TLS port was taken")
    assert not (tmp_path / "node").exists(), "nothing is written before the checks pass"


def test_a_management_port_adds_the_plugins_loopback_http_listener():
    conf = conf_lines(render_config({}, port=5673, management_port=15673))
    assert conf["management.tcp.ip"] == "127.0.0.1"
    assert conf["management.tcp.port"] == "15673"
    assert "management.tcp.port" not in conf_lines(render_config({}, port=5673))


def test_the_management_port_must_differ_from_the_amqp_port():
    with pytest.raises(BrokerSettingsError, match=r"--management-port.*5673"):
        render_config({}, port=5673, management_port=5673)


def test_the_management_port_is_kept_in_the_state_file_and_found_again(tmp_path):
    broker = ManagedBroker(tmp_path / "b", port=5673, management_port=15673)
    broker._write_files(25673)
    assert (tmp_path / "b" / "enabled_plugins").read_text() == "[rabbitmq_management].\n"
    again = ManagedBroker.from_dir(tmp_path / "b")
    assert again.management_url == "http://127.0.0.1:15673/api/"
    assert ManagedBroker(tmp_path / "c", port=5673).management_url is None
