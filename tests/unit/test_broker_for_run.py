"""broker_for_run when nothing answers at the default URL and no private node can stand in: the
user gets the masked URL and why, as BrokerUnreachable (the CLI's exit 3), not a TypeError."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import loadgen.broker.for_run as for_run
from loadgen.broker.managed import BrokerNotInstalled
from loadgen.errors import BrokerUnreachable


def test_no_broker_and_no_rabbitmq_server_is_a_clear_unreachable_error(monkeypatch):
    def nothing_answers(url, timeout_s):
        raise BrokerUnreachable(url, "connection refused")

    class NotInstalled:
        def __init__(self, *args, **kwargs):
            self.url, self.node, self.dir = "amqp://guest:guest@127.0.0.1:5672/", "n", "d"

        def is_running(self):
            return False

        def start(self, progress):
            raise BrokerNotInstalled()

    monkeypatch.setattr(for_run, "probe", nothing_answers)
    monkeypatch.setattr(for_run, "ManagedBroker", NotInstalled)
    scenario = SimpleNamespace(
        broker=SimpleNamespace(
            managed=None, url="amqp://guest:s3cret@127.0.0.1:5672/", url_is_default=True, connect_timeout_s=1.0
        )
    )
    with pytest.raises(BrokerUnreachable) as caught, for_run.broker_for_run(scenario, say=lambda _m: None):
        pass
    assert caught.value.url == "amqp://guest:****@127.0.0.1:5672/"
    assert "rabbitmq-server is not installed" in str(caught.value)
    assert "s3cret" not in str(caught.value)
