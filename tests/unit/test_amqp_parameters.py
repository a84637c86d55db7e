"""Broker URLs: amqp and amqps are both accepted; TLS verifies the URL's host by default."""

import ssl

import pytest

from loadgen.amqp.connection import parameters


def test_amqp_url_is_plaintext_on_5672():
    p = parameters("amqp://guest:guest@127.0.0.1:5672/")
    assert (p.host, p.port, p.ssl_options) == ("127.0.0.1", 5672, None)


def test_amqps_url_uses_tls_on_5671_and_checks_the_host_name(monkeypatch):
    monkeypatch.delenv("SOJOURN_TLS_INSECURE", raising=False)
    monkeypatch.delenv("SOJOURN_TLS_CAFILE", raising=False)
    p = parameters("amqps://app:secret@broker.example/vhost")
    assert p.port == 5671 and p.virtual_host == "vhost"
    assert p.ssl_options.server_hostname == "broker.example"
    assert p.ssl_options.context.check_hostname is True
    assert p.ssl_options.context.verify_mode == ssl.CERT_REQUIRED


def test_insecure_tls_is_an_explicit_choice(monkeypatch):
    monkeypatch.setenv("SOJOURN_TLS_INSECURE", "1")
    p = parameters("amqps://app:secret@10.0.0.1:5671/")
    assert p.ssl_options.context.verify_mode == ssl.CERT_NONE


def test_other_schemes_are_refused_with_the_password_masked():
    with pytest.raises(ValueError) as err:
        parameters("http://app:secret@h/")
    assert "secret" not in str(err.value) and "scheme must be amqp or amqps" in str(err.value)


def test_connection_settings_come_from_the_scenario():
    p = parameters("amqp://h/", heartbeat_s=7, connect_timeout_s=2.5, name="sojourn-consumer-c/w/0")
    assert (p.heartbeat, p.socket_timeout) == (7, 2.5)
    assert p.client_properties["connection_name"] == "sojourn-consumer-c/w/0"
